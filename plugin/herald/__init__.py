"""Herald as Hermes platforms: ``register(ctx)`` wires the plugin into Hermes.

Two platforms (``gadget``, ``mobile``) served by one herald child process, the device
tools, the ``hermes gadget`` / ``hermes mobile`` commands, and the approval hook that
withdraws stale cards. See DESIGN.md in the repository's ``plugin/`` directory.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

from . import compat
from .adapter import HeraldAdapter
from .cli import run_gadget, run_mobile, setup_gadget, setup_mobile
from .device_tools import (
    ACTION_SCHEMA,
    DEVICES_SCHEMA,
    DISPLAY_SCHEMA,
    available,
    gadget_action,
    gadget_devices,
    gadget_display,
)
from .hooks import note_model_error, note_run_over, note_run_started, settle_approval
from .locations import find_herald
from .sender import standalone_sender
from .targets import parse_target, valid_target

INSTALL_HINT = "pip install the herald-hermes wheel into Hermes's Python environment, or set HERALD_BIN"

GADGET_HINT = (
    "You are talking through a small voice gadget: a screen of a few short lines and a "
    "speaker. The user mostly speaks, and you get their words through speech-to-text, so "
    "expect misheard words and read them charitably. Answer briefly in plain spoken "
    "language: one to three short sentences unless asked for more, no markdown, tables, "
    "code blocks, links or emoji. Yes/no questions are answered with the device's buttons."
)

MOBILE_HINT = (
    "You are chatting in a phone app. The user types or speaks (voice reaches you through "
    "speech-to-text, so expect misheard words). Keep replies compact for a small screen; "
    "simple markdown is fine, wide tables are not."
)


def always_configured(_config: Any = None) -> bool:
    """``is_connected``: herald needs no credentials, so an enabled plugin is configured;
    whether it can run is ``check_fn``'s question."""
    return True


_missing_reported = False


def herald_installed(_config: Any = None) -> bool:
    """``check_fn``: without the binary Hermes leaves both platforms out and says only
    "No messaging platforms enabled", so say why here, once."""
    global _missing_reported
    if find_herald() is not None:
        return True
    if not _missing_reported:
        _missing_reported = True
        configured = os.environ.get("HERALD_BIN")
        where = f"HERALD_BIN={configured} is not an executable" if configured else "no herald binary found"
        logging.getLogger(__name__).error(
            "Herald's gadget and mobile platforms are off: %s. Fix: %s, then restart the gateway.",
            where,
            INSTALL_HINT,
        )
    return False


def home_channel(variable: str) -> Callable[[], dict[str, Any] | None]:
    """``env_enablement_fn``: the home channel that /sethome saved, for ``hermes send``."""

    def seed() -> dict[str, Any] | None:
        chat_id = os.getenv(variable, "").strip()
        return {"home_channel": {"chat_id": chat_id, "name": "Home"}} if chat_id else None

    return seed


def target_keywords(platform: str) -> dict[str, Any]:
    """``hermes send --to gadget:ID`` support where Hermes asks platforms (0.20 and later;
    0.19 has no such keywords and refuses unknown ones)."""
    if "parse_target_ref_fn" not in compat.platform_entry_fields():
        return {}
    return {"parse_target_ref_fn": parse_target(platform), "validate_target_ref_fn": valid_target(platform)}


def register(ctx: Any) -> None:
    for name, label, emoji, hint in (
        ("gadget", "Gadget", "📟", GADGET_HINT),
        ("mobile", "Mobile", "📱", MOBILE_HINT),
    ):
        prefix = name.upper()
        ctx.register_platform(
            name=name,
            label=label,
            adapter_factory=lambda config, name=name: HeraldAdapter(config, name),
            check_fn=herald_installed,
            is_connected=always_configured,
            install_hint=INSTALL_HINT,
            allowed_users_env=f"{prefix}_ALLOWED_USERS",
            allow_all_env=f"{prefix}_ALLOW_ALL_USERS",
            cron_deliver_env_var=f"{prefix}_HOME_CHANNEL",
            env_enablement_fn=home_channel(f"{prefix}_HOME_CHANNEL"),
            standalone_sender_fn=standalone_sender(name),
            platform_hint=hint,
            emoji=emoji,
            **target_keywords(name),
        )
    device_tools = (
        (DEVICES_SCHEMA, gadget_devices),
        (DISPLAY_SCHEMA, gadget_display),
        (ACTION_SCHEMA, gadget_action),
    )
    # A gadget's conversation is about the gadget: its tools are never behind a search.
    compat.keep_tools_in_view(schema["name"] for schema, _handler in device_tools)
    for schema, handler in device_tools:
        ctx.register_tool(
            name=schema["name"],
            toolset="herald",
            schema=schema,
            handler=handler,
            check_fn=available,
            description=schema["description"],
            emoji="📟",
        )
    ctx.register_cli_command(
        name="gadget",
        help="Herald gadgets: info, devices, forget, pair, update",
        setup_fn=setup_gadget,
        handler_fn=run_gadget,
    )
    ctx.register_cli_command(
        name="mobile",
        help="Herald phones: info, devices",
        setup_fn=setup_mobile,
        handler_fn=run_mobile,
    )
    ctx.register_hook("post_approval_response", settle_approval)
    # When a chat's agent run begins and ends: follow-ups are held while its turn is
    # only wrapping up (followups.py).
    ctx.register_hook("pre_llm_call", note_run_started)
    ctx.register_hook("on_session_end", note_run_over)
    # A model that keeps failing ends the device's turn as failed at once.
    ctx.register_hook("api_request_error", note_model_error)
