"""A speech-to-text "provider" for Hermes's command STT: ``stub_stt.py AUDIO LOG``.

It appends the audio path and whether the file is a WAV to LOG (one JSON line), so a
test can see what Hermes transcribed, and prints a fixed transcript.
"""

from __future__ import annotations

import json
import sys

TRANSCRIPT = "what is the weather like"


def main(audio: str, log: str) -> None:
    with open(audio, "rb") as file:
        header = file.read(12)
    is_wav = header[:4] == b"RIFF" and header[8:12] == b"WAVE"
    with open(log, "a") as file:
        file.write(json.dumps({"path": audio, "wav": is_wav}) + "\n")
    print(TRANSCRIPT)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
