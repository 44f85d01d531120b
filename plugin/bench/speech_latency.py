"""How soon a gadget speaks after its user lets go of the button, and where the time goes,
through the real Hermes.

    plugin/.hermes-venv/bin/python plugin/bench/speech_latency.py [--turns 3] [--words-per-s 12]
    plugin/.hermes-venv-0.22/bin/python plugin/bench/speech_latency.py ...

A real ``hermes gateway run`` (the line of the Python that runs this, the plugin installed
by install.sh, herald in bridge mode) with a gadget that has a speaker. Each turn the
gadget sends an utterance (a question spoken by espeak-ng), Hermes transcribes it
offline (pocketsphinx through its ``local_command`` speech-to-text), and a stub model
streams a reply of four sentences, the first opening with a clause, at ``--words-per-s``
words a second. Three ways of speaking it:

- ``whole``: the whole reply synthesized as one file after it is written (Hermes's
  streaming of text off, so the reply arrives whole: what a gadget heard before);
- ``sentences``: herald's sentence road, Hermes's ``command`` text-to-speech (espeak-ng)
  speaking the first clause, then each sentence, as the reply streams in;
- ``provider`` (0.20 and later): Hermes's ``openai`` provider served on loopback by
  espeak-ng behind an OpenAI-compatible ``/v1/audio/speech`` that streams PCM, which
  Hermes streams through the plugin's hooks (0.19 has no hooks).

Every time is measured from the gadget's ``audio.end``, each by whoever saw it happen:

- ``cue``: the first PCM of herald's acknowledgement (a cue stream, naming no turn);
- ``stt``: the speech-to-text command finished (its own clock, noted by a wrapper);
- ``asked``: the stub model got the agent's request (the agent has started);
- ``token``: the stub model sent the reply's first text;
- ``clause``: the gadget was shown text holding the first clause (herald forwards each
  edit as it comes, so this is when the words reached herald, give or take a loopback hop);
- ``tts-in``, ``tts-out``: the first synthesis began and ended (the ``command``
  wrapper's clock; for ``provider`` the loopback service got the text and sent its first
  PCM);
- ``PCM``: the first frame of the reply's speech at the gadget;
- ``seam``: the longest silence in the reply's speech, as a gadget hears it that plays each
  frame as soon as it has it and the last one has played (no jitter buffer: the worst
  case), and ``>150``: how many silences were longer than 150 ms.

It reports the median of ``--turns`` turns for each way, the goals (first sound at most
0.25x the ``whole`` way's, and at most 0.5 s after the first clause reached herald), and
checks that nothing was spoken twice (one reply stream per turn, the audio's length near
the reply's). Everything listens on 127.0.0.1 in a temporary directory and is stopped at
the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

BENCH = Path(__file__).resolve().parent
TESTS = BENCH.parent / "tests"
sys.path.insert(0, str(TESTS))

from conftest import noted_espeak_tts, syntheses  # noqa: E402
from devices import AUDIO_CHANNEL, Frame, GadgetClient, gadget_id  # noqa: E402
from harness import Gateway, HarnessError, HermesHome, herald_binary, hermes_line, hermes_venv  # noqa: E402
from stub_model import Rule, StubServer  # noqa: E402
from test_voice import MIC_RATE, spoken_question  # noqa: E402
from tts_server import ESPEAK_RATE, TtsServer  # noqa: E402

REPLY = (
    "Here is the forecast for today, mostly sunny with a light breeze. "
    "Temperatures will climb to about twenty two degrees by the afternoon. "
    "There is a small chance of a shower in the early evening. "
    "Tomorrow looks warmer and completely dry."
)
FIRST_CLAUSE = "Here is the forecast for today,"
SPEAKER_RATE = 16000
WAYS = ("whole", "sentences", "provider")
SEAM_S = 0.15
# The moments of a turn, in order, as the table shows them.
MOMENTS = ("cue", "stt", "asked", "token", "clause", "tts-in", "tts-out", "pcm")


@dataclass
class Turn:
    """One turn's moments (seconds after audio.end; None when not seen) and its speech."""

    at: dict[str, Optional[float]]
    last_pcm: float
    seam: float
    seams_over: int
    seconds: float
    streams: int


@dataclass
class Clocks:
    """What the bench's helpers noted, read back per turn."""

    model: StubServer
    tts: TtsServer
    root: Path
    # time.time() - time.monotonic(): the wrappers note the wall clock.
    wall: float = field(default_factory=lambda: time.time() - time.monotonic())

    @property
    def stt_log(self) -> Path:
        return self.root / "stt.log"

    @property
    def tts_log(self) -> Path:
        return self.root / "tts.log"

    def stt_done(self, since: float) -> Optional[float]:
        if not self.stt_log.exists():
            return None
        return first_after([float(t) - self.wall for t in self.stt_log.read_text().split()], since)

    def synthesis(self, since: float, way: str) -> tuple[Optional[float], Optional[float]]:
        """When the turn's first synthesis began and ended (its first audio, streamed)."""
        if way == "provider":
            sounded = first_after([t for t, _ in self.tts.first_audio], since)
            return first_after([t for t, _ in self.tts.asked], since), sounded
        noted = [s for s in syntheses(self.tts_log) if s.began - self.wall >= since]
        return (noted[0].began - self.wall, noted[0].ended - self.wall) if noted else (None, None)

    def model_times(self, since: float) -> tuple[Optional[float], Optional[float]]:
        times = [t for t in self.model.script.times() if t["received"] >= since]
        if not times:
            return None, None
        return times[0]["received"], times[0].get("first_text")


def first_after(times: list[float], since: float) -> Optional[float]:
    return min((t for t in times if t >= since), default=None)


class TimedGadget(GadgetClient):
    """A gadget that notes when each JSON frame came (binary frames are timed already)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.frame_times: list[float] = []
        super().__init__(*args, **kwargs)

    def on_frame(self, frame: Frame) -> None:
        self.frame_times.append(time.monotonic())
        super().on_frame(frame)


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
    return 0 if all(t.streams == 1 for turns in results.values() for t in turns) else 1


def run(turns: int, word_s: float) -> dict[str, list[Turn]]:
    # Hermes reads its streaming settings at start: a gateway for each way.
    ways = WAYS if hermes_line().name != "0.19" else WAYS[:2]
    with tempfile.TemporaryDirectory(prefix="herald-speech-bench-") as root:
        model = StubServer()
        model.start()
        tts = TtsServer()
        tts.start()
        clocks = Clocks(model, tts, Path(root))
        key = os.urandom(32)
        home = HermesHome(Path(root) / "home", hermes_venv(), model.base_url)
        home.set_env(GADGET_ALLOWED_USERS=gadget_id(key))
        model.script.set_rules([Rule(match="weather", reply=REPLY, piece_delay_s=word_s)])
        home.herald_on_free_ports()
        home.install_herald(herald_binary())
        utterance = spoken_question()
        # LOCAL_STT noting when it is done; 0.19 runs it in a shell, 0.22 splits it itself.
        noted = f'{sys.executable} {TESTS / "stt_pocketsphinx.py"} "$1" "$2" && date +%s.%N >> {clocks.stt_log}'
        stt = f"sh -c {shlex.quote(noted)} sh {{input_path}} {{output_dir}}"
        results: dict[str, list[Turn]] = {}
        try:
            for way in ways:
                configure(home, way, tts, clocks)
                gateway = Gateway(home, {"HERMES_LOCAL_STT_COMMAND": stt})
                try:
                    gateway.wait_ready()
                    gateway.wait_for_log("herald ready")
                    url = gadget_url(home)
                    results[way] = [turn(url, key, utterance, way, clocks) for _ in range(turns)]
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
    data = home.path / "herald"
    endpoint = json.loads((data / "admin.json").read_text())
    token = (data / "admin.token").read_text().strip()
    request = urllib.request.Request(endpoint["url"] + "/v1/info", headers={"Authorization": f"Bearer {token}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        return str(json.loads(response.read())["gadget_url"])


def configure(home: HermesHome, way: str, tts: TtsServer, clocks: Clocks) -> None:
    """Hermes's settings for one way of speaking (read by Hermes at each turn)."""
    command = {"type": "command", "command": noted_espeak_tts(clocks.tts_log), "format": "wav"}
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


def turn(url: str, key: bytes, utterance: bytes, way: str, clocks: Clocks) -> Turn:
    with TimedGadget(url, key, "Bench", speaker_rate=SPEAKER_RATE) as gadget:
        gadget.speak(utterance, rate=MIC_RATE)
        released = time.monotonic()
        start = gadget.wait_for(lambda f: f.get("type") == "turn.start", 120)
        gadget.wait_for(lambda f: f.get("type") == "turn.end" and f.get("turn") == start["turn"], 120)
        gadget.drain(2.0)
    # Streams name the turn they speak; herald's own cues name none.
    starts = [f for f in gadget.frames if f.get("type") == "audio.start"]
    speech = {f["stream"] for f in starts if f.get("turn")}
    cues = {f["stream"] for f in starts if not f.get("turn")}
    frames = [(at, data) for at, data in gadget.binary if data[0] == AUDIO_CHANNEL and data[1] in speech]
    if not frames:
        raise HarnessError(f"the gadget heard no reply; it got {gadget.frames}")
    asked, token = clocks.model_times(released)
    began, ended = clocks.synthesis(released, way)

    def since(moment: Optional[float]) -> Optional[float]:
        return None if moment is None else moment - released

    seam, over = seams([(at, frame_seconds(data)) for at, data in frames])
    at = {
        "cue": since(next((t for t, d in gadget.binary if d[0] == AUDIO_CHANNEL and d[1] in cues), None)),
        "stt": since(clocks.stt_done(released)),
        "asked": since(asked),
        "token": since(token),
        "clause": since(shown(gadget, FIRST_CLAUSE)),
        "tts-in": since(began),
        "tts-out": since(ended),
        "pcm": frames[0][0] - released,
    }
    seconds = sum(frame_seconds(data) for _, data in frames)
    return Turn(at, frames[-1][0] - released, seam, over, seconds, len(speech))


def frame_seconds(data: bytes) -> float:
    return (len(data) - 4) / 2 / SPEAKER_RATE


def shown(gadget: TimedGadget, words: str) -> Optional[float]:
    """When the gadget was first shown text holding ``words``."""
    for frame, at in zip(gadget.frames, gadget.frame_times):
        if frame.get("type") in ("reply", "reply.delta") and words in str(frame.get("text", "")):
            return at
    return None


def seams(frames: list[tuple[float, float]]) -> tuple[float, int]:
    """The longest silence a gadget hears that plays each frame (arrival, seconds) once it
    has it and the one before has played, and how many silences pass SEAM_S."""
    longest, over, playing_until = 0.0, 0, frames[0][0]
    for arrival, seconds in frames:
        silence = arrival - playing_until
        if silence > 0:
            longest, over = max(longest, silence), over + (silence > SEAM_S)
        playing_until = max(arrival, playing_until) + seconds
    return longest, over


def median(values: list[Optional[float]]) -> Optional[float]:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def seconds_text(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(results: dict[str, list[Turn]], words_per_s: float) -> None:
    line = hermes_line()
    print(f"Hermes {line.version}, reply of 4 sentences ({len(REPLY.split())} words) at {words_per_s:g} words/s")
    print("seconds from the gadget's audio.end, median of each way's turns")
    header = "".join(f"{m:>8}" for m in MOMENTS)
    print(f"{'way':<10}{header} {'last':>6} {'seam':>6} {'>150':>4} {'audio':>6} {'streams':>7}")
    for way, turns in results.items():
        moments = "".join(f"{seconds_text(median([t.at[m] for t in turns])):>8}" for m in MOMENTS)
        print(
            f"{way:<10}{moments} {statistics.median(t.last_pcm for t in turns):>6.2f}"
            f" {max(t.seam for t in turns) * 1000:>4.0f}ms {sum(t.seams_over for t in turns):>4}"
            f" {statistics.median(t.seconds for t in turns):>6.2f} {max(t.streams for t in turns):>7}"
        )
    print(f"(espeak-ng speaks the reply in {espeak_seconds():.2f} s; seam and >150 over all turns)")
    whole = median([t.at["pcm"] for t in results["whole"]])
    for way, turns in results.items():
        if way == "whole" or whole is None:
            continue
        pcm = median([t.at["pcm"] for t in turns])
        after = median([pcm_after_clause(t) for t in turns])
        print(
            f"{way}: first sound {seconds_text(pcm)} s = {pcm / whole if pcm else 0:.2f}x whole (goal <= 0.25x), "
            f"{seconds_text(after)} s after the first clause reached herald (goal <= 0.50 s)"
        )


def pcm_after_clause(turn: Turn) -> Optional[float]:
    pcm, clause = turn.at["pcm"], turn.at["clause"]
    return None if pcm is None or clause is None else pcm - clause


def espeak_seconds() -> float:
    wav = subprocess.run(["espeak-ng", "-v", "en-us", "--stdout", REPLY], check=True, capture_output=True).stdout
    return (len(wav) - 44) / 2 / ESPEAK_RATE


if __name__ == "__main__":
    sys.exit(main())
