"""The bridge's lines leave in the order they were made, over a real pipe to a child
that stands in for herald: a request begun without waiting (a turn's start) reaches
herald ahead of every request made after it, and its answer can be awaited later."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from herald.bridge import ChildSpec, HeraldBridge
from herald.wire import PROTOCOL_VERSION, Answer, Chat, InboundArgs, Question, Result

# Says it is ready, then answers each request with the ops it has read so far; the
# first request's answer is held until the second has been read, so a bridge that
# waited for it before writing the second would hang.
CHILD = f"""
import json, sys
ready = {{"protocol": {PROTOCOL_VERSION}, "version": "0", "gadget_url": "", "mobile_url": "", "admin_url": ""}}
print(json.dumps({{"type": "event", "op": "ready", "args": ready}}), flush=True)
seen, held = [], []
for line in sys.stdin:
    message = json.loads(line)
    seen.append(message["op"])
    held.append(message["id"])
    if len(seen) == 1:
        continue
    for request_id in held:
        answer = {{"type": "response", "id": request_id, "ok": True, "result": {{"seen": list(seen)}}}}
        print(json.dumps(answer), flush=True)
    held.clear()
"""


class Quiet:
    async def on_inbound(self, args: InboundArgs) -> None:
        raise AssertionError("no inbound is sent here")

    async def answer(self, question: Question) -> Answer:
        raise AssertionError("no request is sent here")


def test_a_begun_request_goes_ahead_of_later_ones_and_is_answered_later(tmp_path: Path) -> None:
    spec = ChildSpec(argv=[sys.executable, "-c", CHILD], env={}, cwd=tmp_path)

    async def scenario() -> tuple[Result, Result]:
        bridge = HeraldBridge(lambda: spec)
        assert await bridge.attach("gadget", Quiet()), bridge.failure
        try:
            chat: Chat = {"platform": "gadget", "id": "hg-1"}
            started = bridge.begin({"op": "turn_started", "args": {"chat": chat}})
            # In the same step, as when Hermes answers a command at once: the first
            # line is in the pipe already, ahead of this one.
            sent = bridge.begin(
                {"op": "send_text", "args": {"chat": chat, "text": "hi", "streaming": False, "interim": False}}
            )
            reply = await asyncio.wait_for(sent, 10)
            turn = await asyncio.wait_for(started, 10)
            return turn, reply
        finally:
            await bridge.stop()

    turn, reply = asyncio.run(scenario())
    assert reply == {"seen": ["turn_started", "send_text"]}, reply
    assert turn == {"seen": ["turn_started", "send_text"]}, turn
