"""No message is lost: a follow-up sent the instant a reply shows, or right after the
turn ends, is answered like any other (see "Follow-ups" in DESIGN.md for why this once
failed). Every follow-up must reach the model once and get its own answer once, and
Hermes must never have said it was interrupting a task that had already finished.
"""

from __future__ import annotations

import re
import threading
import time

from conftest import Rig
from devices import Frame, GadgetClient
from stub_model import Rule, message_text

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


def test_a_message_while_the_agent_works_reaches_hermes_at_once(rig: Rig) -> None:
    """Holding follow-ups must not hide a really busy agent from Hermes: a message sent
    while it works goes to Hermes's busy path at once, also when Hermes goes on with that
    message within the same turn and another one comes (no new turn starts in between).

    The work is a reply the model is still writing, held before its last sentence for as
    long as the test likes. What Hermes does with a follow-up differs by line (0.19
    interrupts the run and runs the follow-up next in the same turn; 0.22 cancels that one
    model request and asks again with the follow-up added), but on each the follow-up
    reaches the model while the work is still held: held back by the plugin, it could
    not. (A long command would not do as the work: 0.22 moves a command that is running
    when a message comes to the background, and reports on it in a turn of its own later.)"""
    held = [threading.Event(), threading.Event()]
    rig.add_rules(
        # The most specific first: Hermes may fold messages into one.
        Rule(match="third ends", reply="Third answered."),
        Rule(match="start the second job", reply="Working on the second job. Second job done.", hold_last_sentence=held[1]),
        Rule(match="start the first job", reply="Working on the first job. First job done.", hold_last_sentence=held[0]),
    )
    try:
        with rig.gadget("attic") as gadget:
            gadget.say("start the first job")
            working(gadget, "first")
            gadget.say("start the second job")
            gadget.wait_for(lambda f: f.get("type") == "reply" and bool(BUSY_NOTICE.search(str(f.get("text")))))
            wait_until_asked(rig, "start the second job")
            working(gadget, "second")
            # Hermes says it is busy once a turn; the model being asked is the proof.
            gadget.say("third ends")
            wait_until_asked(rig, "third ends")
            gadget.reply("Third answered.")
            gadget.wait_for(lambda f: f.get("type") == "turn.end")
    finally:
        for event in held:
            event.set()
    # All in one turn: had the plugin held a message back for a turn's end, it would have
    # started a turn of its own.
    assert sum(1 for f in gadget.frames if f.get("type") == "turn.start") == 1, gadget.frames


def working(gadget: GadgetClient, job: str) -> None:
    """Until the model's reply on ``job`` shows: it is being written (and held)."""
    gadget.wait_for(lambda f: f.get("type") == "reply.delta" and f"Working on the {job} job." in str(f.get("text")))


def wait_until_asked(rig: Rig, text: str, timeout: float = 30.0) -> None:
    """Until the newest user message of a model request contains ``text``."""
    deadline = time.monotonic() + timeout
    while not any(text in newest_user_message(r.get("messages", [])) for r in rig.requests()):
        assert time.monotonic() < deadline, f"the model was never asked {text!r}"
        time.sleep(0.05)


def newest_user_message(messages: list[dict[str, object]]) -> str:
    users = [message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return users[-1] if users else ""


def final_messages(frames: list[Frame]) -> list[str]:
    """The final text of each message a phone got (a streamed one ends with a final edit)."""
    texts = {f.get("id"): str(f.get("text")) for f in frames if f.get("t") == "message" and f.get("final")}
    return list(texts.values())


def assert_answered_once(rig: Rig, texts: list[str], replies: list[str]) -> None:
    """Each text was asked of the model once (a run aborted by a stale interrupt and
    retried asks twice) and answered once."""
    asked = [newest_user_line(request.get("messages", [])) for request in rig.requests()]
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
