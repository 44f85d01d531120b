"""How soon a gadget speaks after its user lets go of the button, through the real Hermes.

    plugin/.hermes-venv/bin/python plugin/bench/speech_latency.py [--turns 3] [--words-per-s 12]
    plugin/.hermes-venv-0.22/bin/python plugin/bench/speech_latency.py ...

A real ``hermes gateway run`` (the line of the Python that runs this, the plugin installed
by install.sh, herald in bridge mode) with a gadget that has a speaker. Each turn the
gadget sends an utterance (a question spoken by espeak-ng), Hermes transcribes it
offline (pocketsphinx through its ``local_command`` speech-to-text), and a stub model
streams a reply of four sentences at ``--words-per-s`` words a second. From the
gadget's ``audio.end`` it measures the time to the first PCM frame it hears and to the
last, and the longest silence between frames once speech began (a gap between
sentences), for three ways of speaking:

- ``whole``: the whole reply synthesized as one file after it is written (Hermes's
  streaming of text off, so the reply arrives whole: what a gadget heard before);
- ``sentences``: herald's sentence road, Hermes's ``command`` text-to-speech (espeak-ng)
  speaking each sentence as the reply streams in;
- ``provider`` (0.20 and later): Hermes's ``openai`` provider served on loopback by
  espeak-ng behind an OpenAI-compatible ``/v1/audio/speech`` that streams PCM, which
  Hermes streams through the plugin's hooks (0.19 has no hooks).

It reports the median of ``--turns`` turns for each, their ratio to ``whole``, and
checks that nothing was spoken twice (one ``audio.start`` per turn, the audio's length
near the reply's). Everything listens on 127.0.0.1 in a temporary directory and is
stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
TESTS = BENCH.parent / "tests"
sys.path.insert(0, str(TESTS))

from conftest import ESPEAK_TTS, LOCAL_STT  # noqa: E402
from devices import AUDIO_CHANNEL, GadgetClient, gadget_id  # noqa: E402
from harness import Gateway, HarnessError, HermesHome, herald_binary, hermes_line, hermes_venv  # noqa: E402
from stub_model import Rule, StubServer  # noqa: E402
from test_voice import MIC_RATE, spoken_question  # noqa: E402
from tts_server import ESPEAK_RATE, TtsServer  # noqa: E402

REPLY = (
    "The forecast for today is mostly sunny with a light breeze. "
    "Temperatures will climb to about twenty two degrees by the afternoon. "
    "There is a small chance of a shower in the early evening. "
    "Tomorrow looks warmer and completely dry."
)
SPEAKER_RATE = 16000
WAYS = ("whole", "sentences", "provider")


@dataclass
class Heard:
    first_s: float
    last_s: float
    gap_s: float
    seconds: float
    streams: int


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=3, help="turns per way of speaking (default 3)")
    parser.add_argument("--words-per-s", type=float, default=12.0, help="the stub model's writing speed")
    args = parser.parse_args()
    try:
        results = run(args.turns, 1.0 / args.words_per_s)
    except HarnessError as err:
        print(f"speech_latency: {err}", file=sys.stderr)
        return 2
    report(results, args.words_per_s)
    return 0 if all(h.streams == 1 for heard in results.values() for h in heard) else 1


def run(turns: int, word_s: float) -> dict[str, list[Heard]]:
    # Hermes reads its streaming settings at start: a gateway for each way.
    ways = WAYS if hermes_line().name != "0.19" else WAYS[:2]
    with tempfile.TemporaryDirectory(prefix="herald-speech-bench-") as root:
        model = StubServer()
        model.start()
        tts = TtsServer()
        tts.start()
        key = os.urandom(32)
        home = HermesHome(Path(root) / "home", hermes_venv(), model.base_url)
        home.set_env(GADGET_ALLOWED_USERS=gadget_id(key))
        model.script.set_rules([Rule(match="weather", reply=REPLY, piece_delay_s=word_s)])
        home.herald_on_free_ports()
        home.install_herald(herald_binary())
        utterance = spoken_question()
        results: dict[str, list[Heard]] = {}
        try:
            for way in ways:
                configure(home, way, tts)
                gateway = Gateway(home, {"HERMES_LOCAL_STT_COMMAND": LOCAL_STT})
                try:
                    gateway.wait_ready()
                    gateway.wait_for_log("herald ready")
                    url = gadget_url(home)
                    results[way] = [turn(url, key, utterance) for _ in range(turns)]
                except AssertionError as err:
                    tail = "\n".join(gateway.log().splitlines()[-40:])
                    raise HarnessError(f"{way}: {err}\n--- the gateway's log ends:\n{tail}") from err
                finally:
                    gateway.stop()
            return results
        finally:
            model.stop()
            tts.stop()


def gadget_url(home: HermesHome) -> str:
    import json
    import urllib.request

    data = home.path / "herald"
    endpoint = json.loads((data / "admin.json").read_text())
    token = (data / "admin.token").read_text().strip()
    request = urllib.request.Request(endpoint["url"] + "/v1/info", headers={"Authorization": f"Bearer {token}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        return str(json.loads(response.read())["gadget_url"])


def configure(home: HermesHome, way: str, tts: TtsServer) -> None:
    """Hermes's settings for one way of speaking (read by Hermes at each turn)."""
    command = {"type": "command", "command": ESPEAK_TTS, "format": "wav"}
    openai = {"base_url": tts.base_url, "api_key": "stub", "model": "stub-tts", "voice": "stub"}
    speech: dict[str, Any] = {"provider": "espeak", "providers": {"espeak": command}}
    if way == "provider":
        speech = {"provider": "openai", "openai": openai, "streaming": {"provider": "openai"}}

    def change(config: dict[str, Any]) -> None:
        config.update(
            stt={"provider": "local_command"},
            tts=speech,
            streaming={"enabled": way != "whole", "transport": "edit", "cursor": ""},
            display={"platforms": {"gadget": {"tool_progress": "off"}}},
        )

    home.update_config(change)


def turn(url: str, key: bytes, utterance: bytes) -> Heard:
    with GadgetClient(url, key, "Bench", speaker_rate=SPEAKER_RATE) as gadget:
        gadget.speak(utterance, rate=MIC_RATE)
        released = time.monotonic()
        gadget.wait_for(lambda f: f.get("type") == "audio.end", 120)
        gadget.wait_for(lambda f: f.get("type") == "turn.end", 120)
        gadget.drain(2.0)
    frames = [(at, data) for at, data in gadget.binary if data[0] == AUDIO_CHANNEL]
    if not frames:
        raise HarnessError("the gadget heard nothing")
    times = [at for at, _ in frames]
    gaps = [b - a for a, b in zip(times, times[1:])]
    # Frames are paced 40 ms apart at most 0.5 s ahead: a gap is silence beyond a frame.
    gap = max(gaps, default=0.0) - 0.04
    seconds = sum(len(data) - 4 for _, data in frames) / 2 / SPEAKER_RATE
    streams = sum(1 for f in gadget.frames if f.get("type") == "audio.start")
    return Heard(times[0] - released, times[-1] - released, max(gap, 0.0), seconds, streams)


def report(results: dict[str, list[Heard]], words_per_s: float) -> None:
    line = hermes_line()
    print(f"Hermes {line.version}, reply of 4 sentences ({len(REPLY.split())} words) at {words_per_s:g} words/s")
    print("times from the gadget's audio.end (median of each way's turns)")
    whole = statistics.median(h.first_s for h in results["whole"])
    print(f"{'way':<10} {'first PCM':>10} {'ratio':>6} {'last PCM':>9} {'max gap':>8} {'audio':>7} {'streams':>7}")
    for way, heard in results.items():
        first = statistics.median(h.first_s for h in heard)
        print(
            f"{way:<10} {first:>9.2f}s {first / whole:>6.2f} {statistics.median(h.last_s for h in heard):>8.2f}s "
            f"{max(h.gap_s for h in heard) * 1000:>6.0f}ms {statistics.median(h.seconds for h in heard):>6.2f}s "
            f"{max(h.streams for h in heard):>7}"
        )
    print(f"(espeak-ng speaks the reply in {espeak_seconds():.2f} s)")


def espeak_seconds() -> float:
    import subprocess

    wav = subprocess.run(["espeak-ng", "-v", "en-us", "--stdout", REPLY], check=True, capture_output=True).stdout
    return (len(wav) - 44) / 2 / ESPEAK_RATE


if __name__ == "__main__":
    sys.exit(main())
