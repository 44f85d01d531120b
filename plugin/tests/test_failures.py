"""A model that keeps failing, on every Hermes line: the gadget hears it as soon as Hermes
has run out of tries (herald's failure cue and notice, ``turn.end`` with
``outcome: "failure"``), not minutes later or never."""

from __future__ import annotations

from conftest import Rig
from devices import Frame
from stub_model import Rule


def test_a_failing_model_fails_the_gadgets_turn_at_once(rig: Rig) -> None:
    rig.add_rules(Rule(match="break the model", reply="", status=500))

    def no_recovery_cycles(config: dict[str, object]) -> None:
        # 0.22 retries for minutes in cycles after its last try; the turn must not wait
        # for them, and the test does not leave them running (0.19 has none).
        agent = config.setdefault("agent", {})
        assert isinstance(agent, dict)
        agent["auto_recovery_cycles"] = 0

    rig.home.update_config(no_recovery_cycles)
    with rig.gadget("pantry", speaker_rate=16000) as gadget:
        gadget.say("please break the model")
        start = gadget.wait_for(lambda f: f.get("type") == "turn.start")

        def ended(frame: Frame) -> bool:
            return frame.get("type") == "turn.end" and frame.get("turn") == start["turn"]

        # Hermes's three tries with its backoff take about 8 s; well within this.
        end = gadget.wait_for(ended, 40)
        said = [i for i, f in enumerate(gadget.frames) if f.get("text") == "Sorry, that did not work."]
        assert said and said[0] < gadget.frames.index(end), "the notice, then turn.end"
        # Herald's own cue (it names no turn) after the notice: the failure one.
        assert any(
            f.get("type") == "audio.start" and "turn" not in f for f in gadget.frames[said[0] :]
        ) or gadget.wait_for(lambda f: f.get("type") == "audio.start" and "turn" not in f, 10)
    assert end["outcome"] == "failure", end
