"""A chat's turn as the device hears of it: named as Hermes starts the agent, ended once.

herald shows a turn between ``turn_started`` and ``turn_ended`` (its outcome: the device's
cue and notice). Hermes ends a turn in ``on_processing_complete``; a model that gave up
(a hook, on the agent's thread) ends it earlier as failed, and the later end is then
a no-op. The turn's speech says its last words (or the failure) before herald hears of
the end.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any, Callable, Optional

from .bridge import HeraldBridge, spawn
from .speech import SpeechOwner
from .wire import Chat


class Turns:
    """The running turn of each chat of one platform, by the message that began it."""

    def __init__(self, bridge: HeraldBridge, speech: SpeechOwner, chat: Callable[[str], Chat]) -> None:
        self._bridge = bridge
        self._speech = speech
        self._chat = chat
        self._ids: dict[tuple[str, str], str] = {}
        self._spawned: set[asyncio.Task[Any]] = set()

    async def start(self, chat_id: str, message_id: str) -> None:
        # Hermes starts the agent only when on_processing_start returns: the turn is
        # named here and herald told in one line that nobody answers, ahead of the
        # turn's replies.
        turn_id = secrets.token_hex(6)
        self._ids[(chat_id, message_id)] = turn_id
        await self._bridge.notify({"op": "turn_started", "args": {"chat": self._chat(chat_id), "turn_id": turn_id}})

    async def end(self, chat_id: str, outcome: str, message_id: Optional[str] = None) -> None:
        """End the chat's turn (the one of ``message_id``, else whichever it has) once:
        its speech says the last of it, and the device hears how it ended."""
        if message_id is None:
            key = next((k for k in self._ids if k[0] == chat_id), None)
        else:
            key = (chat_id, message_id)
        turn_id = self._ids.pop(key, None) if key is not None else None
        if turn_id is None:
            return
        if outcome == "failure":
            # herald plays its cue and shows its notice; a gadget whose turns are spoken
            # hears the failure said too, synthesized as turn_ended leaves (which it
            # does before the speech can begin: before this task's first await).
            self._speech.turn_failed(self._chat(chat_id))
        else:
            await self._speech.turn_over(chat_id)
        await self._bridge.notify(
            {"op": "turn_ended", "args": {"chat": self._chat(chat_id), "turn_id": turn_id, "outcome": outcome}}
        )

    def timed_out(self, chat_id: str, turn_id: str) -> None:
        """herald gave the turn up, the agent having been silent on it for the turn
        timeout, and the device has heard the failure cue: a gadget whose turns are
        spoken hears the failure said too. Hermes's later end of the turn is a no-op, and
        what it still sends for it is shown, not said."""
        key = next((k for k, t in self._ids.items() if k[0] == chat_id and t == turn_id), None)
        if key is None:
            return
        del self._ids[key]
        self._speech.turn_failed(self._chat(chat_id))

    def model_gave_up(self, chat_id: str) -> None:
        """Hermes ran out of tries at the model (a hook, on the agent's thread): the
        turn ends as failed now, so the device says so instead of waiting in silence;
        Hermes's own error text still arrives as a reply."""
        loop = self._bridge.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: spawn(self._spawned, self.end(chat_id, "failure")))
