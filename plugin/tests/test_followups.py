"""No message is lost: a follow-up sent the instant a reply shows, or right after the
turn ends, is answered like any other (see "Follow-ups" in DESIGN.md for why this once
failed). Every follow-up must get its own answer, and Hermes must never have said it
was interrupting a task that had already finished.
"""

from __future__ import annotations

import time

from conftest import Rig
from devices import Frame

FOLLOW_UPS = 20
PAUSES_MS = (0, 50, 200)
PER_PAUSE = 4
BUSY_NOTICE = "Interrupting current task"


def test_gadget_follow_ups_sent_as_each_reply_shows_are_all_answered(rig: Rig) -> None:
    with rig.gadget("kitchen") as gadget:
        for n in range(FOLLOW_UPS):
            gadget.say(f"gadget follow-up {n} ends")
            # The final reply, not turn.end: the next message goes out at once.
            gadget.reply(f"stub: gadget follow-up {n} ends")
        gadget.wait_for(lambda f: f.get("type") == "turn.end")
    assert_never_busy(gadget.frames, "text")


def test_gadget_follow_ups_after_turn_end_are_all_answered(rig: Rig) -> None:
    with rig.gadget("hall") as gadget:
        for pause_ms in PAUSES_MS:
            for n in range(PER_PAUSE):
                text = f"gadget after {pause_ms} ms {n} ends"
                gadget.say(text)
                gadget.reply(f"stub: {text}")
                gadget.wait_for(lambda f: f.get("type") == "turn.end")
                time.sleep(pause_ms / 1000)
    assert_never_busy(gadget.frames, "text")


def test_phone_follow_ups_sent_as_each_reply_shows_are_all_answered(rig: Rig) -> None:
    with rig.phone("tel-followups") as phone:
        for n in range(FOLLOW_UPS):
            phone.say(f"phone follow-up {n} ends")
            phone.message(f"stub: phone follow-up {n} ends")
    assert_never_busy(phone.frames, "text")


def test_phone_follow_ups_after_turn_end_are_all_answered(rig: Rig) -> None:
    with rig.phone("tel-after-end") as phone:
        for pause_ms in PAUSES_MS:
            for n in range(PER_PAUSE):
                text = f"phone after {pause_ms} ms {n} ends"
                phone.say(text)
                phone.message(f"stub: {text}")
                # A phone's turn ends with typing stopped.
                phone.wait_for(lambda f: f.get("t") == "typing" and bool(f.get("stop")))
                time.sleep(pause_ms / 1000)
    assert_never_busy(phone.frames, "text")


def assert_never_busy(frames: list[Frame], field: str) -> None:
    busy = [f for f in frames if BUSY_NOTICE in str(f.get(field, ""))]
    assert not busy, busy
