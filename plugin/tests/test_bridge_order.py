"""The bridge's lines leave in the order they were made, over a real pipe to a child
that stands in for herald: news told without waiting (a turn's start) reaches herald
as an event line with no id, ahead of every request made after it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from herald.bridge import ChildSpec, HeraldBridge
from herald.wire import PROTOCOL_VERSION, Answer, Chat, InboundArgs, Question, Result

pytestmark = pytest.mark.any_line

# Says it is ready, then answers each request with the lines it has read so far, as
# "type:op"; events get no answer, as herald gives none.
CHILD = f"""
import json, sys
ready = {{"protocol": {PROTOCOL_VERSION}, "version": "0", "gadget_url": "", "mobile_url": "", "admin_url": ""}}
print(json.dumps({{"type": "event", "op": "ready", "args": ready}}), flush=True)
seen = []
for line in sys.stdin:
    message = json.loads(line)
    seen.append(message["type"] + ":" + message["op"] + ("" if "id" in message else ":no-id"))
    if message["type"] == "request":
        answer = {{"type": "response", "id": message["id"], "ok": True, "result": {{"seen": list(seen)}}}}
        print(json.dumps(answer), flush=True)
"""


class Quiet:
    async def on_inbound(self, args: InboundArgs) -> None:
        raise AssertionError("no inbound is sent here")

    async def answer(self, question: Question) -> Answer:
        raise AssertionError("no request is sent here")


def test_news_goes_ahead_of_later_requests_and_waits_for_nothing(tmp_path: Path) -> None:
    spec = ChildSpec(argv=[sys.executable, "-c", CHILD], env={}, cwd=tmp_path)

    async def scenario() -> Result:
        bridge = HeraldBridge(lambda: spec)
        assert await bridge.attach("gadget", Quiet()), bridge.failure
        try:
            chat: Chat = {"platform": "gadget", "id": "hg-1"}
            # Nothing answers news: a notify that waited for herald would time out here.
            news = bridge.notify({"op": "turn_started", "args": {"chat": chat, "turn_id": "t-1"}})
            await asyncio.wait_for(news, 10)
            sent = bridge.request(
                {"op": "send_text", "args": {"chat": chat, "text": "hi", "streaming": False, "interim": False}}
            )
            return await asyncio.wait_for(sent, 10)
        finally:
            await bridge.stop()

    reply = asyncio.run(scenario())
    assert reply == {"seen": ["event:turn_started:no-id", "request:send_text"]}, reply
