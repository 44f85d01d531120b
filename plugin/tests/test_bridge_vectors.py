"""The plugin's side of vectors/bridge-v1.json (no gateway needed): it reads every line
herald writes there, refuses the ones it cannot use, and writes every line the plugin
writes byte for byte. crates/agents/src/bridge/wire/tests.rs checks herald against the
same file."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest

from herald.bridge import REQUEST_TIMEOUT_S
from herald.wire import (
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    Answer,
    Chat,
    ErrorKind,
    LineTooLong,
    Notification,
    PluginLine,
    Request,
    Unanswerable,
    answer_line,
    conforms,
    decode_line,
    encode_line,
    error_line,
    event_line,
    request_line,
)

pytestmark = pytest.mark.any_line

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "vectors" / "bridge-v1.json").read_text())


def cases(section: str) -> list[Any]:
    found: list[Any] = VECTORS[section]
    assert found, section
    return found


def test_limits_and_error_kinds_match() -> None:
    assert VECTORS["protocol"] == PROTOCOL_VERSION
    assert VECTORS["limits"]["max_line_bytes"] == MAX_LINE_BYTES
    assert VECTORS["limits"]["plugin_request_timeout_s"] == REQUEST_TIMEOUT_S
    assert list(typing.get_args(ErrorKind)) == VECTORS["error_kinds"]


@pytest.mark.parametrize("case", cases("from_herald"), ids=lambda case: case["name"])
def test_the_plugin_reads_what_herald_writes(case: Any) -> None:
    decoded = decode_line(case["line"].encode())
    assert not isinstance(decoded, Unanswerable) and decoded is not None
    assert decoded == json.loads(case["line"])


@pytest.mark.parametrize("case", cases("to_herald"), ids=lambda case: case["name"])
def test_the_plugin_writes_the_lines_herald_reads(case: Any) -> None:
    message = json.loads(case["line"])
    line: PluginLine
    if message["type"] == "request":
        request = {"op": message["op"], "args": message["args"]}
        assert conforms(request, Request), "the plugin's types allow it"
        line = request_line(message["id"], typing.cast(Request, request))
    elif message["type"] == "event":
        news = {"op": message["op"], "args": message["args"]}
        assert conforms(news, Notification), "the plugin's types allow it"
        assert not conforms(news, Request), "news is never a request"
        line = event_line(typing.cast(Notification, news))
    elif message["ok"]:
        assert conforms(message["result"], Answer), "the plugin's types allow it"
        line = answer_line(message["id"], message["result"])
    else:
        line = error_line(message["id"], message["error"]["kind"], message["error"]["message"])
    assert encode_line(line) == case["line"].encode() + b"\n"


@pytest.mark.parametrize("case", cases("plugin_refuses"), ids=lambda case: case["name"])
def test_the_plugin_refuses_what_it_cannot_use(case: Any) -> None:
    decoded = decode_line(case["line"].encode())
    if case["answer"] is None:
        assert decoded is None
    else:
        assert isinstance(decoded, Unanswerable), decoded
        assert {"id": decoded.id, "kind": "bad_request"} == case["answer"]


def test_a_line_of_the_longest_length_is_written_and_no_longer() -> None:
    chat: Chat = {"platform": "gadget", "id": "hg-1"}

    def notice(text: str) -> bytes:
        return encode_line(request_line(1, {"op": "notice", "args": {"chat": chat, "text": text}}))

    longest = "x" * (MAX_LINE_BYTES - len(notice("")) + 1)
    assert len(notice(longest)) == MAX_LINE_BYTES + 1, "the newline is not counted"
    with pytest.raises(LineTooLong):
        notice(longest + "x")
