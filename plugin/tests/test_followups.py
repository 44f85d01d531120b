"""No message is lost: a follow-up sent the instant a reply shows, or right after the
turn ends, is answered like any other (see "Follow-ups" in DESIGN.md for why this once
failed). Every follow-up must reach the model once and get its own answer once, and
Hermes must never have said it was interrupting a task that had already finished.
"""

from __future__ import annotations

import re
import time

from conftest import Rig
from devices import Frame
from harness import hermes_line
from stub_model import message_text

FOLLOW_UPS = 20
PAUSES_MS = (0, 50, 200)
PER_PAUSE = 4
# Hermes's busy notices: 0.19 interrupts, 0.20 redirects the running agent, the 0.22
# fork says its raw key (it ships without translations).
BUSY_NOTICE = re.compile("Interrupting current task|Redirected current run|gateway\\.busy\\.ack")


def test_gadget_follow_ups_sent_as_each_reply_shows_are_all_answered(rig: Rig) -> None:
    texts = [f"gadget follow-up {n} ends" for n in range(FOLLOW_UPS)]
    with rig.gadget("kitchen") as gadget:
        for text in texts:
            gadget.say(text)
            # The final reply, not turn.end: the next message goes out at once.
            gadget.reply(f"stub: {text}")
        gadget.wait_for(lambda f: f.get("type") == "turn.end")
    assert_answered_once(rig, texts, [str(f.get("text")) for f in gadget.frames if f.get("type") == "reply"])
    assert_never_busy(gadget.frames, "text")


def test_gadget_follow_ups_after_turn_end_are_all_answered(rig: Rig) -> None:
    texts = [f"gadget after {pause_ms} ms {n} ends" for pause_ms in PAUSES_MS for n in range(PER_PAUSE)]
    with rig.gadget("hall") as gadget:
        for index, text in enumerate(texts):
            gadget.say(text)
            gadget.reply(f"stub: {text}")
            gadget.wait_for(lambda f: f.get("type") == "turn.end")
            time.sleep(PAUSES_MS[index // PER_PAUSE] / 1000)
    assert_answered_once(rig, texts, [str(f.get("text")) for f in gadget.frames if f.get("type") == "reply"])
    assert_never_busy(gadget.frames, "text")


def test_phone_follow_ups_sent_as_each_reply_shows_are_all_answered(rig: Rig) -> None:
    texts = [f"phone follow-up {n} ends" for n in range(FOLLOW_UPS)]
    with rig.phone("tel-followups") as phone:
        for text in texts:
            phone.say(text)
            phone.message(f"stub: {text}")
    assert_answered_once(rig, texts, final_messages(phone.frames))
    assert_never_busy(phone.frames, "text")


def test_phone_follow_ups_after_turn_end_are_all_answered(rig: Rig) -> None:
    texts = [f"phone after {pause_ms} ms {n} ends" for pause_ms in PAUSES_MS for n in range(PER_PAUSE)]
    with rig.phone("tel-after-end") as phone:
        for index, text in enumerate(texts):
            phone.say(text)
            phone.message(f"stub: {text}")
            # A phone's turn ends with typing stopped.
            phone.wait_for(lambda f: f.get("t") == "typing" and bool(f.get("stop")))
            time.sleep(PAUSES_MS[index // PER_PAUSE] / 1000)
    assert_answered_once(rig, texts, final_messages(phone.frames))
    assert_never_busy(phone.frames, "text")


def test_a_message_while_the_agent_works_still_interrupts_it(rig: Rig) -> None:
    """Holding follow-ups must not hide a really busy agent from Hermes: a message
    sent while it works interrupts it, also when Hermes runs that message within the
    same turn and another one comes (no new turn starts in between)."""
    with rig.gadget("attic") as gadget:
        gadget.say("take your time, first")
        wait_until_asked(rig, "take your time, first")
        gadget.say("take your time, second")
        gadget.wait_for(lambda f: f.get("type") == "reply" and bool(BUSY_NOTICE.search(str(f.get("text")))))
        if hermes_line().name != "0.19":
            # From 0.20 Hermes steers the message into the running agent instead of
            # running it anew: it reached the busy path, which is the point.
            wait_until_seen(rig, "take your time, second")
            return
        # Hermes now runs the second message in the same turn; the third interrupts it.
        wait_until_asked(rig, "take your time, second")
        gadget.say("third ends")
        gadget.reply("stub: third ends")
        gadget.wait_for(lambda f: f.get("type") == "turn.end")
    # Both sleeps were cut short: neither run got to say it had slept.
    assert not [f for f in gadget.frames if "slept" in str(f.get("text", ""))], gadget.frames


def wait_until_asked(rig: Rig, text: str, timeout: float = 30.0) -> None:
    """Until the model has been asked ``text`` (its agent is then at work on it)."""
    deadline = time.monotonic() + timeout
    while not any(newest_user_line(r.get("messages", [])) == text for r in rig.model.script.requests()):
        assert time.monotonic() < deadline, f"the model was never asked {text!r}"
        time.sleep(0.05)


def wait_until_seen(rig: Rig, text: str, timeout: float = 30.0) -> None:
    """Until some message the model was sent contains ``text``."""
    deadline = time.monotonic() + timeout
    while not any(text in message_text(m) for r in rig.model.script.requests() for m in r.get("messages", [])):
        assert time.monotonic() < deadline, f"the model never saw {text!r}"
        time.sleep(0.05)


def final_messages(frames: list[Frame]) -> list[str]:
    """The final text of each message a phone got (a streamed one ends with a final edit)."""
    texts = {f.get("id"): str(f.get("text")) for f in frames if f.get("t") == "message" and f.get("final")}
    return list(texts.values())


def assert_answered_once(rig: Rig, texts: list[str], replies: list[str]) -> None:
    """Each text was asked of the model once (a run aborted by a stale interrupt and
    retried asks twice) and answered once."""
    asked = [newest_user_line(request.get("messages", [])) for request in rig.model.script.requests()]
    for text in texts:
        assert asked.count(text) == 1, (text, asked.count(text))
        assert replies.count(f"stub: {text}") == 1, (text, replies)


def newest_user_line(messages: list[dict[str, object]]) -> str:
    users = [message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    lines = users[-1].strip().splitlines() if users else []
    return lines[0] if lines else ""


def assert_never_busy(frames: list[Frame], field: str) -> None:
    busy = [f for f in frames if BUSY_NOTICE.search(str(f.get(field, "")))]
    assert not busy, busy
