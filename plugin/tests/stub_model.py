"""A local OpenAI-compatible chat-completions server with scripted replies.

Hermes is pointed at it (``model.provider: custom``) so the tests run a real gateway
without a network or a real model. The script is a list of rules matched against the
newest user message; a rule either answers with text (streamed in several chunks when
the request asks for a stream) or calls a tool, and then answers the tool's result with
a follow-up text. Every request is recorded so a test can check what Hermes sent.

Run on its own: ``python stub_model.py PORT`` (serves until killed).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

MODEL_ID = "stub-model"


@dataclass(frozen=True)
class Rule:
    """Answer a user message that contains ``match``.

    With ``tool`` set the model calls that tool with ``arguments``; once the tool's
    result comes back it answers ``reply`` with ``{result}`` replaced by that result.
    """

    match: str
    reply: str
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    # A streamed reply: seconds between its word-sized pieces (a token rate), and an event
    # its last sentence waits for (at most HOLD_S), so a test can see what came before it.
    piece_delay_s: float = 0.0
    hold_last_sentence: threading.Event | None = None
    # An HTTP status other than 200: the provider failing (500) on every try.
    status: int = 200
    # Seconds before the answer's first byte: a stalled provider.
    delay_s: float = 0.0


class Script:
    """The rules in force plus every request seen; shared by the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._requests: list[dict[str, Any]] = []
        # When each request came and its answer's first text went (time.monotonic()).
        self._times: list[dict[str, float]] = []

    def set_rules(self, rules: list[Rule]) -> None:
        with self._lock:
            self._rules = list(rules)

    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._requests)

    def record(self, body: dict[str, Any]) -> int:
        """Keep a request; its index, for :meth:`mark`."""
        with self._lock:
            self._requests.append(body)
            self._times.append({"received": time.monotonic()})
            return len(self._requests) - 1

    def mark(self, index: int, moment: str) -> None:
        with self._lock:
            self._times[index].setdefault(moment, time.monotonic())

    def times(self) -> list[dict[str, float]]:
        """For each request, when it came (``received``) and when the first text of its
        answer left (``first_text``), as the benchmark reads them."""
        with self._lock:
            return [dict(t) for t in self._times]

    def find(self, text: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.match in text:
                    return rule
        return None

    def by_tool(self, name: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.tool == name:
                    return rule
        return None


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


# The longest a held last sentence waits.
HOLD_S = 60.0


@dataclass(frozen=True)
class Answer:
    text: str = ""
    tool_call: tuple[str, dict[str, Any]] | None = None
    piece_delay_s: float = 0.0
    hold_last_sentence: threading.Event | None = None
    status: int = 200
    delay_s: float = 0.0


def decide(script: Script, messages: list[dict[str, Any]]) -> Answer:
    """What the model says next, given the conversation so far."""
    if not messages:
        return Answer(text="stub: empty conversation")
    last = messages[-1]
    user_text = ""
    for message in reversed(messages):
        if message.get("role") == "user":
            user_text = message_text(message)
            break
    if last.get("role") == "tool":
        # Answer the tool result with the follow-up of the rule that called it: the one the
        # newest user message matches, else the first rule for that tool.
        name = tool_name_for(messages, str(last.get("tool_call_id", "")))
        rule = script.find(user_text)
        if rule is None or rule.tool != name:
            rule = script.by_tool(name) if name else None
        result = message_text(last)
        if rule is None:
            return Answer(text=f"stub: tool {name} said {result}")
        return Answer(text=rule.reply.replace("{result}", result))
    rule = script.find(user_text)
    if rule is None:
        # Hermes appends system notes to some user messages; echo only the user's line.
        first_line = user_text.strip().splitlines()[0] if user_text.strip() else ""
        return Answer(text=f"stub: {first_line}")
    if rule.status != 200:
        return Answer(status=rule.status, delay_s=rule.delay_s)
    if rule.tool is not None:
        return Answer(tool_call=(rule.tool, rule.arguments), delay_s=rule.delay_s)
    return Answer(
        text=rule.reply,
        piece_delay_s=rule.piece_delay_s,
        hold_last_sentence=rule.hold_last_sentence,
        delay_s=rule.delay_s,
    )


def tool_name_for(messages: list[dict[str, Any]], call_id: str) -> str | None:
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") == call_id:
                function = call.get("function") or {}
                name = function.get("name")
                return name if isinstance(name, str) else None
    return None


def last_sentence_start(text: str) -> int:
    """Where the last sentence of ``text`` begins (0 for one sentence)."""
    ends = [m.end() for m in re.finditer(r"[.!?]\s+", text.rstrip())]
    return ends[-1] if ends else 0


def text_pieces(text: str) -> Iterator[str]:
    """Split a reply into word-sized pieces, so a stream has several deltas."""
    return iter(re.findall(r"\S+\s*|\s+", text) or [""])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "StubServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        return

    def do_GET(self) -> None:
        if self.path == "/_stub/requests":
            self.send_json({"requests": self.server.script.requests()})
        elif self.path.rstrip("/").endswith("/models"):
            self.send_json({"object": "list", "data": [model_entry()]})
        elif self.path.rstrip("/").endswith(f"/models/{MODEL_ID}"):
            self.send_json(model_entry())
        else:
            self.send_json({"error": {"message": "not found"}}, status=404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self.send_json({"error": {"message": "bad json"}}, status=400)
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_json({"error": {"message": "not found"}}, status=404)
            return
        index = self.server.script.record(body)
        answer = decide(self.server.script, list(body.get("messages") or []))
        if answer.delay_s:
            time.sleep(answer.delay_s)
        if answer.status != 200:
            # Streamed or not: Hermes retries a failed stream without streaming.
            self.send_json({"error": {"message": "stub failure", "type": "server_error"}}, status=answer.status)
        elif body.get("stream"):
            self.stream(answer, index)
        else:
            self.server.script.mark(index, "first_text")
            self.send_json(completion(answer))

    def send_json(self, payload: dict[str, Any], status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, answer: Answer, index: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in stream_chunks(answer):
            self.write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            if any(c.get("delta", {}).get("content") for c in chunk["choices"]):
                self.server.script.mark(index, "first_text")
        self.write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def model_entry() -> dict[str, Any]:
    return {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "stub"}


def completion(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    finish = "stop"
    if answer.tool_call is not None:
        name, arguments = answer.tool_call
        message["tool_calls"] = [tool_call_entry(name, arguments)]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def tool_call_entry(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def stream_chunks(answer: Answer) -> Iterator[dict[str, Any]]:
    chunk_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": MODEL_ID,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if answer.tool_call is not None:
        name, arguments = answer.tool_call
        call = tool_call_entry(name, arguments)
        call["index"] = 0
        yield chunk({"tool_calls": [call]})
        yield chunk({}, "tool_calls")
    else:
        last_sentence = last_sentence_start(answer.text)
        sent = 0
        for piece in text_pieces(answer.text):
            if answer.hold_last_sentence is not None and sent == last_sentence:
                answer.hold_last_sentence.wait(HOLD_S)
            if answer.piece_delay_s:
                time.sleep(answer.piece_delay_s)
            yield chunk({"content": piece})
            sent += len(piece)
        yield chunk({}, "stop")
    final = chunk({})
    final["choices"] = []
    final["usage"] = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    yield final


class StubServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Hermes closes idle keep-alive connections; that is not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def __init__(self, port: int = 0, script: Script | None = None) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.script = script or Script()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="stub-model", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


if __name__ == "__main__":
    server = StubServer(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(server.base_url, flush=True)
    server.serve_forever()
