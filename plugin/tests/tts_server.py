"""A streaming text-to-speech service on loopback, as Hermes's ``openai`` provider calls it.

``POST /v1/audio/speech {"input", "response_format": "pcm", ...}`` answers with the
words spoken by espeak-ng as raw 16-bit mono PCM, sent in chunks as espeak-ng makes them
(chunked transfer, odd sizes as they come) with the rate in ``X-Audio-Sample-Rate``, so
Hermes's streaming speech has a real provider with no network. It counts the texts it
was asked to speak.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ESPEAK_RATE = 22050
# espeak-ng --stdout writes a 44-byte WAV header before the samples.
WAV_HEADER = 44
READ = 4093


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "TtsServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            body = {}
        text = str(body.get("input") or "")
        if not self.path.rstrip("/").endswith("/audio/speech") or not text:
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.server.spoken(text)
        self.send_response(200)
        self.send_header("Content-Type", "audio/pcm")
        self.send_header("X-Audio-Sample-Rate", str(ESPEAK_RATE))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        espeak = subprocess.Popen(
            ["espeak-ng", "-v", "en-us", "--stdout", text], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert espeak.stdout is not None
        skip, sounded = WAV_HEADER, False
        try:
            while data := os.read(espeak.stdout.fileno(), READ):
                cut = min(skip, len(data))
                skip -= cut
                if data[cut:]:
                    self.write_chunk(data[cut:])
                    if not sounded:
                        self.server.sounded(text)
                        sounded = True
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except ConnectionError:
            pass
        finally:
            espeak.kill()
            espeak.wait()

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class TtsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self._lock = threading.Lock()
        self.texts: list[str] = []
        # When each text came and its first audio left (time.monotonic()), for the benchmark.
        self.asked: list[tuple[float, str]] = []
        self.first_audio: list[tuple[float, str]] = []

    def spoken(self, text: str) -> None:
        with self._lock:
            self.texts.append(text)
            self.asked.append((time.monotonic(), text))

    def sounded(self, text: str) -> None:
        with self._lock:
            self.first_audio.append((time.monotonic(), text))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, name="tts", daemon=True).start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


if __name__ == "__main__":
    server = TtsServer(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(server.base_url, flush=True)
    server.serve_forever()
