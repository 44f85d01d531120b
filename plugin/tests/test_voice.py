"""A real voice round trip, offline: espeak-ng speaks a question, a gadget sends it as
an utterance, Hermes transcribes it with pocketsphinx through its ``local_command`` STT,
the stub model answers, Hermes's ``command`` TTS speaks the answer with espeak-ng, and
the gadget receives it as paced PCM at its own speaker rate.
"""

from __future__ import annotations

import array
import io
import subprocess
import wave
import pytest

from conftest import Rig
from devices import AUDIO_CHANNEL, is_reply_speech

QUESTION = "what is the weather like"
MIC_RATE = 16000
SPEAKER_RATE = 16000
# herald keeps speech at most half a second ahead of real time.
LEAD_S = 0.5


def spoken_question() -> bytes:
    """QUESTION as espeak-ng says it, as 16-bit PCM at the microphone's rate."""
    wav_bytes = subprocess.run(
        ["espeak-ng", "-v", "en-us", "-s", "150", "--stdout", QUESTION],
        check=True,
        capture_output=True,
        timeout=30,
    ).stdout
    with wave.open(io.BytesIO(wav_bytes)) as wav:
        rate = wav.getframerate()
        samples = array.array("h", wav.readframes(wav.getnframes()))
    return resample(samples, rate, MIC_RATE).tobytes()


def resample(samples: array.array[int], rate: int, target: int) -> array.array[int]:
    """Linear interpolation: plenty for speech a recogniser hears at 16 kHz."""
    out = array.array("h")
    last = len(samples) - 1
    for i in range(len(samples) * target // rate):
        position = i * rate / target
        j = int(position)
        a, b = samples[j], samples[min(j + 1, last)]
        out.append(int(a + (b - a) * (position - j)))
    return out


@pytest.fixture
def offline_stt(rig: Rig) -> None:
    """Hermes's STT switched to the local command (pocketsphinx) for one test (config.yaml
    is put back after it)."""
    rig.home.update_config(lambda c: c["stt"].update(provider="local_command"))


def test_a_spoken_question_is_transcribed_offline_and_answered_aloud(rig: Rig, offline_stt: None) -> None:
    with rig.gadget("studio", speaker_rate=SPEAKER_RATE) as gadget:
        gadget.speak(spoken_question(), rate=MIC_RATE)
        transcript = gadget.wait_for(lambda f: f.get("type") == "transcript")
        gadget.reply("It is sunny and warm today.")
        start = gadget.wait_for(is_reply_speech)
        end = gadget.wait_for(lambda f: f.get("type") == "audio.end" and f.get("stream") == start["stream"], timeout=30)
    # pocketsphinx heard the words, the device showed them, the model was asked them.
    assert "weather" in rig.user_turns()[-1]
    assert "weather" in str(transcript["text"]), transcript
    assert str(transcript["text"]) in rig.user_turns()[-1]
    assert start["rate"] == SPEAKER_RATE and start["format"] == "pcm16", start
    assert end["stream"] == start["stream"]

    speech = [
        (t, data[4:]) for t, data in gadget.binary if data[0] == AUDIO_CHANNEL and data[1] == start["stream"]
    ]
    assert speech, "no PCM arrived"
    seconds = sum(len(pcm) for _, pcm in speech) / (2 * SPEAKER_RATE)
    # espeak-ng needs well over a second for the answer.
    assert seconds > 1.0, seconds
    # Paced, not dumped: the frames arrive over (nearly) the time they take to play.
    span = speech[-1][0] - speech[0][0]
    assert span >= seconds - LEAD_S - 0.2, (span, seconds)
