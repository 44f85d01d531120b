"""The bridge's inbound queues (no gateway needed): one per chat, in herald's order,
bounded at MAX_INBOUND_QUEUED, and a chat that waits on Hermes holds up no other."""

from __future__ import annotations

import asyncio
import logging

import pytest

from herald.bridge import MAX_INBOUND_QUEUED, ChildSpec, HeraldBridge
from herald.wire import Answer, InboundArgs, Question

pytestmark = pytest.mark.any_line


class Endpoint:
    """Delivers at once, except for the chat ``stuck`` until ``go`` is set."""

    def __init__(self, stuck: str) -> None:
        self.stuck = stuck
        self.go = asyncio.Event()
        self.got: dict[str, list[int]] = {}

    async def on_inbound(self, args: InboundArgs) -> None:
        chat = args["source"]["chat"]["id"]
        if chat == self.stuck:
            await self.go.wait()
        self.got.setdefault(chat, []).append(int(args["message_id"]))

    async def answer(self, question: Question) -> Answer:
        raise AssertionError("no request is sent here")


def inbound(chat: str, n: int) -> InboundArgs:
    return {
        "source": {"chat": {"platform": "gadget", "id": chat}, "user_id": chat},
        "message_id": str(n),
        "body": {"kind": "text", "text": "hi"},
    }


def no_child() -> ChildSpec:
    raise AssertionError("no herald is started here")


def test_a_chat_that_falls_behind_drops_only_beyond_the_bound(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> Endpoint:
        bridge = HeraldBridge(no_child)
        endpoint = Endpoint(stuck="hg-slow")
        bridge._endpoints["gadget"] = endpoint
        # Nothing is delivered before the first await: the slow chat's queue fills.
        for n in range(MAX_INBOUND_QUEUED + 2):
            bridge._queue_inbound(inbound("hg-slow", n))
        bridge._queue_inbound(inbound("hg-quick", 0))
        for _ in range(100):
            await asyncio.sleep(0)
        # The slow chat still waits on Hermes; the other got through.
        assert endpoint.got == {"hg-quick": [0]}, endpoint.got
        endpoint.go.set()
        await asyncio.gather(*bridge._tasks)
        # A finished chat's queue is forgotten: its next event starts a new one.
        assert bridge._inbound == {}, bridge._inbound
        return endpoint

    with caplog.at_level(logging.ERROR, logger="herald.bridge"):
        endpoint = asyncio.run(scenario())
    assert endpoint.got["hg-slow"] == list(range(MAX_INBOUND_QUEUED)), endpoint.got["hg-slow"][-3:]
    dropped = [r for r in caplog.records if "dropped one" in r.getMessage()]
    assert len(dropped) == 2 and "gadget:hg-slow" in dropped[0].getMessage(), dropped
