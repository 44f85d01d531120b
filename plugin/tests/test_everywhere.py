"""One question on every device, in the real Hermes gateway: an exec approval Hermes asks
a gadget is shown as a copy on its owner's phone, the first answer on either resolves it
through Hermes's own resolver, and the other copy is withdrawn with where it was answered.

The rig has two app token users (the suite's and "stranger"), so a gadget belongs to
nobody until its owner is set: at pairing (``herald pairing approve gadget CODE
--owner``) or later (``herald owner``), both herald commands against the running server.
The suite's phone user is allowed in Hermes (``MOBILE_ALLOWED_USERS``, conftest.py); herald
shows copies only to a user Hermes allows.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

from conftest import Rig, cleaning_rule
from devices import Frame, GadgetClient, PhoneClient, phone_user

# What the test phone calls itself in its hello (devices.PhoneClient).
PHONE_NAME = "Test Phone"


def herald(rig: Rig, *args: str) -> str:
    """A herald command against the gateway's herald, as an owner types it."""
    command = [str(rig.herald), "--data-dir", str(rig.home.path / "herald"), *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"herald {' '.join(args)}: {result.stdout}{result.stderr}"
    return result.stdout


def is_type(kind: str) -> Callable[[Frame], bool]:
    return lambda frame: frame.get("type") == kind


def closed(prompt_id: str) -> Callable[[Frame], bool]:
    return lambda f: f.get("type") == "prompt.close" and f.get("id") == prompt_id


def done(prompt_id: str) -> Callable[[Frame], bool]:
    return lambda f: f.get("t") == "prompt_done" and f.get("prompt_id") == prompt_id


def copy_of(phone: PhoneClient, prompt: Frame) -> Frame:
    """The phone's copy of the gadget's question ``prompt``."""
    return phone.wait_for(lambda f: f.get("t") == "prompt" and f.get("id") == prompt["id"])


def after(frames: list[Frame], mark: int, match: Callable[[Frame], bool]) -> list[Frame]:
    return [f for f in frames[mark:] if match(f)]


def paired_gadget(rig: Rig, name: str, owner: str) -> GadgetClient:
    """A gadget paired in Hermes by the code it shows, its owner given with the approval."""
    gadget = rig.stranger_gadget(name=name)
    code = gadget.wait_for(is_type("pairing"))["code"]
    herald(rig, "pairing", "approve", "gadget", str(code), "--owner", owner)
    gadget.wait_for(is_type("paired"), timeout=30)
    return gadget


def test_a_gadgets_approval_answered_on_the_phone_is_resolved_by_hermes(rig: Rig, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    rig.add_rules(
        cleaning_rule("clean the first cellar scratch", first), cleaning_rule("clean the second cellar scratch", second)
    )
    person = phone_user(rig.app_token)
    # The phone connects first: herald shows copies only to someone it has seen on a phone.
    with (
        rig.phone("tel-everywhere") as phone,
        rig.phone("tel-stranger", token=rig.stranger_token) as other,
        paired_gadget(rig, "Cellar", person) as gadget,
    ):
        try:
            gadget.say("please clean the first cellar scratch")
            prompt = gadget.wait_for(is_type("prompt"))
            assert f"rm -rf {first}" in str(prompt["text"]), prompt
            card = copy_of(phone, prompt)
            assert card["kind"] == "exec_approval", card
            assert str(card["text"]).startswith("Cellar asks: "), card
            assert card["command"] == f"rm -rf {first}", card
            assert first.is_dir()

            phone.answer(card, "once")
            answered = phone.wait_for(done(card["id"]))
            assert answered.get("option_id") == "once" and not answered.get("expired"), answered
            # Hermes resolved it as the gadget's own answer: the command ran and the turn
            # went on at the gadget.
            gadget.wait_for(closed(prompt["id"]))
            gadget.wait_for(lambda f: f.get("type") == "notice" and f.get("text") == f"Answered on {PHONE_NAME}.")
            gadget.reply("Cleaned:")
            assert gadget.wait_for(is_type("turn.end"))["outcome"] == "success"
            assert not first.exists()

            # A second question of the same session is open when the gadget's own answer to
            # the first comes, late: were it taken, Hermes would resolve the open one with it.
            gadget.say("please clean the second cellar scratch")
            again = gadget.wait_for(is_type("prompt"))
            assert again["id"] != prompt["id"], again
            card_again = copy_of(phone, again)
            mark = len(gadget.frames)
            gadget.send({"type": "prompt.reply", "id": prompt["id"], "answer": "yes"})
            gadget.wait_for(lambda f: f.get("type") == "notice" and "expired" in str(f.get("text")))
            gadget.settle()
            assert not after(gadget.frames, mark, closed(str(again["id"]))), gadget.frames[mark:]
            assert second.is_dir()

            phone.answer(card_again, "deny")
            gadget.wait_for(closed(again["id"]))
            denied = gadget.reply("Cleaned:")
            gadget.wait_for(is_type("turn.end"))
            other.settle()
        finally:
            herald(rig, "pairing", "revoke", "gadget", gadget.device_id)
    assert "denied" in str(denied["text"]), denied
    assert second.is_dir()
    replies = [f for f in gadget.frames if f.get("type") == "reply" and "Cleaned:" in str(f.get("text"))]
    assert len(replies) == 2, replies
    # Another person's phone is shown nothing.
    assert not any(f.get("t") == "prompt" for f in other.frames), other.frames


def test_a_gadget_answers_its_own_approval_and_the_phones_copy_is_withdrawn(rig: Rig, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    rig.add_rules(cleaning_rule("clean the porch scratch", scratch))
    with rig.phone("tel-porch") as phone, rig.gadget("porch") as gadget:
        # Set after pairing, on a gadget the allowlist let in.
        herald(rig, "owner", gadget.device_id, phone_user(rig.app_token))
        gadget.say("please clean the porch scratch")
        prompt = gadget.wait_for(is_type("prompt"))
        card = copy_of(phone, prompt)
        assert str(card["text"]).startswith("Porch asks: "), card

        gadget.send({"type": "prompt.reply", "id": prompt["id"], "answer": "no"})
        denied = gadget.reply("Cleaned:")
        gadget.wait_for(is_type("turn.end"))
        withdrawn = phone.wait_for(done(card["id"]))
        assert withdrawn.get("expired") is True, withdrawn
        told = phone.message("Answered on")
        assert told["text"] == "Answered on Porch.", told

        # The withdrawn copy tapped anyway: refused as lapsed, and nothing else happens.
        mark = len(phone.frames)
        phone.answer(card, "once")
        late = phone.wait_for(done(card["id"]))
        assert late.get("expired") is True, late
        gadget.settle()
        phone.settle()
    assert "denied" in str(denied["text"]), denied
    assert scratch.is_dir()
    assert not after(phone.frames, mark, lambda f: f.get("t") in ("message", "prompt")), phone.frames[mark:]
    assert not any(f.get("type") == "prompt.close" for f in gadget.frames), gadget.frames
    replies = [f for f in gadget.frames if f.get("type") == "reply"]
    assert len(replies) == 1, replies
