"""Gadgets and phones as Hermes platforms, end to end: a real ``hermes gateway run``
with the Herald plugin, its herald child, the stub model, and devices on WebSockets.

The tests share one gateway (see conftest.py); the one that stops a gateway starts its own.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import signal
import subprocess
import time
import wave
from pathlib import Path
from typing import Callable

import pytest

from conftest import LED_ACTION, Rig, Station, admin_get, admin_request, cleaning_rule, stub_stt_command
from devices import Frame, auth_mac, gadget_id, phone_user
from stub_stt import TRANSCRIPT


def is_type(kind: str) -> Callable[[Frame], bool]:
    return lambda frame: frame.get("type") == kind


# What Hermes says once /new has run.
SESSION_RESET = re.compile("Session reset|New session started|gateway\\.reset\\.header")
VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "gadget-v1.json"


@pytest.fixture
def heard(rig: Rig, tmp_path: Path) -> Path:
    """The log of this test's own in which the stub speech-to-text notes each file it
    hears (config.yaml is put back after the test)."""
    log = tmp_path / "stt.log"
    rig.home.update_config(lambda c: c["stt"]["providers"]["stub"].update(command=stub_stt_command(log)))
    return log


def test_the_test_gadget_agrees_with_the_shared_vectors() -> None:
    vectors = json.loads(VECTORS.read_text())
    for case in vectors["device_id"]:
        assert gadget_id(bytes.fromhex(case["key_hex"])) == case["device_id"], case["name"]
    for case in vectors["auth_mac"]:
        mac = auth_mac(bytes.fromhex(case["key_hex"]), case["device_id"], case["nonce"])
        assert (mac == case["mac"]) == case["valid"], case["name"]


# -- pairing through Hermes -------------------------------------------------------


def test_an_unpaired_gadget_shows_hermess_code_and_is_paired_without_reconnecting(rig: Rig) -> None:
    with rig.stranger_gadget() as gadget:
        assert gadget.welcome["paired"] is False
        pairing = gadget.wait_for(is_type("pairing"))
        code = pairing["code"]
        assert re.fullmatch(r"[A-Z2-9]{8}", code), pairing
        assert pairing["command"] == f"hermes pairing approve gadget {code}"

        rig.home.hermes("pairing", "approve", "gadget", code)
        gadget.wait_for(is_type("paired"), timeout=30)
        gadget.say("hello from a new gadget")
        assert gadget.reply("stub: hello from a new gadget")

        rig.home.hermes("pairing", "revoke", "gadget", gadget.device_id)
        gadget.wait_for(is_type("unpaired"), timeout=30)


def test_an_unpaired_phone_gets_hermess_code_and_talks_once_approved(rig: Rig) -> None:
    with rig.phone("tel-stranger", token=rig.stranger_token) as phone:
        phone.say("hello?")
        notice = phone.message("Pairing code:")
        code = re.search(r"Pairing code: ([A-Z2-9]{8})", str(notice["text"]))
        assert code, notice
        assert f"hermes pairing approve mobile {code.group(1)}" in notice["text"]
        assert not any("hello?" in turn for turn in rig.user_turns())

        rig.home.hermes("pairing", "approve", "mobile", code.group(1))
        try:
            # What it wrote while unpaired reaches the agent once it is approved.
            phone.message("stub: hello?")
            phone.say("hello again")
            assert phone.message("stub: hello again")
        finally:
            # The token's user is every stranger phone's: unpaired again for other tests.
            rig.home.hermes("pairing", "revoke", "mobile", phone_user(rig.stranger_token))


HERMES_PAIRINGS = """
import json, sys
from gateway.pairing import PairingStore
store = PairingStore()
print(json.dumps({
    "approved": [e["user_id"] for e in store.list_approved(sys.argv[1])],
    "pending": [e["user_id"] for e in store.list_pending(sys.argv[1])],
}))
"""


def test_the_consoles_pairing_page_approves_denies_and_revokes_in_hermes(rig: Rig) -> None:
    data = rig.home.path / "herald"

    def hermes_store() -> dict[str, list[str]]:
        store: dict[str, list[str]] = json.loads(rig.home.run_python(HERMES_PAIRINGS, "gadget"))
        return store

    with rig.stranger_gadget() as gadget, rig.stranger_gadget(name="Other") as other:
        code = gadget.wait_for(is_type("pairing"))["code"]
        other.wait_for(is_type("pairing"))
        waiting = {p["user_id"]: p for p in admin_request(data, "/v1/pairing") if p["approved_at"] is None}
        assert waiting[gadget.device_id]["code"] == code, waiting
        assert waiting[other.device_id]["user_name"] == "Other", waiting

        approved = admin_request(data, "/v1/pairing/approve", {"platform": "gadget", "code": code.lower()})
        assert approved["user_id"] == gadget.device_id, approved
        gadget.wait_for(is_type("paired"), timeout=30)
        store = hermes_store()
        assert gadget.device_id in store["approved"], store
        listed = {p["user_id"]: p for p in admin_request(data, "/v1/pairing")}
        assert listed[gadget.device_id]["approved_at"] is not None, listed

        # Deny: the waiting code is gone from Hermes too, so it can no longer be approved.
        admin_request(data, "/v1/pairing/revoke", {"platform": "gadget", "user_id": other.device_id})
        store = hermes_store()
        assert other.device_id not in store["pending"], store
        assert other.device_id not in {p["user_id"] for p in admin_request(data, "/v1/pairing")}

        admin_request(data, "/v1/pairing/revoke", {"platform": "gadget", "user_id": gadget.device_id})
        gadget.wait_for(is_type("unpaired"), timeout=30)
        assert gadget.device_id not in hermes_store()["approved"]


# -- conversation --------------------------------------------------------------------


def test_a_text_turn_streams_to_a_gadget(rig: Rig) -> None:
    with rig.gadget("kitchen") as gadget:
        gadget.say("stream the weather, please")
        start = gadget.wait_for(is_type("turn.start"))
        reply = gadget.reply("It is sunny and warm today.")
        end = gadget.wait_for(is_type("turn.end"))
    assert end["turn"] == start["turn"] and end["outcome"] == "success"
    assert reply["text"] == "It is sunny and warm today."
    previews = [f["text"] for f in gadget.frames if f.get("type") == "reply.delta"]
    assert previews, gadget.frames
    assert all("It is sunny and warm today.".startswith(p) for p in previews), previews


def test_a_text_turn_streams_to_a_phone(rig: Rig) -> None:
    with rig.phone("tel-turn") as phone:
        phone.say("stream the weather for tomorrow")
        final = phone.message("It is sunny and warm today.")
    assert final["text"] == "It is sunny and warm today."
    edits = [f for f in phone.frames if f.get("t") == "message" and f.get("id") == final["id"]]
    assert len(edits) >= 2 and all(f.get("edit") for f in edits[1:]), edits


def test_an_exec_approval_is_answered_on_the_gadget(rig: Rig, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    rig.add_rules(cleaning_rule("clean the gadget scratch", scratch))
    with rig.gadget("hall") as gadget:
        gadget.say("please clean the gadget scratch")
        prompt = gadget.wait_for(is_type("prompt"))
        assert prompt["title"] == "Allow this command?"
        assert f"rm -rf {scratch}" in prompt["text"]
        assert scratch.is_dir()
        gadget.send({"type": "prompt.reply", "id": prompt["id"], "answer": "yes"})
        gadget.reply("Cleaned:")
    assert not scratch.exists()


def test_an_exec_approval_is_answered_on_the_phone(rig: Rig, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    rig.add_rules(cleaning_rule("clean the phone scratch", scratch))
    with rig.phone("tel-approve") as phone:
        phone.say("please clean the phone scratch")
        card = phone.approval(f"rm -rf {scratch}")
        assert {"once", "deny"} <= {o["id"] for o in card["options"]}
        assert scratch.exists()
        phone.answer(card, "once")
        phone.message("Cleaned:")
    assert not scratch.exists()


def test_new_is_confirmed_on_a_phones_card(rig: Rig) -> None:
    with rig.phone("tel-new") as phone:
        phone.say("/new")
        card = phone.card("confirm")
        assert "/new" in card["text"]
        phone.answer(card, "once")
        phone.wait_for(lambda f: f.get("t") == "message" and bool(SESSION_RESET.search(str(f.get("text")))))


def test_a_gadgets_new_conversation_gesture_is_its_own_confirmation(rig: Rig) -> None:
    with rig.gadget("kitchen") as gadget:
        gadget.send({"type": "session.new"})
        gadget.wait_for(lambda f: f.get("type") == "reply" and bool(SESSION_RESET.search(str(f.get("text")))))
    assert not any(f.get("type") == "prompt" for f in gadget.frames), gadget.frames


def test_the_model_calls_a_gadget_action_as_a_tool(rig: Rig) -> None:
    with rig.gadget("desk", actions=[LED_ACTION]) as gadget:
        gadget.action_results["led.set"] = {"ok": True, "result": {"led": "red"}}
        gadget.say("turn the light on")
        action = gadget.wait_for(is_type("action"))
        reply = gadget.reply("The gadget said")
    assert (action["name"], action["args"]) == ("led.set", {"color": "red"})
    assert '"led": "red"' in reply["text"] or "'led': 'red'" in reply["text"], reply


def test_a_phones_voice_message_reaches_hermes_as_a_wav(rig: Rig, heard: Path) -> None:
    with rig.phone("tel-voice") as phone:
        recording = base64.b64encode(silent_wav(0.6)).decode()
        phone.send({"t": "audio", "id": "voice-1", "format": "wav", "data": recording})
        phone.message("It is sunny and warm today.")
        # Hermes echoes the transcript before the agent answers: it would be here by now.
        phone.settle()
    assert_transcribed_a_wav(rig, heard)
    # Hermes's transcript echo goes to the transcript call, which phones leave out.
    assert not any(str(f.get("text", "")).startswith("🎙") for f in phone.frames), phone.frames


def test_a_gadgets_utterance_reaches_hermes_as_a_wav_and_its_transcript_comes_back(rig: Rig, heard: Path) -> None:
    with rig.gadget("hall") as gadget:
        with wave.open(io.BytesIO(silent_wav(0.6))) as wav:
            gadget.speak(wav.readframes(wav.getnframes()))
        transcript = gadget.wait_for(is_type("transcript"))
        gadget.reply("It is sunny and warm today.")
    assert transcript["text"] == TRANSCRIPT
    assert_transcribed_a_wav(rig, heard)
    replies = [str(f.get("text")) for f in gadget.frames if f.get("type") == "reply"]
    assert not any(text.startswith("🎙") for text in replies), replies


def assert_transcribed_a_wav(rig: Rig, log: Path) -> None:
    """The stub speech-to-text heard one WAV file, and the model was asked its words."""
    heard = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(heard) == 1 and heard[0]["wav"] and heard[0]["path"].endswith(".wav"), heard
    assert TRANSCRIPT in rig.user_turns()[-1]


# -- delivery from other processes ---------------------------------------------------


def said_home(chat_id: str, text: str) -> bool:
    """Hermes's answer to /sethome (the forks of 0.20 and 0.22 send its raw key)."""
    return chat_id in text or "gateway.set_home.success" in text


def test_sethome_then_hermes_send_reaches_a_gadget(rig: Rig) -> None:
    with rig.gadget("porch") as gadget:
        gadget.say("/sethome")
        gadget.wait_for(lambda f: f.get("type") == "reply" and said_home(gadget.device_id, str(f.get("text"))))
        sent = rig.home.hermes("send", "--to", "gadget", "The bread is ready.", check=False)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        gadget.reply("The bread is ready.")


def test_sethome_then_hermes_send_reaches_a_phone(rig: Rig) -> None:
    with rig.phone("tel-home") as phone:
        phone.say("/sethome")
        phone.wait_for(lambda f: f.get("t") == "message" and said_home(phone.device_id, str(f.get("text"))))
        sent = rig.home.hermes("send", "--to", "mobile", "The laundry is done.", check=False)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        phone.message("The laundry is done.")


def test_hermes_gadget_and_mobile_commands_wrap_herald(rig: Rig) -> None:
    info = rig.home.hermes("gadget", "info").stdout
    assert rig.gadget_url in info and "listening" in info, info
    assert "herald serve" not in info and "warning" not in info, info
    with rig.gadget("kitchen") as gadget, rig.phone("tel-listed") as phone:
        assert listed_gadget(rig, gadget.device_id)["online"] is True
    # herald notices the gadget leave on its own time: until then it is listed online.
    deadline = time.monotonic() + 30
    while listed_gadget(rig, gadget.device_id)["online"] is not False:
        assert time.monotonic() < deadline, listed_gadget(rig, gadget.device_id)
        time.sleep(0.2)
    phones = json.loads(rig.home.hermes("mobile", "devices", "--json").stdout)
    assert phone.device_id in {p["id"] for p in phones}, phones


def listed_gadget(rig: Rig, device_id: str) -> dict[str, object]:
    """The gadget as ``hermes gadget devices`` lists it."""
    gadgets = json.loads(rig.home.hermes("gadget", "devices", "--json").stdout)
    found: dict[str, object] | None = next((g for g in gadgets if g["id"] == device_id), None)
    assert found is not None, gadgets
    return found


def test_hermes_gadget_info_warns_when_replies_cannot_be_spoken(rig: Rig) -> None:
    # config.yaml is put back after the test.
    rig.home.update_config(lambda c: c.update(tts={"provider": "elevenlabs"}))
    info = rig.home.hermes("gadget", "info").stdout
    assert "Text-to-speech:      elevenlabs" in info, info
    assert "warning: Hermes cannot speak replies" in info, info


def test_hermes_gadget_pair_waits_for_a_gadget_and_approves_it(rig: Rig) -> None:
    key = os.urandom(32)
    device_id = gadget_id(key)
    # Started before the gadget exists: the command waits for it to show a code.
    pairing = subprocess.Popen(
        [str(rig.home.executable), "gadget", "pair", "--yes", device_id, "--timeout", "60"],
        env=rig.home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with rig.stranger_gadget(key, "Newcomer") as gadget:
            gadget.wait_for(is_type("pairing"))
            gadget.wait_for(is_type("paired"), timeout=60)
            out, _ = pairing.communicate(timeout=30)
    finally:
        if pairing.poll() is None:
            pairing.kill()
    assert pairing.returncode == 0 and f"Approved Newcomer ({device_id})" in out, out


def test_hermes_gadget_pair_asks_and_yes_wants_exactly_one(rig: Rig) -> None:
    with rig.stranger_gadget() as first, rig.stranger_gadget() as second:
        first.wait_for(is_type("pairing"))
        second.wait_for(is_type("pairing"))
        refused = rig.home.hermes("gadget", "pair", "--yes", check=False)
        assert refused.returncode == 1 and "name one" in refused.stderr, refused
        asked = subprocess.run(
            [str(rig.home.executable), "gadget", "pair", second.device_id],
            env=rig.home.env,
            input="y\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert asked.returncode == 0 and "Approve Stranger" in asked.stdout, asked
        second.wait_for(is_type("paired"), timeout=30)
        # The command has returned: had it paired the first one too, that news is here now.
        first.settle()
    assert not any(f.get("type") == "paired" for f in first.frames), first.frames


# -- supervision ---------------------------------------------------------------------


def test_herald_is_restarted_when_it_dies(rig: Rig) -> None:
    readies = rig.gateway.log().count("herald ready")
    os.kill(herald_pid(rig), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while rig.gateway.log().count("herald ready") <= readies:
        assert time.monotonic() < deadline, rig.gateway.log()[-3000:]
        time.sleep(0.2)
    # A new process listens on new ports (the tests ask for free ones): the other tests
    # reach the gateway's herald where it is now.
    info = admin_get(rig.home.path / "herald", "/v1/info")
    rig.gadget_url, rig.mobile_url = str(info["gadget_url"]), str(info["mobile_url"])
    with rig.gadget("kitchen") as gadget:
        gadget.say("is the weather still fine?")
        gadget.reply("It is sunny and warm today.")
    with rig.phone("tel-after-restart") as phone:
        phone.say("and the weather on the phone?")
        phone.message("It is sunny and warm today.")


def test_stopping_the_gateway_stops_herald(station: Station) -> None:
    rig = station.start()
    try:
        pid = herald_pid(rig)
    finally:
        rig.gateway.stop()
    assert not rig.gateway.leftovers, rig.gateway.log()[-3000:]
    assert not Path(f"/proc/{pid}").exists()
    assert not (rig.home.path / "herald" / "admin.json").exists()


def herald_pid(rig: Rig) -> int:
    started = re.findall(r"started herald \(pid (\d+)\)", rig.gateway.log())
    assert started, rig.gateway.log()[-3000:]
    return int(started[-1])


def silent_wav(seconds: float) -> bytes:
    """A mono 16-bit 16 kHz WAV; the stub speech-to-text hears the same words in anything."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(b"\0\0" * int(16000 * seconds))
    return buffer.getvalue()
