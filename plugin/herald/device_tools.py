"""Agent tools over the devices: list them, show a card, run a device action.

The parameters are those of the hermes-gadget-sdk plugin (``gadget_action {action, args,
device}``, ``gadget_display {text, title, seconds, device}``), so skills written for it
work here; the older ``name`` / ``body`` / ``ttl_s`` are still accepted. Tools reach only
paired devices: Hermes decides who is paired, and herald refuses the rest as well.

Handlers run on the agent's worker thread; each makes blocking requests to the bridge's
event loop. They exist only where herald runs in-process (the gateway).
"""

from __future__ import annotations

import json
from typing import Any

from . import compat
from .adapter import live_adapter
from .bridge import BridgeError, HeraldBridge, running_bridge
from .wire import Card, Chat, Device, Json

# herald gives up on a device action after 18 s; wait a little longer for its answer.
ACTION_WAIT_S = 25.0

DEVICE_PARAM = {
    "type": "string",
    "description": "Gadget id (hg-...). Defaults to the gadget this conversation is on, "
    "or the only paired gadget online.",
}

DEVICES_SCHEMA: Json = {
    "name": "gadget_devices",
    "description": "List the user's paired Herald gadgets (online or not; for those online "
    "their screen, speaker and the actions each offers for gadget_action), plus how many "
    "gadgets wait for pairing approval.",
    "parameters": {"type": "object", "properties": {}, "required": []},
}

DISPLAY_SCHEMA: Json = {
    "name": "gadget_display",
    "description": "Show a card with a short title and text on a gadget's small screen.",
    "parameters": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The card's text"},
            "title": {"type": "string", "description": "A short title"},
            "seconds": {"type": "integer", "description": "Seconds to show it; 0 keeps it until dismissed."},
            "device": DEVICE_PARAM,
        },
        "required": ["text"],
    },
}

ACTION_SCHEMA: Json = {
    "name": "gadget_action",
    "description": "Run one of a gadget's actions (listed by gadget_devices) and return its result.",
    "parameters": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "description": "The action's name, e.g. led.set"},
            "args": {"type": "object", "description": "The action's arguments"},
            "device": DEVICE_PARAM,
        },
        "required": ["action"],
    },
}


class ToolError(Exception):
    """A tool call the agent got wrong; the message tells it how to do better."""


def available() -> bool:
    return running_bridge() is not None


def gadget_devices(args: dict[str, Any], **_: Any) -> str:
    try:
        paired = _paired_gadgets(_bridge())
        return json.dumps({"devices": paired, "waiting_for_approval": _waiting("gadget")})
    except (BridgeError, ToolError) as err:
        return _error(err)


def gadget_display(args: dict[str, Any], **_: Any) -> str:
    try:
        text = args.get("text", args.get("body"))
        if not isinstance(text, str) or not text.strip():
            raise ToolError("gadget_display needs `text`, the words to show")
        card: Card = {"title": str(args.get("title") or ""), "body": text}
        seconds = args.get("seconds", args.get("ttl_s"))
        if isinstance(seconds, int) and seconds >= 0:
            card["ttl_s"] = seconds
        bridge = _bridge()
        chat = _gadget(bridge, args.get("device"))
        bridge.call_from_thread({"op": "display", "args": {"chat": chat, "card": card}})
        return json.dumps({"success": True, "device": chat["id"]})
    except (BridgeError, ToolError) as err:
        return _error(err)


def gadget_action(args: dict[str, Any], **_: Any) -> str:
    try:
        name = args.get("action", args.get("name"))
        if not isinstance(name, str) or not name.strip():
            raise ToolError(
                "gadget_action needs `action`, the name of one of the device's actions "
                "(gadget_devices lists them)"
            )
        bridge = _bridge()
        chat = _gadget(bridge, args.get("device"))
        action_args: Json = args["args"] if isinstance(args.get("args"), dict) else {}
        result = bridge.call_from_thread(
            {"op": "invoke_action", "args": {"chat": chat, "name": name, "args": action_args}},
            timeout=ACTION_WAIT_S,
        )
        return json.dumps({"success": True, "device": chat["id"], "result": result.get("result")})
    except (BridgeError, ToolError) as err:
        return _error(err)


def _bridge() -> HeraldBridge:
    bridge = running_bridge()
    if bridge is None:
        raise BridgeError("unavailable", "herald is not running in this process")
    return bridge


def _paired_gadgets(bridge: HeraldBridge) -> list[Device]:
    """herald's gadgets (online or not) that Hermes lets talk."""
    listed = bridge.call_from_thread({"op": "devices", "args": {"platform": "gadget"}}).get("devices", [])
    return [d for d in listed if _paired(d["id"])]


def _paired(device_id: str) -> bool:
    """Hermes's decision for a gadget, whose id is its user id."""
    adapter = live_adapter("gadget")
    return adapter is not None and adapter.pairing.is_authorized(device_id)


def _waiting(platform: str) -> int:
    adapter = live_adapter(platform)
    store = compat.pairing_store(adapter.gateway_runner) if adapter else None
    return len(store.list_pending(platform)) if store is not None else 0


def _gadget(bridge: HeraldBridge, device: Any) -> Chat:
    """The gadget a tool call means: named, this conversation's, or the only paired one online."""
    if isinstance(device, str) and device:
        if not _paired(device):
            raise ToolError(f"{device} is not a paired gadget; gadget_devices lists those")
        return {"platform": "gadget", "id": device}
    if compat.session_env("HERMES_SESSION_PLATFORM") == "gadget":
        chat_id = compat.session_env("HERMES_SESSION_CHAT_ID")
        if chat_id:
            return {"platform": "gadget", "id": chat_id}
    online = [d for d in _paired_gadgets(bridge) if d["online"]]
    if len(online) == 1:
        return {"platform": "gadget", "id": online[0]["id"]}
    names = ", ".join(d["id"] for d in online) or "none"
    raise ToolError(f"name the device: paired gadgets online are {names}")


def _error(err: BridgeError | ToolError) -> str:
    if isinstance(err, ToolError):
        return json.dumps({"error": str(err), "kind": "bad_request"})
    return json.dumps({"error": err.message or err.kind, "kind": err.kind})
