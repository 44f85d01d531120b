"""Offline speech-to-text for Hermes's ``local_command`` provider, with pocketsphinx.

``stt_pocketsphinx.py AUDIO OUTPUT_DIR`` writes what it heard in AUDIO (a mono 16-bit
WAV at any rate) to ``OUTPUT_DIR/transcript.txt``, which is where Hermes reads a local
command's transcript. pocketsphinx ships its own English model, so nothing is fetched.
"""

from __future__ import annotations

import sys
import wave
from pathlib import Path

from pocketsphinx import Decoder


def transcribe(audio: Path) -> str:
    with wave.open(str(audio)) as wav:
        if wav.getnchannels() != 1 or wav.getsampwidth() != 2:
            raise SystemExit(f"{audio}: need mono 16-bit PCM")
        rate = wav.getframerate()
        pcm = wav.readframes(wav.getnframes())
    decoder = Decoder(samprate=rate)
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    hypothesis = decoder.hyp()
    return hypothesis.hypstr if hypothesis is not None else ""


def main(audio: str, output_dir: str) -> None:
    (Path(output_dir) / "transcript.txt").write_text(transcribe(Path(audio)) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
