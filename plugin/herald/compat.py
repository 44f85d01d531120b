"""Every private Hermes name the plugin uses, and how it differs between Hermes lines.

The plugin is tested on Hermes 0.19, 0.20 and 0.22 (``TESTED_LINES``). Where a line has
a public way (the exec approval hook, target parsing, ``PairingStore.approve_request``)
the plugin uses it; what has none is reached from here alone, so a Hermes release that
moves a name breaks one function, and ``missing_features`` can say which feature that
costs. DESIGN.md lists each name with why no public surface serves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

logger = logging.getLogger(__name__)

# Hermes lines (major.minor) the live suite runs on, with the release each was tested at.
TESTED_LINES = {"0.19": "0.19.0", "0.20": "0.20.1", "0.22": "0.22.2"}


def hermes_version() -> str:
    """The running Hermes's version ("0.22.2.post1"), or "unknown"."""
    try:
        import hermes_cli

        return str(hermes_cli.__version__)
    except (ImportError, AttributeError):
        return "unknown"


def hermes_line(version: str) -> str:
    """The line ("0.22") of a version string."""
    return ".".join(version.split(".")[:2])


def is_tested(version: str) -> bool:
    return hermes_line(version) in TESTED_LINES


# -- features that depend on the line ----------------------------------------------


@dataclass(frozen=True)
class Feature:
    """Something the plugin offers that needs a given Hermes name."""

    name: str
    # What the feature needs, as a user of that Hermes would look it up.
    needs: str
    present: Callable[[Any, Any], bool]
    # Without it no device can be authorized: the platforms cannot run at all.
    essential: bool = False
    # What it needs is set up by the running gateway: outside it, it cannot be checked.
    live_only: bool = False


def _on(owner: str, name: str) -> Callable[[Any, Any], bool]:
    """Present when the runner's (or the adapter's) class or instance has ``name``."""

    def present(runner: Any, adapter: Any) -> bool:
        target = runner if owner == "runner" else adapter
        return target is not None and hasattr(target, name)

    return present


def _targets_parsed(_runner: Any, _adapter: Any) -> bool:
    return "parse_target_ref_fn" in platform_entry_fields()


def _voice_replies_asked(runner: Any, _adapter: Any) -> bool:
    from gateway.platforms.base import BasePlatformAdapter

    return hasattr(BasePlatformAdapter, "_streaming_tts_turn_completed") or hasattr(runner, "_should_send_voice_reply")


FEATURES = (
    Feature("who may talk", "GatewayRunner._is_user_authorized", _on("runner", "_is_user_authorized"), True),
    Feature("pairing codes", "GatewayRunner._get_unauthorized_dm_behavior", _on("runner", "_get_unauthorized_dm_behavior"), True),
    Feature("pairing approvals", "GatewayRunner.pairing_store", _on("runner", "pairing_store"), True, True),
    Feature(
        "telling a chat's own run from subagents'",
        "GatewayRunner._running_agents",
        _on("runner", "_running_agents"),
        live_only=True,
    ),
    Feature(
        "spoken replies by default on gadgets with a speaker",
        "GatewayRunner._voice_mode",
        _on("runner", "_voice_mode"),
        live_only=True,
    ),
    Feature("auto_home", "GatewayRunner.config.platforms", _on("runner", "config"), live_only=True),
    Feature(
        "no second, whole-file speech of a turn a gadget hears as it streams",
        "BasePlatformAdapter._streaming_tts_turn_completed, or GatewayRunner._should_send_voice_reply (0.19)",
        _voice_replies_asked,
    ),
    Feature(
        "holding follow-ups while a turn ends",
        "BasePlatformAdapter._session_tasks",
        _on("adapter", "_session_tasks"),
        live_only=True,
    ),
    Feature(
        "`hermes send --to gadget:ID` / `mobile:ID` by device id",
        "platform target parsing (Hermes 0.20 and later)",
        _targets_parsed,
    ),
)


def missing_features(runner: Any, adapter: Any, live: bool = True) -> list[Feature]:
    """The features this Hermes cannot serve: checked on the gateway's runner and an
    adapter, or (``live=False``, outside the gateway) on their classes, as far as those show."""
    return [f for f in FEATURES if (live or not f.live_only) and not f.present(runner, adapter)]


def describe_support(version: str, missing: Iterable[Feature]) -> Optional[str]:
    """The one line a user should read at connect, or None when all is well."""
    missing = list(missing)
    off = "; ".join(f"{f.name} (needs {f.needs})" for f in missing)
    if is_tested(version):
        # A tested line lacks only what it is known to lack (targets on 0.19).
        return f"Hermes {version}: off on this line: {off}" if off else None
    lines = ", ".join(TESTED_LINES.values())
    verdict = f"off here: {off}" if off else "everything the plugin uses is present"
    return f"Hermes {version} is not a line the Herald plugin is tested on ({lines}); {verdict}"


# -- the gateway runner ---------------------------------------------------------------


def is_user_authorized(runner: Any, source: Any) -> bool:
    """Hermes's own decision: allow-all flags, allowlists, its pairing store."""
    return bool(runner._is_user_authorized(source))


def unauthorized_dm_behavior(runner: Any, platform: Any) -> str:
    return str(runner._get_unauthorized_dm_behavior(platform))


def pairing_store(runner: Any) -> Any:
    return getattr(runner, "pairing_store", None)


def running_agent_session(runner: Any, session_key: str) -> Optional[str]:
    """The session id of the agent Hermes runs for a session, when it says.

    A dict up to 0.19, a live mapping view from 0.20 (whose values may be a placeholder
    while the agent starts)."""
    running = getattr(runner, "_running_agents", None)
    if not isinstance(running, Mapping):
        return None
    session = getattr(running.get(session_key), "session_id", None)
    return session if isinstance(session, str) else None


def _voice_key(runner: Any, source: Any) -> str:
    # 0.22 keys voice modes by profile when profiles are multiplexed.
    by_source = getattr(runner, "_voice_key_for_source", None)
    if callable(by_source):
        return str(by_source(source))
    return str(runner._voice_key(source.platform, source.chat_id))


def speak_by_default(runner: Any, adapter: Any, source: Any) -> None:
    """Voice mode ``all`` for the chat unless it chose a mode (in memory only), mirrored
    into the adapter's auto-speech set as ``/voice tts`` does: from 0.20 Hermes streams
    speech only to chats in it."""
    modes = getattr(runner, "_voice_mode", None)
    if not isinstance(modes, MutableMapping):
        return
    mode = modes.setdefault(_voice_key(runner, source), "all")
    enabled = getattr(adapter, "_auto_tts_enabled_chats", None)
    if mode != "off" and isinstance(enabled, set):
        enabled.add(source.chat_id)


def speaks_reply(runner: Any, adapter: Any, event: Any) -> bool:
    """Whether Hermes will speak the reply to ``event``: voice mode ``all``, or a voice
    message in ``voice_only`` mode or with auto-speech on for the chat."""
    modes = getattr(runner, "_voice_mode", None)
    mode = modes.get(_voice_key(runner, event.source), "off") if isinstance(modes, Mapping) else "off"
    voice = _is_voice(event)
    auto = getattr(adapter, "_should_auto_tts_for_chat", None)
    return mode == "all" or (voice and (mode == "voice_only" or (callable(auto) and bool(auto(event.source.chat_id)))))


def _is_voice(event: Any) -> bool:
    kind = getattr(event, "message_type", None)
    return str(getattr(kind, "value", kind)).lower() == "voice"


def hermes_streams_speech(adapter: Any, event: Any) -> bool:
    """Whether Hermes speaks this turn through the adapter's streaming hooks (0.20 and
    later): only the reply to a voice message on an auto-speech chat, with a provider
    that streams PCM (a provider without a chunked API, such as a command, does not)."""
    if not _is_voice(event) or not callable(getattr(adapter, "_should_auto_tts_for_chat", None)):
        return False
    if not adapter._should_auto_tts_for_chat(event.source.chat_id):
        return False
    try:
        from tools.tts_streaming import resolve_streaming_provider
        from tools.tts_tool import _load_tts_config
    except ImportError:  # 0.19
        return False
    try:
        return resolve_streaming_provider(_load_tts_config()) is not None
    except Exception:  # a provider that cannot start does not stream either
        logger.debug("no streaming speech provider", exc_info=True)
        return False


def ask_before_voice_replies(runner: Any) -> None:
    """Make the runner ask the platform's adapter before it synthesizes a whole-file
    voice reply, as 0.20 and later do (``_streaming_tts_turn_completed``); 0.19 decides
    with ``GatewayRunner._should_send_voice_reply`` alone, so that is wrapped, once."""
    from gateway.platforms.base import BasePlatformAdapter

    decide = getattr(runner, "_should_send_voice_reply", None)
    if hasattr(BasePlatformAdapter, "_streaming_tts_turn_completed") or not callable(decide):
        return
    if getattr(decide, "asks_adapter", False):
        return

    def should_send_voice_reply(event: Any, *args: Any, **kwargs: Any) -> bool:
        adapter = getattr(runner, "adapters", {}).get(event.source.platform)
        said = getattr(adapter, "_streaming_tts_turn_completed", None)
        if callable(said) and said(None, event=event):
            return False
        return bool(decide(event, *args, **kwargs))

    setattr(should_send_voice_reply, "asks_adapter", True)
    runner._should_send_voice_reply = should_send_voice_reply


def streaming_handle(chat_id: str, audio_format: Any) -> Any:
    """Hermes's handle for a speech stream (0.20 and later)."""
    from gateway.platforms.base import StreamingTTSHandle

    return StreamingTTSHandle(chat_id=chat_id, audio_format=audio_format)


def synthesize_speech(text: str, output: str) -> Optional[str]:
    """One piece of text through Hermes's configured text-to-speech (its provider and
    voice), written at ``output`` (or beside it, with the provider's extension); the audio
    file's path, or None. Blocking."""
    import json

    from tools.tts_tool import text_to_speech_tool

    try:
        result = json.loads(text_to_speech_tool(text=text, output_path=output))
    except (ValueError, TypeError):
        return None
    path = result.get("file_path") if isinstance(result, dict) and result.get("success") else None
    if path is None:
        logger.warning("Hermes could not speak a sentence: %s", result.get("error") if isinstance(result, dict) else result)
    return str(path) if path else None


def platform_configs(runner: Any) -> Optional[dict[Any, Any]]:
    platforms = getattr(getattr(runner, "config", None), "platforms", None)
    return platforms if isinstance(platforms, dict) else None


# -- the adapter's session bookkeeping ------------------------------------------------


def session_key(adapter: Any, source: Any) -> str:
    """The key Hermes files a source's session under, profile included where it has one."""
    by_source = getattr(adapter, "_source_session_key", None)
    if callable(by_source):  # 0.22
        return str(by_source(source))
    from gateway.session import build_session_key

    store = getattr(adapter, "_session_store", None)
    resolve = getattr(store, "_resolve_profile_for_key", None)
    extra = adapter.config.extra
    return str(
        build_session_key(
            source,
            group_sessions_per_user=extra.get("group_sessions_per_user", True),
            thread_sessions_per_user=extra.get("thread_sessions_per_user", False),
            **({"profile": resolve(source)} if callable(resolve) else {}),
        )
    )


def session_task(adapter: Any, key: str) -> Optional["asyncio.Task[Any]"]:
    """The live task through which Hermes holds a session, if any."""
    sessions = getattr(adapter, "_active_sessions", None)
    tasks = getattr(adapter, "_session_tasks", None)
    if not isinstance(sessions, Mapping) or not isinstance(tasks, Mapping) or key not in sessions:
        return None
    task = tasks.get(key)
    return task if isinstance(task, asyncio.Task) and not task.done() else None


def session_env(name: str) -> str:
    """A variable of the agent run on this thread (chat, platform, session key)."""
    from gateway.session_context import get_session_env

    return str(get_session_env(name) or "")


# -- questions: approvals, clarify, confirmations --------------------------------------


def resolve_approval(session_key: str, choice: str) -> None:
    from tools.approval import resolve_gateway_approval

    resolve_gateway_approval(session_key, choice)


def approval_waiting(session_key: str) -> bool:
    from tools.approval import has_blocking_approval

    return bool(has_blocking_approval(session_key))


def clarify_timeout() -> Optional[int]:
    """Seconds a clarify waits; None for no limit (0.20 and later allow that)."""
    from tools.clarify_gateway import get_clarify_timeout

    seconds = int(get_clarify_timeout())
    return seconds if seconds > 0 else None


def clarify_multi_select(session_key: str, clarify_id: str) -> bool:
    """Whether a clarify takes several choices (0.20 and later; it is not passed to
    ``send_clarify``, only kept with the question)."""
    from tools import clarify_gateway

    lookup = getattr(clarify_gateway, "get_pending_for_session", None)
    if not callable(lookup):
        return False
    try:
        entry = lookup(session_key, include_choice_prompts=True)
    except TypeError:  # 0.19 has no choice prompts to include
        return False
    return bool(entry is not None and entry.clarify_id == clarify_id and getattr(entry, "multi_select", False))


def resolve_clarify(clarify_id: str, answer: str) -> None:
    from tools.clarify_gateway import resolve_gateway_clarify

    resolve_gateway_clarify(clarify_id, answer)


async def resolve_confirm(session_key: str, confirm_id: str, choice: str) -> Optional[str]:
    """Answer a slash command's confirmation; Hermes's reply to send, if any."""
    from tools import slash_confirm

    reply = await slash_confirm.resolve(session_key, confirm_id, choice)
    return str(reply) if reply else None


# -- pairing ------------------------------------------------------------------------------

# How long Hermes keeps a pairing code.
def pairing_code_ttl_s() -> int:
    from gateway.pairing import CODE_TTL_SECONDS

    return int(CODE_TTL_SECONDS)


def new_pairing_store() -> Any:
    """The pairing store of this Hermes home, outside the gateway (the CLI)."""
    from gateway.pairing import PairingStore

    return PairingStore()


def pairing_locked_out(store: Any, platform: str) -> bool:
    return bool(store._is_locked_out(platform))


def drop_pending(store: Any, platform: str, user_id: str) -> bool:
    """Remove ``user_id``'s waiting requests; whether there were any.

    Hermes has no public method for this: it keeps only a hash of each code, so a
    request is found by its user, under the store's own lock with its file helpers."""
    with store._lock:
        return _drop_pending(store, platform, user_id)


def approve_waiting(store: Any, platform: str, entry: Mapping[str, Any]) -> None:
    """Approve a waiting user without its code: ``approve_request`` where Hermes has it
    (0.20 and later), else ``approve_code``'s own steps under the store's lock."""
    request_id = entry.get("request_id")
    approve = getattr(store, "approve_request", None)
    if request_id and callable(approve):
        approve(platform, str(request_id))
        return
    user_id = str(entry["user_id"])
    with store._lock:
        _drop_pending(store, platform, user_id)
        store._approve_user(platform, user_id, str(entry.get("user_name") or ""))


def _drop_pending(store: Any, platform: str, user_id: str) -> bool:
    path = store._pending_path(platform)
    requests = store._load_json(path)
    waiting = [k for k, v in requests.items() if isinstance(v, dict) and v.get("user_id") == user_id]
    for key in waiting:
        del requests[key]
    if waiting:
        store._save_json(path, requests)
    return bool(waiting)


def approve_code_command(platform: str, code: str) -> None:
    """``hermes pairing approve PLATFORM CODE``, with its own messages."""
    import argparse

    from hermes_cli.pairing import pairing_command

    pairing_command(argparse.Namespace(pairing_action="approve", platform=platform, code=code))


# -- registration ----------------------------------------------------------------------


def platform_entry_fields() -> frozenset[str]:
    """The keywords ``register_platform`` accepts beyond its own parameters."""
    try:
        from gateway.platform_registry import PlatformEntry
    except ImportError:
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(PlatformEntry))


def keep_tools_in_view(names: Iterable[str]) -> None:
    """Offer these tools to the model directly, never behind Tool Search.

    From 0.20 Hermes defers every plugin tool behind ``tool_search`` whenever Tool
    Search is on (its default; 0.19 defers them only past a share of the context); a
    gadget's own tools are what its conversations are about, so they join the core
    tools, which never defer."""
    try:
        import tools.tool_search  # noqa: F401  (a Hermes without it defers nothing)
        from toolsets import _HERMES_CORE_TOOLS
    except ImportError:
        return
    for name in names:
        if name not in _HERMES_CORE_TOOLS:
            _HERMES_CORE_TOOLS.append(name)


# -- speech settings, for `hermes gadget info` -------------------------------------------


def speech_settings() -> tuple[str, str, str, bool]:
    """(speech-to-text in use, the configured one, text-to-speech in use, whether it works)."""
    from tools import transcription_tools, tts_tool

    stt_config = transcription_tools._load_stt_config()
    stt = str(transcription_tools._get_provider(stt_config))
    tts = str(tts_tool._get_provider(tts_tool._load_tts_config()))
    return stt, str(stt_config.get("provider", "auto")), tts, bool(tts_tool.check_tts_requirements())
