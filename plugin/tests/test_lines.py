"""The plugin on each tested Hermes line: every private name it needs is where
``compat`` looks for it, Hermes's plugin gate passes, the device tools are in the
model's view, ``hermes send`` reaches a device by id where the line parses targets, and
``hermes gadget info`` says which Hermes it runs on."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from conftest import Rig
from harness import PLUGIN_ROOT, hermes_line
from herald import compat
from herald.prompts import NONE_OF_THESE, PendingPrompt, clarify_text
from herald.targets import parse_target, valid_target

LINE = hermes_line().name
# Each private Hermes name the plugin reaches (compat.py), as module:attribute.
PRIVATE_NAMES = [
    "gateway.run:GatewayRunner._is_user_authorized",
    "gateway.run:GatewayRunner._get_unauthorized_dm_behavior",
    "gateway.platforms.base:BasePlatformAdapter.build_source",
    "gateway.session:build_session_key",
    "gateway.session_context:get_session_env",
    "gateway.pairing:CODE_TTL_SECONDS",
    "gateway.pairing:PairingStore._pending_path",
    "gateway.pairing:PairingStore._approve_user",
    "gateway.pairing:PairingStore._is_locked_out",
    "gateway.pairing:PairingStore.approve_code",
    "tools.approval:resolve_gateway_approval",
    "tools.approval:has_blocking_approval",
    "tools.clarify_gateway:get_clarify_timeout",
    "tools.clarify_gateway:resolve_gateway_clarify",
    "tools.slash_confirm:resolve",
    "hermes_cli.pairing:pairing_command",
    "tools.transcription_tools:_load_stt_config",
    "tools.transcription_tools:_get_provider",
    "tools.tts_tool:_load_tts_config",
    "tools.tts_tool:_get_provider",
    "tools.tts_tool:check_tts_requirements",
    "toolsets:_HERMES_CORE_TOOLS",
]
# What only some lines have (or need), and compat reaches only where it is.
LATER_NAMES = {
    "0.19": ["gateway.run:GatewayRunner._should_send_voice_reply"],
    "0.20": [
        "gateway.pairing:PairingStore.approve_request",
        "tools.clarify_gateway:get_pending_for_session",
        "gateway.platforms.base:BasePlatformAdapter._streaming_tts_turn_completed",
    ],
    "0.22": [
        "gateway.pairing:PairingStore.approve_request",
        "tools.clarify_gateway:get_pending_for_session",
        "gateway.platforms.base:BasePlatformAdapter._streaming_tts_turn_completed",
        "gateway.platforms.base:BasePlatformAdapter._source_session_key",
        "gateway.run:GatewayRunner._voice_key_for_source",
    ],
}


def resolve(name: str) -> object:
    module, _, path = name.partition(":")
    found: object = importlib.import_module(module)
    for part in path.split("."):
        found = getattr(found, part)
    return found


@pytest.mark.parametrize("name", PRIVATE_NAMES + LATER_NAMES.get(LINE, []))
def test_every_private_name_the_plugin_uses_is_there(name: str) -> None:
    assert resolve(name) is not None


def test_only_target_parsing_is_off_and_only_on_0_19() -> None:
    from gateway.platforms.base import BasePlatformAdapter
    from gateway.run import GatewayRunner

    off = [f.name for f in compat.missing_features(GatewayRunner, BasePlatformAdapter, live=False)]
    assert off == (["`hermes send --to gadget:ID` / `mobile:ID` by device id"] if LINE == "0.19" else [])
    assert compat.is_tested(compat.hermes_version())


def test_an_untested_hermes_is_named_with_what_is_off() -> None:
    missing = [compat.FEATURES[3]]
    said = compat.describe_support("0.23.1", missing)
    assert said is not None and "0.23.1 is not a line the Herald plugin is tested on" in said
    assert "telling a chat's own run" in said and "0.22.2" in said
    assert "everything the plugin uses is present" in str(compat.describe_support("0.21.3", []))
    assert compat.describe_support("0.22.2.post1", []) is None


def test_device_ids_are_targets_and_other_words_are_left_to_hermes() -> None:
    assert parse_target("gadget")(" hg-0123456789abcdef ") == ("hg-0123456789abcdef", None)
    assert parse_target("gadget")("Kitchen") is None
    assert valid_target("gadget")("hg-0123456789abcdef") is True
    assert "not a gadget id" in str(valid_target("gadget")("12345"))
    assert parse_target("mobile")("tel-1") == ("tel-1", None)
    assert parse_target("mobile")("two words") is None
    assert "1 to 256 bytes" in str(valid_target("mobile")("x" * 257))


def test_clarify_answers_are_in_the_shape_hermes_reads() -> None:
    single = PendingPrompt("clarify", "hg-1", "s", "c1", ["red", "green"])
    several = PendingPrompt("clarify", "hg-1", "s", "c2", ["hall", "den", "attic"], multi_select=True)
    assert clarify_text(single, {"kind": "prompt_answer", "prompt_id": "p1", "choice": "option", "index": 1}) == "green"
    assert clarify_text(single, {"kind": "prompt_answer", "prompt_id": "p1", "choice": "cancel"}) == NONE_OF_THESE
    assert clarify_text(several, {"kind": "prompt_answer", "prompt_id": "p1", "choice": "options", "indices": [0, 2]}) == json.dumps(["hall", "attic"])
    assert clarify_text(several, {"kind": "prompt_answer", "prompt_id": "p1", "choice": "options", "indices": []}) == NONE_OF_THESE
    assert clarify_text(several, {"kind": "prompt_answer", "prompt_id": "p1", "choice": "option", "index": 1}) == json.dumps(["den"])
    assert clarify_text(several, {"kind": "prompt_answer", "prompt_id": "p1", "choice": "other", "text": "Attic, hall"}) == json.dumps(["attic", "hall"])
    assert clarify_text(several, {"kind": "prompt_answer", "prompt_id": "p1", "choice": "other", "text": "the warm ones"}) == "the warm ones"
    # 0.22 marks its first choice; typing the choice's words is enough.
    marked = PendingPrompt("clarify", "hg-1", "s", "c3", ["hall (Recommended)", "den"], multi_select=True)
    assert clarify_text(marked, {"kind": "prompt_answer", "prompt_id": "p1", "choice": "other", "text": "Hall, den"}) == json.dumps(["hall (Recommended)", "den"])


gate = pytest.mark.skipif(LINE != "0.22", reason="`hermes plugins validate` is new in 0.22")


@gate
def test_hermess_plugin_gate_passes(rig: Rig) -> None:
    validated = rig.home.hermes("plugins", "validate", str(PLUGIN_ROOT / "herald"), check=False)
    report = validated.stdout + validated.stderr
    assert validated.returncode == 0 and "✗" not in report, report
    doctor = rig.home.hermes("plugins", "doctor", "--ci", "herald", check=False)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def test_the_model_is_offered_the_device_tools_on_a_gadget(rig: Rig) -> None:
    with rig.gadget("hall") as gadget:
        gadget.say("what is the weather?")
        gadget.reply("sunny")
    request = next(
        r for r in reversed(rig.requests())
        if any("weather" in str(m.get("content")) for m in r.get("messages", []))
    )
    offered = {t.get("function", {}).get("name") for t in request.get("tools", [])}
    assert {"gadget_action", "gadget_display", "gadget_devices"} <= offered, sorted(offered)


targets = pytest.mark.skipif(LINE == "0.19", reason="0.19 resolves only numeric ids (README)")


@targets
def test_hermes_send_reaches_a_gadget_and_a_phone_by_id(rig: Rig) -> None:
    with rig.gadget("desk") as gadget, rig.phone("tel-target") as phone:
        # Known to Hermes only once they have talked.
        gadget.say("what is the weather?")
        gadget.reply("sunny")
        phone.say("what is the weather?")
        phone.message("sunny")
        for to in (f"gadget:{gadget.device_id}", f"mobile:{phone.device_id}"):
            sent = rig.home.hermes("send", "--to", to, f"Parcel for {to}.", check=False)
            assert sent.returncode == 0, sent.stdout + sent.stderr
        gadget.reply(f"Parcel for gadget:{gadget.device_id}.")
        phone.message(f"Parcel for mobile:{phone.device_id}.")


def test_hermes_gadget_info_names_the_hermes_it_runs_on(rig: Rig) -> None:
    info = rig.home.hermes("gadget", "info").stdout
    version = compat.TESTED_LINES[LINE]
    assert f"Hermes:              {version}" in info and "a tested line" in info, info
    assert ("off: `hermes send" in info) == (LINE == "0.19"), info


def test_connect_says_nothing_about_support_on_a_tested_line(rig: Rig) -> None:
    log = rig.gateway.log()
    assert "not a line the Herald plugin is tested on" not in log
    assert ("off on this line" in log) == (LINE == "0.19"), Path(rig.gateway.log_path).name
