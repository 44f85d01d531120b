"""Speech that starts with the first sentence: a reply a gadget should hear is played as
it is written, in one stream, not spoken twice, and stopped by the device.

Typed turns take herald's sentence road on every line (Hermes's ``command`` text-to-speech
speaks each sentence); on 0.22 a voice turn with a provider that streams PCM (a loopback
OpenAI-compatible service in front of espeak-ng) takes Hermes's own streaming hooks.
Hermes is not asked for its whole-file speech of a reply said as it streams, and a voice
file the agent sends on purpose is played, whatever its name.
"""

from __future__ import annotations

import subprocess
import threading
import time
import wave
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from conftest import Rig, noted_espeak_tts, speak_with, syntheses
from devices import AUDIO_CHANNEL, Frame, GadgetClient, is_reply_speech
from harness import hermes_line
from stub_model import Rule
from stub_stt import TRANSCRIPT
from tts_server import ESPEAK_RATE, TtsServer

STORY = (
    "Once there was a small robot who lived on a kitchen shelf. "
    "It listened all day to the people cooking below it. "
    "One morning it decided to speak up at last. "
    "Everyone was delighted to hear its voice."
)
LAST_SENTENCE = "Everyone was delighted to hear its voice."
SPEAKER_RATE = 16000
# A reply streamed at about 20 words a second, as a quick model writes.
WORD_S = 0.05


def is_type(kind: str) -> Callable[[Frame], bool]:
    return lambda frame: frame.get("type") == kind


@contextmanager
def replying(rig: Rig, match: str, hold: threading.Event) -> Iterator[None]:
    """The model answers ``match`` with STORY, its last sentence held until ``hold``."""
    rig.add_rules(Rule(match=match, reply=STORY, piece_delay_s=WORD_S, hold_last_sentence=hold))
    try:
        yield
    finally:
        hold.set()


def heard_all(gadget: GadgetClient) -> None:
    """Until the turn is over and everything of it has reached the gadget.

    herald holds a turn's end back until the speech that began in the turn has ended,
    and Hermes sends its whole-file speech of a reply (which must not come after the
    reply was spoken sentence by sentence) before it tells the plugin the turn is over:
    a second stream would begin before ``turn.end``. The ping's answer then brings in
    whatever herald had queued for the gadget after it."""
    gadget.wait_for(is_type("turn.end"), 60)
    gadget.settle()


def first_sound(gadget: GadgetClient, timeout: float = 60) -> Frame:
    """The reply's audio.start, once its first PCM frame has arrived too."""
    start = gadget.wait_for(is_reply_speech, timeout)
    deadline = time.monotonic() + timeout
    while not pcm_of(gadget, start["stream"]):
        assert time.monotonic() < deadline, "no PCM after audio.start"
        gadget.receive(0.5)
    return start


def pcm_of(gadget: GadgetClient, stream: int) -> list[bytes]:
    """The PCM frames the gadget got on ``stream``."""
    return [data[4:] for _, data in gadget.binary if data[0] == AUDIO_CHANNEL and data[1] == stream]


def seconds_heard(gadget: GadgetClient, stream: int) -> float:
    return sum(len(pcm) for pcm in pcm_of(gadget, stream)) / 2 / SPEAKER_RATE


def espeak_seconds(text: str) -> float:
    wav = subprocess.run(["espeak-ng", "-v", "en-us", "--stdout", text], check=True, capture_output=True).stdout
    return (len(wav) - 44) / 2 / ESPEAK_RATE


def starts(gadget: GadgetClient) -> list[Frame]:
    """Every stream that spoke a reply."""
    return [f for f in gadget.frames if is_reply_speech(f)]


def test_a_typed_reply_is_spoken_from_its_first_sentence_and_once(rig: Rig, tmp_path: Path) -> None:
    noted = tmp_path / "tts.log"
    speak_with(rig, noted_espeak_tts(noted))
    held = threading.Event()
    with replying(rig, "tell the desk a story", held), rig.gadget("desk", speaker_rate=SPEAKER_RATE) as gadget:
        gadget.say("tell the desk a story")
        start = first_sound(gadget)
        # The model has not written its last sentence yet: speech began with the first.
        assert not any(LAST_SENTENCE in str(f.get("text", "")) for f in gadget.frames)
        assert start["rate"] == SPEAKER_RATE
        held.set()
        gadget.wait_for(lambda f: f.get("type") == "audio.end" and f.get("stream") == start["stream"], 60)
        heard_all(gadget)
    assert len(starts(gadget)) == 1, starts(gadget)
    # Every sentence was heard, none twice.
    whole = espeak_seconds(STORY)
    heard = seconds_heard(gadget, start["stream"])
    assert 0.8 * whole <= heard <= 1.3 * whole, (heard, whole)
    # And synthesized once, piece by piece: Hermes never made a file of the whole reply
    # (the gateway had sent everything it would before turn.end).
    texts = [s.text for s in syntheses(noted)]
    assert " ".join(texts) == STORY, texts


def test_a_reply_of_one_short_sentence_is_heard_within_its_turn(rig: Rig) -> None:
    # Complete only with the turn's last edit: its speech begins as the turn ends.
    with rig.gadget("porch", speaker_rate=SPEAKER_RATE) as gadget:
        gadget.say("how is the weather on the porch?")
        end = gadget.wait_for(is_type("turn.end"), 60)
        gadget.settle()
    spoken = starts(gadget)
    assert len(spoken) == 1 and gadget.frames.index(spoken[0]) < gadget.frames.index(end), gadget.frames
    said, heard = espeak_seconds("It is sunny and warm today."), seconds_heard(gadget, spoken[0]["stream"])
    assert 0.8 * said <= heard <= 1.3 * said, (heard, said)


def test_gadgets_speaking_at_once_each_hear_all_of_their_reply(rig: Rig) -> None:
    rig.add_rules(Rule(match="tell the room a story", reply=STORY, piece_delay_s=WORD_S))
    gadgets = [rig.gadget(name, speaker_rate=SPEAKER_RATE) for name in ("den", "loft", "nook")]
    try:
        # Their sentences are synthesized in the same moments.
        for gadget in gadgets:
            gadget.say("tell the room a story")
        for gadget in gadgets:
            heard_all(gadget)
    finally:
        for gadget in gadgets:
            gadget.close()
    whole = espeak_seconds(STORY)
    for gadget in gadgets:
        assert len(starts(gadget)) == 1, starts(gadget)
        heard = seconds_heard(gadget, starts(gadget)[0]["stream"])
        assert 0.8 * whole <= heard <= 1.3 * whole, (heard, whole)


def chime(path: Path, seconds: float, level: int) -> None:
    """A voice file the agent sends: a steady level, nothing like speech, at the
    speaker's rate, so herald passes its samples through as they are."""
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SPEAKER_RATE)
        wav.writeframes(level.to_bytes(2, "little", signed=True) * int(SPEAKER_RATE * seconds))


def is_chime(pcm: bytes, level: int) -> bool:
    """Most samples at the chime's level (its edges may be smoothed)."""
    samples = [int.from_bytes(pcm[i : i + 2], "little", signed=True) for i in range(0, len(pcm) - 1, 2)]
    return sum(abs(s - level) < level // 10 for s in samples) >= 0.8 * len(samples)


def test_a_voice_file_the_agent_sends_is_played_whatever_its_name_after_the_reply(rig: Rig, tmp_path: Path) -> None:
    # Named as Hermes names its text-to-speech files, in a turn spoken as it streams.
    voice, level = tmp_path / "tts_chime.wav", 3000
    chime(voice, 1.0, level)
    words = "Here is the chime you asked for. It plays right after these words."
    rig.add_rules(Rule(match="play the chime", reply=f"{words} MEDIA:{voice}", piece_delay_s=WORD_S))
    with rig.gadget("hall", speaker_rate=SPEAKER_RATE) as gadget:
        gadget.say("play the chime")
        first_sound(gadget)
        heard_all(gadget)
    # One stream: the reply said in full, then the chime (a stream of its own would
    # have cut the reply off).
    assert len(starts(gadget)) == 1, starts(gadget)
    pcm = b"".join(pcm_of(gadget, starts(gadget)[0]["stream"]))
    said, heard = espeak_seconds(words) + 1.0, len(pcm) / 2 / SPEAKER_RATE
    assert 0.8 * said <= heard <= 1.3 * said, (heard, said)
    assert is_chime(pcm[-int(0.8 * SPEAKER_RATE) * 2 :], level), "the chime did not come last"


def test_cancel_stops_the_speech_and_what_was_left_to_say(rig: Rig) -> None:
    held = threading.Event()
    with replying(rig, "tell the kitchen a story", held), rig.gadget("kitchen", speaker_rate=SPEAKER_RATE) as gadget:
        gadget.say("tell the kitchen a story")
        start = first_sound(gadget)
        gadget.send({"type": "cancel"})
        gadget.wait_for(lambda f: f.get("type") == "audio.abort" and f.get("stream") == start["stream"], 15)
        heard = len(pcm_of(gadget, start["stream"]))
        held.set()
        heard_all(gadget)
    # Nothing of that reply after the abort: no second stream, no more frames.
    assert len(starts(gadget)) == 1, starts(gadget)
    assert len(pcm_of(gadget, start["stream"])) <= heard + 1, (heard, len(pcm_of(gadget, start["stream"])))


@pytest.fixture
def streaming_provider(rig: Rig) -> Iterator[TtsServer]:
    """Hermes's speech through its ``openai`` provider, served on loopback, streaming."""
    server = TtsServer()
    server.start()
    openai = {"base_url": server.base_url, "api_key": "stub", "model": "stub-tts", "voice": "stub"}
    # config.yaml is put back after the test.
    rig.home.update_config(
        lambda c: c["tts"].update(provider="openai", openai=openai, streaming={"provider": "openai"})
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.skipif(hermes_line().name == "0.19", reason="Hermes 0.19 has no streaming speech hooks")
def test_hermess_streaming_hooks_play_a_voice_reply_as_it_is_synthesized(
    rig: Rig, streaming_provider: TtsServer
) -> None:
    held = threading.Event()
    with replying(rig, TRANSCRIPT, held), rig.gadget("porch", speaker_rate=SPEAKER_RATE) as gadget:
        # Any utterance: the tests' speech-to-text hears TRANSCRIPT.
        gadget.speak(bytes(SPEAKER_RATE))
        start = first_sound(gadget)
        assert not any(LAST_SENTENCE in str(f.get("text", "")) for f in gadget.frames)
        held.set()
        gadget.wait_for(lambda f: f.get("type") == "audio.end" and f.get("stream") == start["stream"], 60)
        heard_all(gadget)
    assert len(starts(gadget)) == 1, starts(gadget)
    # Hermes asked the provider sentence by sentence, each once.
    assert len(streaming_provider.texts) >= 3 and len(set(streaming_provider.texts)) == len(streaming_provider.texts)
    whole = espeak_seconds(STORY)
    heard = seconds_heard(gadget, start["stream"])
    assert 0.8 * whole <= heard <= 1.3 * whole, (heard, whole)
