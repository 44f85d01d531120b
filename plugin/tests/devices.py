"""Test clients for the two kinds of device, over real WebSockets.

:class:`GadgetClient` speaks gadget protocol v1 and :class:`PhoneClient` the mobile
protocol, just enough to play a device in the tests: the handshake, the frames a user
sends, and a record of everything the server sent, searchable with ``wait_for``. They
are test equipment; the plugin itself holds no protocol logic.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from typing import Any, Callable, TypeVar

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

Frame = dict[str, Any]
WAIT_S = 60.0
# Binary frames: channel, stream, sequence number (u16 LE), payload.
AUDIO_CHANNEL = 1
_Client = TypeVar("_Client", bound="DeviceClient")


class DeviceClient:
    """A connection and every frame received on it, in order."""

    def __init__(self, url: str) -> None:
        self.ws: ClientConnection = connect(url, proxy=None, open_timeout=10, compression=None)
        self.frames: list[Frame] = []
        # Binary frames with the time each arrived (time.monotonic()).
        self.binary: list[tuple[float, bytes]] = []
        self._seen = 0

    def send(self, frame: Frame) -> None:
        self.ws.send(json.dumps(frame))

    def receive(self, timeout: float) -> Frame | None:
        """The next frame, answering keepalives; None if none came in time."""
        try:
            data = self.ws.recv(timeout=timeout)
        except TimeoutError:
            return None
        if isinstance(data, bytes):
            self.binary.append((time.monotonic(), data))
            return {}
        frame = json.loads(data)
        if not isinstance(frame, dict):
            raise AssertionError(f"not a JSON object: {data!r}")
        self.frames.append(frame)
        self.on_frame(frame)
        return frame

    def on_frame(self, frame: Frame) -> None:
        """A hook for frames a device answers by itself."""

    def wait_for(self, match: Callable[[Frame], bool], timeout: float = WAIT_S) -> Frame:
        """The first frame not yet returned by ``wait_for`` that matches."""
        deadline = time.monotonic() + timeout
        while True:
            for index in range(self._seen, len(self.frames)):
                if match(self.frames[index]):
                    self._seen = index + 1
                    return self.frames[index]
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching frame in {timeout:.0f} s; got {self.frames[self._seen:]}")
            self.receive(left)

    def drain(self, quiet: float = 0.5) -> None:
        """Read until nothing arrives for ``quiet`` seconds (the benchmarks' warm-up; a test
        that checks something did not arrive ends on :meth:`settle` instead)."""
        while self.receive(quiet) is not None:
            pass

    def settle(self, timeout: float = WAIT_S) -> None:
        """A ping of our own and its pong: herald writes a connection's frames in order, so
        once the pong is here, so is everything herald had queued for this device before it.

        This is how a test ends a check that something did *not* arrive, instead of waiting
        a while. The frames read meanwhile stay unseen for ``wait_for``."""
        start = len(self.frames)
        token = self.ping()
        deadline = time.monotonic() + timeout
        while not self.ponged(token):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no pong in {timeout:.0f} s; got {self.frames[start:]}")
            self.receive(left)

    def ping(self) -> int:
        """Send a ping; a token for :meth:`ponged`."""
        raise NotImplementedError

    def ponged(self, token: int) -> bool:
        """Whether the pong to the ping ``token`` came."""
        raise NotImplementedError

    def close(self) -> None:
        try:
            self.ws.close()
        except ConnectionClosed:
            pass

    def __enter__(self: _Client) -> _Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class GadgetClient(DeviceClient):
    """A gadget: hello, challenge, auth (the key on first contact, later a MAC), welcome."""

    def __init__(
        self,
        url: str,
        key: bytes,
        name: str,
        actions: list[Frame] | None = None,
        speaker_rate: int | None = None,
    ) -> None:
        super().__init__(url)
        self.device_id = gadget_id(key)
        self.action_results: dict[str, Frame] = {}
        self.send(
            {
                "type": "hello",
                "proto": 1,
                "device_id": self.device_id,
                "name": name,
                "board": "esp32s3-test",
                "firmware": "0.1.0",
                "caps": {
                    "display": {"width": 320, "height": 240, "text_cols": 26, "text_rows": 10},
                    **({"speaker": {"rate": speaker_rate, "format": "pcm16"}} if speaker_rate else {}),
                },
                "actions": actions or [],
            }
        )
        challenge = self.wait_for(lambda f: f.get("type") in ("challenge", "error"), 10)
        assert challenge["type"] == "challenge", challenge
        if challenge["enrolled"]:
            self.send({"type": "auth", "mac": auth_mac(key, self.device_id, str(challenge["nonce"]))})
        else:
            self.send({"type": "auth", "key": base64.b64encode(key).decode()})
        self.welcome = self.wait_for(lambda f: f.get("type") in ("welcome", "error"), 30)
        assert self.welcome["type"] == "welcome", self.welcome

    def on_frame(self, frame: Frame) -> None:
        if frame.get("type") == "ping":
            self.send({"type": "pong", "ts": frame.get("ts")})
        elif frame.get("type") == "action" and frame.get("name") in self.action_results:
            result = self.action_results[str(frame["name"])]
            self.send({"type": "action.result", "id": frame["id"], **result})

    def ping(self) -> int:
        token = int.from_bytes(os.urandom(6), "little")
        self.send({"type": "ping", "ts": token})
        return token

    def ponged(self, token: int) -> bool:
        return any(f.get("type") == "pong" and f.get("ts") == token for f in self.frames)

    def say(self, text: str) -> None:
        self.send({"type": "text", "id": os.urandom(4).hex(), "text": text})

    def speak(self, pcm: bytes, rate: int = 16000, stream: int = 4) -> None:
        """An utterance, as push-to-talk sends it: 40 ms binary frames on channel 1."""
        utterance = os.urandom(4).hex()
        start = {"type": "audio.start", "id": utterance, "stream": stream, "rate": rate}
        self.send({**start, "format": "pcm16", "mode": "hold"})
        frame_bytes = rate // 25 * 2
        for seq, offset in enumerate(range(0, len(pcm), frame_bytes)):
            header = bytes([AUDIO_CHANNEL, stream]) + seq.to_bytes(2, "little")
            self.ws.send(header + pcm[offset : offset + frame_bytes])
        duration_ms = len(pcm) * 1000 // (rate * 2)
        self.send({"type": "audio.end", "id": utterance, "stream": stream, "duration_ms": duration_ms})

    def reply(self, containing: str) -> Frame:
        """The final reply (not a streaming preview) that contains ``containing``."""
        return self.wait_for(lambda f: f.get("type") == "reply" and containing in str(f.get("text")))


class PhoneClient(DeviceClient):
    """A phone app: hello with an app token, then ready."""

    def __init__(self, url: str, token: str, device_id: str) -> None:
        super().__init__(url)
        self.device_id = device_id
        self._pings = 0
        device = {"id": device_id, "name": "Test Phone", "platform": "test"}
        self.send({"t": "hello", "token": token, "device": device})
        ready = self.wait_for(lambda f: f.get("t") in ("ready", "error"), 10)
        assert ready["t"] == "ready", ready

    def ping(self) -> int:
        # A mobile pong names no ping: they are counted (herald answers them in order).
        self._pings += 1
        self.send({"t": "ping"})
        return self._pings

    def ponged(self, token: int) -> bool:
        return sum(1 for f in self.frames if f.get("t") == "pong") >= token

    def say(self, text: str) -> None:
        self.send({"t": "text", "id": os.urandom(4).hex(), "text": text})

    def message(self, containing: str) -> Frame:
        """The last frame of a message (chunk or streaming edit) containing ``containing``."""
        return self.wait_for(
            lambda f: f.get("t") == "message" and bool(f.get("final")) and containing in str(f.get("text"))
        )

    def card(self, kind: str) -> Frame:
        return self.wait_for(lambda f: f.get("t") == "prompt" and f.get("kind") == kind)

    def approval(self, command: str) -> Frame:
        """The exec-approval card for ``command``. Not just the first one: a question an
        earlier test left open for the same person is shown on this phone too."""
        return self.wait_for(
            lambda f: f.get("t") == "prompt" and f.get("kind") == "exec_approval" and f.get("command") == command
        )

    def answer(self, card: Frame, option_id: str) -> None:
        self.send({"t": "prompt", "prompt_id": card["id"], "option_id": option_id})


def is_reply_speech(frame: Frame) -> bool:
    """The start of a stream that speaks a reply on a gadget: it names its turn (herald's
    own short tones, which keep a waiting device from silence, come on streams of none)."""
    return frame.get("type") == "audio.start" and bool(frame.get("turn"))


def gadget_id(key: bytes) -> str:
    """A gadget's id is derived from its key."""
    return "hg-" + hashlib.sha256(key).hexdigest()[:16]


def auth_mac(key: bytes, device_id: str, nonce: str) -> str:
    """The handshake MAC of an enrolled gadget, over the nonce exactly as sent."""
    message = f"hermes-gadget/v1|{device_id}|{nonce}".encode()
    return base64.b64encode(hmac.digest(key, message, "sha256")).decode()


def phone_user(token: str) -> str:
    """The user id of a phone app token (without a label)."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]
