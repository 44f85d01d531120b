"""Agent tools over the devices: list them, show a card, run a device action.

Handlers run on the agent's worker thread; each makes one blocking request to the
bridge's event loop. They exist only where herald runs in-process (the gateway).
"""

from __future__ import annotations

import json
from typing import Any

from .bridge import BridgeError, HeraldBridge, Json, running_bridge

# herald gives up on a device action after 18 s; wait a little longer for its answer.
ACTION_WAIT_S = 25.0

DEVICE_PARAM = {
    "type": "string",
    "description": "Gadget id (hg-...). Defaults to the gadget this conversation is on, "
    "or the only gadget online.",
}

DEVICES_SCHEMA: Json = {
    "name": "gadget_devices",
    "description": "List the user's Herald gadgets and phones: which are online, and the "
    "actions each gadget offers (use them with gadget_action).",
    "parameters": {"type": "object", "properties": {}, "required": []},
}

DISPLAY_SCHEMA: Json = {
    "name": "gadget_display",
    "description": "Show a card (a short title and body) on a gadget's small screen.",
    "parameters": {
        "type": "object",
        "properties": {
            "device": DEVICE_PARAM,
            "title": {"type": "string"},
            "body": {"type": "string"},
            "ttl_s": {"type": "integer", "description": "Seconds to show it; 0 keeps it until dismissed."},
        },
        "required": ["title", "body"],
    },
}

ACTION_SCHEMA: Json = {
    "name": "gadget_action",
    "description": "Run one of a gadget's actions (listed by gadget_devices) and return its result.",
    "parameters": {
        "type": "object",
        "properties": {
            "device": DEVICE_PARAM,
            "name": {"type": "string", "description": "The action's name, e.g. led.set"},
            "args": {"type": "object", "description": "The action's arguments"},
        },
        "required": ["name"],
    },
}


def available() -> bool:
    return running_bridge() is not None


def gadget_devices(args: dict[str, Any], **_: Any) -> str:
    try:
        return json.dumps(_bridge().call_from_thread("devices", {}))
    except BridgeError as err:
        return _error(err)


def gadget_display(args: dict[str, Any], **_: Any) -> str:
    try:
        bridge = _bridge()
        card: Json = {"title": str(args.get("title", "")), "body": str(args.get("body", ""))}
        if isinstance(args.get("ttl_s"), int):
            card["ttl_s"] = args["ttl_s"]
        chat = _gadget(bridge, args.get("device"))
        bridge.call_from_thread("display", {"chat": chat, "card": card})
        return json.dumps({"success": True, "device": chat["id"]})
    except BridgeError as err:
        return _error(err)


def gadget_action(args: dict[str, Any], **_: Any) -> str:
    try:
        bridge = _bridge()
        chat = _gadget(bridge, args.get("device"))
        action_args = args.get("args") if isinstance(args.get("args"), dict) else {}
        result = bridge.call_from_thread(
            "invoke_action",
            {"chat": chat, "name": str(args.get("name", "")), "args": action_args},
            timeout=ACTION_WAIT_S,
        )
        return json.dumps({"success": True, "device": chat["id"], "result": result.get("result")})
    except BridgeError as err:
        return _error(err)


def _bridge() -> HeraldBridge:
    bridge = running_bridge()
    if bridge is None:
        raise BridgeError("unavailable", "herald is not running in this process")
    return bridge


def _gadget(bridge: HeraldBridge, device: Any) -> Json:
    """The gadget a tool call means: named, this conversation's, or the only one online."""
    if isinstance(device, str) and device:
        return {"platform": "gadget", "id": device}
    from gateway.session_context import get_session_env

    if get_session_env("HERMES_SESSION_PLATFORM") == "gadget":
        chat_id = get_session_env("HERMES_SESSION_CHAT_ID")
        if chat_id:
            return {"platform": "gadget", "id": chat_id}
    listed = bridge.call_from_thread("devices", {"platform": "gadget"}).get("devices") or []
    online = [d for d in listed if isinstance(d, dict) and d.get("online")]
    if len(online) == 1:
        return {"platform": "gadget", "id": str(online[0].get("id"))}
    names = ", ".join(str(d.get("id")) for d in online) or "none"
    raise BridgeError("bad_request", f"name the device: gadgets online are {names}")


def _error(err: BridgeError) -> str:
    return json.dumps({"error": err.message or err.kind, "kind": err.kind})
