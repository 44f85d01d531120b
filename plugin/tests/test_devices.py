"""What the model knows about a gadget and what its tools may do with one: a per-device
channel prompt, the reference tool contract (gadget_action, gadget_display,
gadget_devices), replies spoken on gadgets with a speaker, and unpaired devices left alone.
"""

from __future__ import annotations

import json
from typing import Any

from conftest import LED_ACTION, Rig
from devices import Frame, is_reply_speech
from stub_model import Rule


def is_type(kind: str) -> Any:
    return lambda frame: frame.get("type") == kind


def system_prompts_with(rig: Rig, needle: str) -> list[str]:
    """The system prompt of every model request that mentions ``needle``."""
    found = []
    for request in rig.requests():
        system = "\n".join(
            str(m.get("content")) for m in request.get("messages", []) if m.get("role") == "system"
        )
        if needle in system:
            found.append(system)
    return found


def device_lines(system: str, marker: str) -> str:
    """The channel prompt's lines within a system prompt, from its first line on."""
    start = system.index(marker)
    lines = system[start:].splitlines()
    kept = [lines[0]] + [line for line in lines[1:] if line.startswith(("Its ", "It ", "- ", "The screen"))]
    return "\n".join(kept)


def test_each_gadget_message_describes_the_device_the_same_way(rig: Rig) -> None:
    marker = 'You are talking through the gadget "Desk"'
    with rig.gadget("desk", actions=[LED_ACTION]) as gadget:
        gadget.say("first question for the desk")
        gadget.reply("stub: first question for the desk")
        gadget.say("second question for the desk")
        gadget.reply("stub: second question for the desk")
    prompts = system_prompts_with(rig, marker)
    assert len(prompts) >= 2, prompts
    first, second = (device_lines(p, marker) for p in prompts[-2:])
    assert first == second, (first, second)
    assert "320x240 pixels, 26 columns by 10 rows of text" in first
    assert "no speaker" in first
    assert "- led.set: Set the colour of the LED ring" in first
    assert '"color"' in first
    # Only this device: no other gadget is described in its conversation.
    assert "Kitchen" not in first and "Hall" not in first


def test_gadget_action_takes_the_reference_parameters(rig: Rig) -> None:
    with rig.gadget("desk", actions=[LED_ACTION]) as gadget:
        gadget.action_results["led.set"] = {"ok": True, "result": {"led": "blue"}}
        gadget.say("please make it blue")
        action = gadget.wait_for(is_type("action"))
        gadget.reply("The gadget said")
    assert (action["name"], action["args"]) == ("led.set", {"color": "blue"})


def test_gadget_action_without_a_name_is_a_clear_tool_error(rig: Rig) -> None:
    with rig.gadget("desk", actions=[LED_ACTION]) as gadget:
        gadget.say("act without a name, please")
        reply = gadget.reply("The gadget said")
    assert "needs action, the name of one of the device's actions" in str(reply["text"]), reply
    assert not any(f.get("type") == "action" for f in gadget.frames)


def test_gadget_display_takes_text_title_and_seconds(rig: Rig) -> None:
    with rig.gadget("kitchen") as gadget:
        gadget.say("put up a card for me")
        card = gadget.wait_for(is_type("display"))
        gadget.reply("Shown:")
    assert (card["title"], card["body"], card["ttl_s"]) == ("Kitchen", "Tea is ready", 30)


def test_gadget_devices_lists_paired_devices_and_counts_those_waiting(rig: Rig) -> None:
    with rig.stranger_gadget() as stranger, rig.gadget("hall") as gadget:
        stranger.wait_for(is_type("pairing"))
        gadget.say("which devices do I have?")
        reply = gadget.reply("Devices:")
    listed = json.loads(str(reply["text"]).removeprefix("Devices: "))
    ids = {d["id"] for d in listed["devices"]}
    assert gadget.device_id in ids and stranger.device_id not in ids, listed
    hall = next(d for d in listed["devices"] if d["id"] == gadget.device_id)
    assert hall["online"] is True and hall["screen"]["width"] == 320, hall
    assert listed["waiting_for_approval"] >= 1, listed


def test_tools_never_drive_an_unpaired_gadget(rig: Rig) -> None:
    with rig.stranger_gadget() as stranger, rig.gadget("desk", actions=[LED_ACTION]) as gadget:
        stranger.wait_for(is_type("pairing"))
        rig.add_rules(
            Rule(match="blink the stranger", reply="Tool: {result}", tool="gadget_action",
                 arguments={"action": "led.set", "device": stranger.device_id}),
            Rule(match="card on the stranger", reply="Tool: {result}", tool="gadget_display",
                 arguments={"text": "hi", "device": stranger.device_id}),
        )
        gadget.say("blink the stranger")
        action = gadget.reply("Tool:")
        gadget.say("card on the stranger")
        card = gadget.reply("Tool:")
        # Both tools have answered: anything they had sent the stranger is here after this.
        stranger.settle()
    for reply in (action, card):
        assert "is not a paired gadget" in str(reply["text"]), reply
    assert not any(f.get("type") in ("action", "display") for f in stranger.frames), stranger.frames


def spoken(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if is_reply_speech(f)]


def test_a_gadget_with_a_speaker_hears_typed_replies_until_voice_off(rig: Rig) -> None:
    with rig.gadget("radio", speaker_rate=24000) as gadget:
        gadget.say("how is the weather for the radio?")
        # The text streams first; the speech follows, and the turn ends after it.
        gadget.reply("It is sunny and warm today.")
        start = gadget.wait_for(is_reply_speech)
        gadget.wait_for(lambda f: f.get("type") == "audio.end" and f.get("stream") == start["stream"])
        gadget.wait_for(is_type("turn.end"))
        assert start["rate"] == 24000 and gadget.binary, start

        gadget.say("/voice off")
        gadget.reply("")
        gadget.wait_for(is_type("turn.end"))
        heard = len(spoken(gadget.frames))
        gadget.say("and the weather now?")
        gadget.reply("It is sunny and warm today.")
        gadget.wait_for(is_type("turn.end"))
    assert len(spoken(gadget.frames)) == heard, gadget.frames


def test_a_gadget_without_a_speaker_never_gets_audio(rig: Rig) -> None:
    with rig.gadget("attic") as gadget:
        gadget.say("/voice tts")
        gadget.reply("")
        gadget.wait_for(is_type("turn.end"))
        gadget.say("what is the weather in the attic?")
        gadget.reply("It is sunny and warm today.")
        gadget.wait_for(is_type("turn.end"))
    assert not spoken(gadget.frames) and not gadget.binary, gadget.frames
