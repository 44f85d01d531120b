"""Questions the agent asks, on every Hermes line: exec approvals (with "for this
session" where Hermes offers it), clarify on a gadget's two buttons and on a phone's
cards (several questions and multi-select where the line has them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from conftest import Rig, cleaning_rule
from devices import Frame, GadgetClient
from harness import hermes_line


def is_type(kind: str) -> Callable[[Frame], bool]:
    return lambda frame: frame.get("type") == kind


def answers(reply: str) -> list[object]:
    """The user's answers in a "You chose {clarify's result}" reply: one per question
    (0.22 answers several in one result)."""
    result = json.loads(reply[reply.index("{") :])
    return [r.get("user_response") for r in result.get("responses", [result])]


def step(gadget: GadgetClient, choice: str, answer: str, seen: set[str]) -> Frame:
    """Wait for the gadget's yes/no step that offers ``choice`` and answer it; each step
    comes under an id not seen before."""
    prompt = gadget.wait_for(
        lambda f: f.get("type") == "prompt" and f.get("id") not in seen and str(f.get("text", "")).endswith("?")
    )
    offered = str(prompt["text"]).rsplit("\n", 1)[-1]
    # 0.22 marks the first choice "(Recommended)".
    assert offered.startswith(choice), prompt
    seen.add(str(prompt["id"]))
    gadget.send({"type": "prompt.reply", "id": prompt["id"], "answer": answer})
    return prompt


def test_a_phone_approves_a_command_for_the_session(rig: Rig, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    # Another command of the same danger: allowed with the first "for this session".
    rig.add_rules(
        cleaning_rule("clean the phone scratch", scratch), cleaning_rule("tidy the phone scratch", scratch, "-r -f")
    )
    with rig.phone("tel-session") as phone:
        scratch.mkdir()
        phone.say("please clean the phone scratch")
        card = phone.approval(f"rm -rf {scratch}")
        assert [o["id"] for o in card["options"]] == ["once", "session", "always", "deny"], card
        phone.answer(card, "session")
        first = phone.message("Cleaned:")
        assert not scratch.exists()
        # Allowed for the session: another such command runs without a second card (which
        # would have come before the command ran, and so before its answer).
        scratch.mkdir()
        phone.say("please tidy the phone scratch")
        # A message of its own (0.22 sends a message's final edit twice).
        phone.wait_for(
            lambda f: f.get("t") == "message"
            and bool(f.get("final"))
            and f.get("id") != first["id"]
            and "Cleaned:" in str(f.get("text"))
        )
    assert not scratch.exists()
    prompts = [
        (f.get("id"), f.get("command"))
        for f in phone.frames
        if f.get("t") == "prompt" and str(scratch) in str(f.get("command"))
    ]
    assert len(prompts) == 1, prompts


def test_a_clarify_is_asked_on_a_gadget_one_choice_at_a_time(rig: Rig) -> None:
    with rig.gadget("studio") as gadget:
        gadget.say("which colour do I like?")
        seen: set[str] = set()
        first = step(gadget, "red", "no", seen)
        assert "Which colour?" in str(first["text"])
        step(gadget, "green", "yes", seen)
        reply = gadget.reply("You chose")
    assert answers(str(reply["text"])) == ["green"], reply


def test_a_typed_answer_settles_a_gadgets_clarify_and_closes_it(rig: Rig) -> None:
    with rig.gadget("attic") as gadget:
        gadget.say("which colour do I like best?")
        prompt = gadget.wait_for(is_type("prompt"))
        gadget.say("green")
        reply = gadget.reply("You chose")
        gadget.wait_for(lambda f: f.get("type") == "prompt.close" and f.get("id") == prompt["id"])
    assert "green" in str(reply["text"])


def test_a_clarify_card_is_answered_on_the_phone(rig: Rig) -> None:
    with rig.phone("tel-clarify") as phone:
        phone.say("which colour do I like?")
        card = phone.card("clarify")
        assert str(card["text"]).startswith("Which colour?")
        labels = [str(o["label"]) for o in card["options"][:2]]
        assert labels[0].startswith("red") and labels[1] == "green", card
        phone.answer(card, "c1")
        reply = phone.message("You chose")
    assert "green" in reply["text"]


multi_select = pytest.mark.skipif(hermes_line().name == "0.19", reason="Hermes 0.19's clarify has no multi-select")


@multi_select
def test_a_gadget_picks_several_choices_with_its_buttons(rig: Rig) -> None:
    with rig.gadget("radio") as gadget:
        gadget.say("which rooms should I heat?")
        seen: set[str] = set()
        for choice, answer in (("hall", "yes"), ("den", "no"), ("attic", "yes")):
            step(gadget, choice, answer, seen)
        if hermes_line().name != "0.20":
            # 0.22 asks its second question after the first.
            step(gadget, "red", "no", seen)
            step(gadget, "green", "yes", seen)
        reply = str(gadget.reply("You chose")["text"])
    expected: list[object] = [["hall", "attic"]] if hermes_line().name == "0.20" else [["hall", "attic"], "green"]
    assert answers(reply) == expected, reply


@multi_select
def test_a_phone_types_several_choices_on_one_card(rig: Rig) -> None:
    with rig.phone("tel-rooms") as phone:
        phone.say("which rooms should I heat?")
        card = phone.card("clarify")
        assert "type several" in str(card["text"]), card
        phone.send({"t": "prompt", "prompt_id": card["id"], "option_id": "other", "text": "Hall, attic"})
        if hermes_line().name != "0.20":
            second = phone.wait_for(lambda f: f.get("t") == "prompt" and f.get("id") != card["id"])
            phone.answer(second, "c1")
        reply = str(phone.message("You chose")["text"])
    expected: list[object] = [["hall", "attic"]] if hermes_line().name == "0.20" else [["hall", "attic"], "green"]
    assert answers(reply) == expected, reply


# -- questions nobody answers ------------------------------------------------------------

# How long Hermes waits for an answer in the tests below (approvals.timeout and
# agent.clarify_timeout, both read from config.yaml when Hermes asks).
LAPSE_S = 1


def chosen(reply: str) -> list[object]:
    """The choices answered in a clarify's result (a lapsed one says so in words on 0.19,
    with no answer from 0.22)."""
    return [a for a in answers(reply) if a in ("red", "green")]


def lapse_after(rig: Rig, seconds: int) -> None:
    """Hermes gives up on approvals and clarifications after ``seconds`` (config.yaml is
    put back after the test)."""

    def change(config: dict[str, object]) -> None:
        approvals = config.setdefault("approvals", {})
        agent = config.setdefault("agent", {})
        assert isinstance(approvals, dict) and isinstance(agent, dict)
        approvals["timeout"] = seconds
        agent["clarify_timeout"] = seconds

    rig.home.update_config(change)


def test_an_approval_nobody_answers_on_a_gadget_is_withdrawn_and_the_turn_ends(rig: Rig, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    rig.add_rules(cleaning_rule("clean the forgotten scratch", scratch))
    lapse_after(rig, LAPSE_S)
    with rig.gadget("porch") as gadget:
        gadget.say("please clean the forgotten scratch")
        prompt = gadget.wait_for(is_type("prompt"))
        gadget.wait_for(lambda f: f.get("type") == "prompt.close" and f.get("id") == prompt["id"])
        reply = gadget.reply("Cleaned:")
        end = gadget.wait_for(is_type("turn.end"))
    assert "timed out" in str(reply["text"]), reply
    assert end["outcome"] == "success", end
    assert scratch.is_dir()


def test_an_approval_nobody_answers_on_a_phone_is_withdrawn_and_the_turn_ends(rig: Rig, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    rig.add_rules(cleaning_rule("clean the forgotten scratch", scratch))
    lapse_after(rig, LAPSE_S)
    with rig.phone("tel-lapse") as phone:
        phone.say("please clean the forgotten scratch")
        card = phone.approval(f"rm -rf {scratch}")
        done = phone.wait_for(lambda f: f.get("t") == "prompt_done" and f.get("prompt_id") == card["id"])
        reply = phone.message("Cleaned:")
        phone.wait_for(lambda f: f.get("t") == "typing" and bool(f.get("stop")))
    assert done.get("expired") is True, done
    assert "timed out" in str(reply["text"]), reply
    assert scratch.is_dir()


def test_a_clarify_nobody_answers_on_a_gadget_is_withdrawn_and_the_turn_ends(rig: Rig) -> None:
    lapse_after(rig, LAPSE_S)
    with rig.gadget("studio") as gadget:
        gadget.say("which colour do I like today?")
        prompt = gadget.wait_for(is_type("prompt"))
        assert "Which colour?" in str(prompt["text"]), prompt
        # Withdrawn by its time: the gadget drops it when ttl_s is up, as Hermes does.
        assert prompt.get("ttl_s") == LAPSE_S, prompt
        reply = gadget.reply("You chose")
        end = gadget.wait_for(is_type("turn.end"))
        # herald has dropped it too: a late answer is refused.
        gadget.send({"type": "prompt.reply", "id": prompt["id"], "answer": "yes"})
        gadget.wait_for(lambda f: f.get("type") == "notice" and "expired" in str(f.get("text")))
    assert end["outcome"] == "success", end
    # No later step of the question was asked, and nothing was chosen.
    assert [f["id"] for f in gadget.frames if f.get("type") == "prompt"] == [prompt["id"]], gadget.frames
    assert not chosen(str(reply["text"])), reply


def test_a_clarify_nobody_answers_on_a_phone_is_withdrawn_and_the_turn_ends(rig: Rig) -> None:
    lapse_after(rig, LAPSE_S)
    with rig.phone("tel-clarify-lapse") as phone:
        phone.say("which colour do I like today?")
        card = phone.card("clarify")
        done = phone.wait_for(lambda f: f.get("t") == "prompt_done" and f.get("prompt_id") == card["id"])
        reply = phone.message("You chose")
        phone.wait_for(lambda f: f.get("t") == "typing" and bool(f.get("stop")))
    assert done.get("expired") is True, done
    assert not chosen(str(reply["text"])), reply
