"""The bounds on follow-ups held while a finished turn lets go of its chat (no gateway
needed): at most MAX_HELD per chat (more go to Hermes at once), for at most MAX_HOLD_S."""

from __future__ import annotations

import asyncio
import logging

import pytest
from gateway.config import PlatformConfig
from gateway.platform_registry import PlatformEntry, platform_registry
from gateway.platforms.base import MessageEvent

import herald.followups as followups_module
from herald.adapter import HeraldAdapter
from herald.followups import MAX_HELD


def test_held_follow_ups_overflow_and_time_out_in_order(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if not platform_registry.is_registered("gadget"):
        platform_registry.register(
            PlatformEntry(name="gadget", label="Gadget", adapter_factory=lambda _c: None, check_fn=lambda: True)
        )
    monkeypatch.setattr(followups_module, "MAX_HOLD_S", 0.3)

    async def scenario() -> tuple[list[str], float]:
        adapter = HeraldAdapter(PlatformConfig(enabled=True), "gadget")
        handed: list[str] = []

        async def handle_message(event: MessageEvent) -> None:
            handed.append(event.text)

        # The chat's run is over, and Hermes's owner task never lets go of the session.
        owner = asyncio.ensure_future(asyncio.Event().wait())
        monkeypatch.setattr(adapter, "handle_message", handle_message)
        follow_ups = adapter.follow_ups
        monkeypatch.setattr(follow_ups, "_owner_task", lambda _event: owner)
        follow_ups.run_ended("hg-1")
        loop = asyncio.get_running_loop()
        started = loop.time()
        for n in range(MAX_HELD + 1):
            event = MessageEvent(text=str(n))
            event.source = adapter.build_source(chat_id="hg-1", chat_type="dm", user_id="hg-1")
            await follow_ups.hand_over(event)
        # One over the bound went straight to Hermes; the held ones wait for the deadline.
        assert handed == [str(MAX_HELD)], handed
        # Released by the deadline, not by anything else (a missing bound would hang here).
        await asyncio.wait_for(asyncio.gather(*follow_ups._spawned), 10)
        owner.cancel()
        return handed, loop.time() - started

    with caplog.at_level(logging.WARNING, logger="herald.followups"):
        handed, waited = asyncio.run(scenario())
    assert handed == [str(MAX_HELD)] + [str(n) for n in range(MAX_HELD)], handed
    assert waited >= 0.3, waited
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"over {MAX_HELD} messages" in m for m in messages), messages
    assert any("still holds hg-1" in m for m in messages), messages
