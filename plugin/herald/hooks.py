"""The plugin's Hermes hooks (``register`` in ``__init__.py``): news of agent runs.

Hooks fire on the agent's worker thread with the session's context in its environment,
which names the platform and chat; the live adapter of that platform takes it from there.
"""

from __future__ import annotations

from typing import Any, Optional

from . import compat
from .adapter import HeraldAdapter, live_adapter, live_adapters


def note_run_started(task_id: str = "", session_id: str = "", **_: Any) -> None:
    """The ``pre_llm_call`` hook, fired as an agent run begins (followups.py)."""
    found = _main_run(task_id, session_id)
    if found is not None:
        adapter, chat_id = found
        adapter.follow_ups.run_began(chat_id)


def note_run_over(task_id: str = "", session_id: str = "", **_: Any) -> None:
    """The ``on_session_end`` hook, fired as an agent run returns (followups.py)."""
    found = _main_run(task_id, session_id)
    if found is not None:
        adapter, chat_id = found
        adapter.follow_ups.run_ended(chat_id)


def note_model_error(
    task_id: str = "",
    session_id: str = "",
    retry_count: Optional[int] = None,
    max_retries: Optional[int] = None,
    retryable: Optional[bool] = None,
    **_: Any,
) -> None:
    """The ``api_request_error`` hook, fired for each failed model call: the last try
    (or one not worth retrying) fails the chat's turn. 0.22 then keeps retrying in
    recovery cycles for minutes; the device has heard the failure by then."""
    found = _main_run(task_id, session_id)
    if found is None:
        return
    adapter, chat_id = found
    # retry_count counts the tries before this one.
    last_try = retry_count is not None and max_retries is not None and retry_count + 1 >= max_retries
    if retryable is False or last_try:
        adapter.turns.model_gave_up(chat_id)


def settle_approval(session_key: str = "", **_: Any) -> None:
    """The ``post_approval_response`` hook: withdraw cards of settled approvals."""
    for adapter in live_adapters():
        adapter.prompts.approval_settled(session_key)


def _main_run(task_id: str, session_id: str) -> Optional[tuple[HeraldAdapter, str]]:
    """The live adapter and chat of the agent run on this thread, if it is ours and the
    chat's own run (``is_main_run``)."""
    chat_id = compat.session_env("HERMES_SESSION_CHAT_ID")
    adapter = live_adapter(compat.session_env("HERMES_SESSION_PLATFORM")) if chat_id else None
    if adapter is None or not is_main_run(adapter, task_id, session_id):
        return None
    return adapter, chat_id


def is_main_run(adapter: HeraldAdapter, task_id: str, session_id: str) -> bool:
    """Whether the run hooks speak of the chat's own conversation.

    The same hooks fire for subagents and the background memory review (they carry
    the chat's session context too, and may end during the chat's next turn); their
    ``task_id`` is their own, while the gateway runs a chat's turn with the session id
    as its task id. A ``/background`` task is its own session: it is not the agent
    Hermes keeps running for the chat.
    """
    if not task_id or task_id != session_id:
        return False
    running = compat.running_agent_session(adapter.gateway_runner, compat.session_env("HERMES_SESSION_KEY"))
    return running is None or running == session_id
