"""Follow-ups held while a finished turn lets go of its chat (DESIGN.md, "Follow-ups").

The device sees the final reply (and then ``turn.end``) before Hermes lets go of the
session: Hermes still saves the turn and runs ``on_processing_complete``. A message
arriving then takes Hermes's busy path, which interrupts the agent whose run is already
over; the stale interrupt aborts the next run, and the message is answered late, twice,
or not at all. Such a message, and those after it, wait here until the turn has let go
(or a new run of the chat began) and then go to Hermes in order, as if sent just then.

Whether a chat's run is over is told by Hermes's run hooks (``hooks.py``, on the agent's
thread) and by the adapter's processing hooks.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Optional

from gateway.platforms.base import MessageEvent

from . import compat
from .bridge import spawn

if TYPE_CHECKING:
    from .adapter import HeraldAdapter

logger = logging.getLogger(__name__)

# At most this many follow-ups are held per chat (more go to Hermes at once), for at
# most this long.
MAX_HELD = 64
MAX_HOLD_S = 60.0


class FollowUps:
    """The held follow-ups of one platform's chats, and which chats' runs are over."""

    def __init__(self, adapter: HeraldAdapter) -> None:
        self._adapter = adapter
        # Chats whose agent run is over while Hermes may still hold their session;
        # written from the agent's thread by the run hooks (set operations are atomic).
        self._runs_over: set[str] = set()
        # Messages held until Hermes lets go of their chat's finished turn, in order,
        # and what wakes their release when the chat's state changes.
        self._held: dict[str, list[MessageEvent]] = {}
        self._held_wake: dict[str, asyncio.Event] = {}
        self._spawned: set[asyncio.Task[Any]] = set()

    def run_ended(self, chat_id: str) -> None:
        """The chat's agent run returned (a run hook, on the agent's thread) or its turn
        is over for certain (``on_processing_complete``)."""
        self._runs_over.add(chat_id)

    def run_began(self, chat_id: str) -> None:
        """The chat's agent run began (a run hook, on the agent's thread): Hermes may
        start another run in the same turn for a message it queued, and then follow-ups
        must meet that run as busy input again."""
        # Set operations are atomic, and done here they keep the hooks' order.
        self._runs_over.discard(chat_id)
        loop = self._adapter.bridge.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake_held, chat_id)

    def run_going(self, chat_id: str) -> None:
        """The chat has a run in progress (``on_processing_start``): held follow-ups may
        go to Hermes now."""
        self._runs_over.discard(chat_id)
        self._wake_held(chat_id)

    async def hand_over(self, event: MessageEvent) -> None:
        """Give Hermes a device's message, unless its chat's turn is only finishing."""
        chat_id = event.source.chat_id
        held = self._held.get(chat_id)
        if held is not None and len(held) < MAX_HELD:
            held.append(event)
            return
        if held is not None:
            logger.warning("%s sent over %d messages while its turn ended; passing them on", chat_id, MAX_HELD)
        elif chat_id in self._runs_over and self._owner_task(event) is not None:
            logger.debug("holding a message from %s until its finished turn lets go", chat_id)
            self._held[chat_id] = [event]
            spawn(self._spawned, self._release_held(event))
            return
        await self._adapter.handle_message(event)

    def _wake_held(self, chat_id: str) -> None:
        wake = self._held_wake.get(chat_id)
        if wake is not None:
            wake.set()

    def _owner_task(self, event: MessageEvent) -> Optional[asyncio.Task[Any]]:
        """The live task through which Hermes holds the event's session, if any."""
        return compat.session_task(self._adapter, compat.session_key(self._adapter, event.source))

    async def _release_held(self, first: MessageEvent) -> None:
        chat_id = first.source.chat_id
        wake = self._held_wake[chat_id] = asyncio.Event()
        deadline = asyncio.get_running_loop().time() + MAX_HOLD_S
        try:
            # A run Hermes starts for a message it queued clears the mark (the run
            # hooks, on_processing_start): these messages then meet a running agent,
            # as Hermes means them to.
            while chat_id in self._runs_over:
                task = self._owner_task(first)
                left = deadline - asyncio.get_running_loop().time()
                if task is None:
                    break
                if left <= 0:
                    logger.warning("Hermes still holds %s %.0f s after its turn ended; passing its messages on", chat_id, MAX_HOLD_S)
                    break
                wake.clear()
                woken = asyncio.ensure_future(wake.wait())
                try:
                    await asyncio.wait({task, woken}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    woken.cancel()
        finally:
            del self._held_wake[chat_id]
            # Messages that come in meanwhile join the list, so order holds.
            held = self._held[chat_id]
            while held:
                try:
                    await self._adapter.handle_message(held.pop(0))
                except Exception:
                    logger.exception("handing a held message from %s to Hermes failed", chat_id)
            del self._held[chat_id]
