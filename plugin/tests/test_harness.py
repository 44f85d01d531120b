"""The harness itself works: a plugin platform loads into a real gateway and a message
goes through it to the stub model and back, streamed."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from harness import Gateway, HermesHome
from stub_model import Rule, StubServer

PROBE_PLUGIN = Path(__file__).parent / "probe_plugin"


class ProbeClient:
    """Talks to the probe platform's loopback socket (see probe_plugin)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buffer = b""
        self.calls: list[dict[str, Any]] = []

    def say(self, chat: str, user: str, text: str) -> None:
        line = json.dumps({"chat": chat, "user": user, "text": text}) + "\n"
        self.sock.sendall(line.encode())

    def until(self, call: str) -> list[dict[str, Any]]:
        """Every adapter call up to and including the next ``call``."""
        seen: list[dict[str, Any]] = []
        while True:
            while b"\n" not in self.buffer:
                data = self.sock.recv(65536)
                if not data:
                    raise AssertionError(f"probe closed before {call}; saw {seen}")
                self.buffer += data
            line, self.buffer = self.buffer.split(b"\n", 1)
            entry = json.loads(line)
            seen.append(entry)
            if entry["call"] == call:
                return seen

    def close(self) -> None:
        self.sock.close()


def start_probe(home: HermesHome) -> tuple[Gateway, ProbeClient]:
    home.install_plugin(PROBE_PLUGIN, "probe")
    gateway = Gateway(home)
    gateway.wait_ready()
    port_file = home.path / "probe.port"
    deadline = time.monotonic() + 10
    while not port_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return gateway, ProbeClient(int(port_file.read_text()))


def test_a_plugin_platform_carries_a_streamed_turn(home: HermesHome, model: StubServer) -> None:
    model.script.set_rules([Rule(match="weather", reply="It is sunny and warm today.")])
    home.update_config(lambda c: c.update(streaming={"enabled": True, "transport": "edit", "cursor": ""}))
    home.set_env(PROBE_ALLOW_ALL_USERS="1")
    gateway, probe = start_probe(home)
    try:
        probe.say("chat-1", "user-1", "how is the weather?")
        calls = probe.until("processing_complete")
    finally:
        probe.close()
        gateway.stop()

    kinds = [c["call"] for c in calls]
    assert kinds[0] == "processing_start"
    assert calls[-1]["outcome"] == "success"
    streamed = [c for c in calls if c["call"] == "send" and (c["metadata"] or {}).get("expect_edits")]
    assert streamed, f"no streaming send in {calls}"
    edits = [c for c in calls if c["call"] == "edit" and c["message_id"] == streamed[0]["message_id"]]
    final_text = edits[-1]["content"] if edits else streamed[0]["content"]
    assert final_text == "It is sunny and warm today."
    user_turns = [m for r in model.script.requests() for m in r["messages"] if m["role"] == "user"]
    assert any("how is the weather?" in str(m["content"]) for m in user_turns)


def test_an_unknown_user_gets_a_pairing_code_and_approval_lets_them_in(
    home: HermesHome, model: StubServer
) -> None:
    gateway, probe = start_probe(home)
    try:
        probe.say("chat-2", "stranger", "hello")
        first = probe.until("processing_complete")
        pairing = next(c["content"] for c in first if c["call"] == "send")
        code = pairing.split("pairing approve probe ", 1)[1][:8]
        home.hermes("pairing", "approve", "probe", code)
        probe.say("chat-2", "stranger", "hello again")
        calls = probe.until("processing_complete")
    finally:
        probe.close()
        gateway.stop()
    assert any(c["call"] == "send" and c["content"] == "stub: hello again" for c in calls)
