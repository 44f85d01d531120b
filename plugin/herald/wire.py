"""The bridge's line protocol as types; ``crates/agents/src/bridge/wire.rs`` is herald's side.

Every line the plugin writes is built from these ``TypedDict`` classes, so mypy checks
it; every line herald writes is checked against them by :func:`decode_line` before
anything reads it, so the code that reads it may trust its types.
``vectors/bridge-v1.json`` pins both sides to the same lines
(``tests/test_bridge_vectors.py`` here).

No ``from __future__ import annotations`` here: :func:`conforms` reads these annotations
at run time, and Python 3.11 counts a ``NotRequired`` key of a string annotation as
required.
"""

import functools
import json
import types
import typing
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict, Union

PROTOCOL_VERSION = 1
# The longest line either side writes or reads, without its newline.
MAX_LINE_BYTES = 1 << 20

Json = dict[str, Any]

# Every error kind either side sends: the port's error variants, then the bridge's own.
ErrorKind = Literal[
    "offline",
    "unknown_chat",
    "unsupported",
    "unknown_message",
    "failed",
    "unknown_action",
    "timeout",
    "disconnected",
    "device",
    "bad_request",
    "unavailable",
    "denied",
]
ERROR_KINDS: frozenset[str] = frozenset(typing.get_args(ErrorKind))


def error_kind(kind: str) -> ErrorKind:
    """A kind herald sent, or ``failed`` for one from a newer herald."""
    return typing.cast(ErrorKind, kind) if kind in ERROR_KINDS else "failed"


class Chat(TypedDict):
    platform: str
    id: str


class WireError(TypedDict):
    # A str, not an ErrorKind: a newer herald may send kinds this plugin does not know.
    kind: str
    message: str


# -- what the plugin asks herald (a request's op and args) -------------------------


class ChatArgs(TypedDict):
    chat: Chat


class SendTextArgs(ChatArgs):
    text: str
    reply_to: NotRequired[str]
    streaming: bool
    interim: bool


class EditTextArgs(ChatArgs):
    message_id: str
    text: str
    finalize: bool


class TypingArgs(ChatArgs):
    on: bool


class TextArgs(ChatArgs):
    text: str


class TurnStartedArgs(ChatArgs):
    turn_id: str


class TurnEndedArgs(ChatArgs):
    turn_id: str
    outcome: str


class ExecApprovalPrompt(TypedDict):
    kind: Literal["exec_approval"]
    command: str
    description: str
    allow_permanent: bool
    allow_session: bool


class ConfirmPrompt(TypedDict):
    kind: Literal["confirm"]
    title: str
    text: str


class ClarifyPrompt(TypedDict):
    kind: Literal["clarify"]
    question: str
    choices: list[str]
    multi_select: bool


Prompt = Union[ExecApprovalPrompt, ConfirmPrompt, ClarifyPrompt]


class AskArgs(ChatArgs):
    prompt: Prompt
    ttl_s: NotRequired[int]


class WithdrawArgs(ChatArgs):
    prompt_id: str


class FileArgs(ChatArgs):
    path: str
    caption: NotRequired[str]


class SpeechArgs(ChatArgs):
    speech_id: str


class SpeechBeginArgs(SpeechArgs):
    sample_rate: int
    channels: int


class SpeechWriteArgs(SpeechArgs):
    pcm: str


class SpeechFileArgs(SpeechArgs):
    path: str


class Card(TypedDict):
    title: str
    body: str
    ttl_s: NotRequired[int]


class DisplayArgs(ChatArgs):
    card: Card


class InvokeActionArgs(ChatArgs):
    name: str
    args: Json


class SetAuthorizedArgs(TypedDict):
    platform: str
    user_id: str
    authorized: bool


class DevicesArgs(TypedDict):
    platform: str


class SendText(TypedDict):
    op: Literal["send_text"]
    args: SendTextArgs


class EditText(TypedDict):
    op: Literal["edit_text"]
    args: EditTextArgs


class Text(TypedDict):
    op: Literal["notice", "transcript"]
    args: TextArgs


class ChatOnly(TypedDict):
    op: Literal["actions", "profile"]
    args: ChatArgs


class Ask(TypedDict):
    op: Literal["ask"]
    args: AskArgs


class Withdraw(TypedDict):
    op: Literal["withdraw"]
    args: WithdrawArgs


class SendFile(TypedDict):
    op: Literal["send_voice", "send_image", "send_document"]
    args: FileArgs


class SpeechBegin(TypedDict):
    op: Literal["speech_begin"]
    args: SpeechBeginArgs


class SpeechWrite(TypedDict):
    op: Literal["speech_write"]
    args: SpeechWriteArgs


class SpeechFile(TypedDict):
    op: Literal["speech_file"]
    args: SpeechFileArgs


class SpeechStop(TypedDict):
    op: Literal["speech_end", "speech_abort"]
    args: SpeechArgs


class Display(TypedDict):
    op: Literal["display"]
    args: DisplayArgs


class InvokeAction(TypedDict):
    op: Literal["invoke_action"]
    args: InvokeActionArgs


class SetAuthorized(TypedDict):
    op: Literal["set_authorized"]
    args: SetAuthorizedArgs


class Devices(TypedDict):
    op: Literal["devices"]
    args: DevicesArgs


Request = Union[
    SendText,
    EditText,
    Text,
    ChatOnly,
    Ask,
    Withdraw,
    SendFile,
    SpeechBegin,
    SpeechWrite,
    SpeechFile,
    SpeechStop,
    Display,
    InvokeAction,
    SetAuthorized,
    Devices,
]


# -- what the plugin tells herald, with no answer (an event line) -----------------------


class TurnStarted(TypedDict):
    op: Literal["turn_started"]
    args: TurnStartedArgs


class TurnEnded(TypedDict):
    op: Literal["turn_ended"]
    args: TurnEndedArgs


class Typing(TypedDict):
    op: Literal["typing"]
    args: TypingArgs


class Status(TypedDict):
    op: Literal["status"]
    args: TextArgs


Notification = Union[TurnStarted, TurnEnded, Typing, Status]


# -- what herald answers them with --------------------------------------------------


class ActionSpec(TypedDict):
    name: str
    description: str
    params: Any


class Screen(TypedDict):
    width: int | None
    height: int | None
    text_cols: int | None
    text_rows: int | None


class Profile(TypedDict):
    paired: bool
    screen: Screen | None
    charset: str
    speaker_rate: int | None
    actions: list[ActionSpec]


class Device(TypedDict):
    """An entry of ``devices``; a connected gadget's profile is spread into it."""

    platform: str
    id: str
    name: str | None
    online: bool
    paired: NotRequired[bool]
    screen: NotRequired[Screen | None]
    charset: NotRequired[str]
    speaker_rate: NotRequired[int | None]
    actions: NotRequired[list[ActionSpec]]


class Result(TypedDict, total=False):
    """A request's result: the port's untagged ``Response``, so at most one of these
    (none for a plain success)."""

    message_id: str
    prompt_id: str
    result: Any
    actions: list[ActionSpec]
    profile: Profile
    dropped: bool
    devices: list[Device]


# -- what herald sends the plugin ----------------------------------------------------


class ReadyArgs(TypedDict):
    protocol: int
    version: str
    gadget_url: str
    mobile_url: str
    admin_url: str


class Source(TypedDict):
    chat: Chat
    user_id: str
    user_name: NotRequired[str]


class TextBody(TypedDict):
    kind: Literal["text"]
    text: str
    reply_to: NotRequired[str]


class VoiceBody(TypedDict):
    kind: Literal["voice"]
    path: str
    duration_ms: int
    transcript: NotRequired[str]


class MediaBody(TypedDict):
    kind: Literal["media"]
    path: str
    media_kind: str
    mime: NotRequired[str]
    caption: NotRequired[str]


class CommandBody(TypedDict):
    kind: Literal["command"]
    command: str


class PromptAnswerBody(TypedDict):
    """``choice`` in Hermes's words; ``index`` with ``option``, ``indices`` with
    ``options``, ``text`` with ``other``."""

    kind: Literal["prompt_answer"]
    prompt_id: str
    choice: str
    index: NotRequired[int]
    indices: NotRequired[list[int]]
    text: NotRequired[str]


class SpeechStoppedBody(TypedDict):
    kind: Literal["speech_stopped"]
    speech_id: str
    reason: str


class TurnTimedOutBody(TypedDict):
    """herald gave the turn up: the agent was silent on it for the turn timeout."""

    kind: Literal["turn_timed_out"]
    turn_id: str


Body = Union[TextBody, VoiceBody, MediaBody, CommandBody, PromptAnswerBody, SpeechStoppedBody, TurnTimedOutBody]


class InboundArgs(TypedDict):
    source: Source
    message_id: str
    body: Body
    # A gadget's profile as it was when the message arrived.
    profile: NotRequired[Profile]


class ReadyEvent(TypedDict):
    type: Literal["event"]
    op: Literal["ready"]
    args: ReadyArgs


class InboundEvent(TypedDict):
    type: Literal["event"]
    op: Literal["inbound"]
    args: InboundArgs


class UserArgs(TypedDict):
    platform: str
    user_id: str


class PairingCodeArgs(UserArgs):
    user_name: NotRequired[str]


class PlatformArgs(TypedDict):
    platform: str


class ApprovePairingArgs(PlatformArgs):
    code: str


class UserQuestion(TypedDict):
    type: Literal["request"]
    id: int
    op: Literal["is_authorized", "revoke_pairing"]
    args: UserArgs


class PairingCodeQuestion(TypedDict):
    type: Literal["request"]
    id: int
    op: Literal["pairing_code"]
    args: PairingCodeArgs


class PairingsQuestion(TypedDict):
    type: Literal["request"]
    id: int
    op: Literal["pairings"]
    args: PlatformArgs


class ApprovePairingQuestion(TypedDict):
    type: Literal["request"]
    id: int
    op: Literal["approve_pairing"]
    args: ApprovePairingArgs


Question = Union[UserQuestion, PairingCodeQuestion, PairingsQuestion, ApprovePairingQuestion]


class Response(TypedDict):
    type: Literal["response"]
    id: int
    ok: bool
    result: NotRequired[Result]
    error: NotRequired[WireError]


HeraldLine = Union[ReadyEvent, InboundEvent, Question, Response]


class Unanswerable(NamedTuple):
    """A request from herald that is not one this plugin knows: it is answered
    ``bad_request`` by its id, so herald need not wait for its timeout."""

    id: int
    reason: str


# -- the plugin's answers to herald's questions --------------------------------------


class HermesUser(TypedDict):
    """A user in Hermes's pairing store (``approved_at`` in seconds), as Hermes lists it."""

    user_id: str
    user_name: NotRequired[str]
    approved_at: NotRequired[float]


class Authorized(TypedDict):
    authorized: bool


class IssuedCode(TypedDict):
    code: str
    command: str
    ttl_s: int


class Pairings(TypedDict):
    approved: list[HermesUser]


class ApprovedPairing(TypedDict):
    approved: HermesUser | None


class RevokedPairing(TypedDict):
    revoked: bool


Answer = Union[Authorized, IssuedCode, Pairings, ApprovedPairing, RevokedPairing]


class RequestLine(TypedDict):
    type: Literal["request"]
    id: int
    op: str
    args: Any


class AnswerLine(TypedDict):
    type: Literal["response"]
    id: int
    ok: Literal[True]
    result: Answer


class ErrorLine(TypedDict):
    type: Literal["response"]
    id: int
    ok: Literal[False]
    error: WireError


class EventLine(TypedDict):
    type: Literal["event"]
    op: str
    args: Any


PluginLine = Union[RequestLine, AnswerLine, ErrorLine, EventLine]


def request_line(request_id: int, request: Request) -> RequestLine:
    return {"type": "request", "id": request_id, "op": request["op"], "args": request["args"]}


def event_line(notification: Notification) -> EventLine:
    return {"type": "event", "op": notification["op"], "args": notification["args"]}


def answer_line(request_id: int, answer: Answer) -> AnswerLine:
    return {"type": "response", "id": request_id, "ok": True, "result": answer}


def error_line(request_id: int, kind: ErrorKind, message: str) -> ErrorLine:
    return {"type": "response", "id": request_id, "ok": False, "error": {"kind": kind, "message": message}}


class LineTooLong(ValueError):
    """A line over :data:`MAX_LINE_BYTES`, which herald would drop."""


def encode_line(line: PluginLine) -> bytes:
    """The line as written: compact JSON (non-ASCII escaped) and its newline."""
    text = json.dumps(line, separators=(",", ":")).encode()
    if len(text) > MAX_LINE_BYTES:
        raise LineTooLong(f"a line over {MAX_LINE_BYTES} bytes cannot go to herald")
    return text + b"\n"


def decode_line(line: bytes) -> HeraldLine | Unanswerable | None:
    """A line from herald, checked against its type; a request this plugin cannot
    read, to refuse by its id; or None for anything else (the caller logs and drops it)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    for kind in typing.get_args(HeraldLine):
        if conforms(message, kind):
            return typing.cast(HeraldLine, message)
    request_id = message.get("id")
    if message.get("type") == "request" and type(request_id) is int:
        return Unanswerable(request_id, f"no request {message.get('op')!r} with these args")
    return None


def conforms(value: Any, hint: Any) -> bool:
    """Whether a decoded JSON value is of type ``hint``: one of this module's types, or the
    plain types, literals, unions, lists and dicts they are made of. Keys a type does not
    name are allowed (a newer herald may send more)."""
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if typing.is_typeddict(hint):
        if not isinstance(value, dict) or not hint.__required_keys__ <= value.keys():
            return False
        fields = _fields(hint)
        return all(conforms(value[key], fields[key]) for key in fields if key in value)
    origin = typing.get_origin(hint)
    if origin is Literal:
        return any(type(value) is type(option) and value == option for option in typing.get_args(hint))
    if origin in (Union, types.UnionType):
        return any(conforms(value, option) for option in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(conforms(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if hint is float:
        return type(value) in (int, float)
    # bool is an int to isinstance; JSON keeps them apart.
    return type(value) is hint


@functools.cache
def _fields(typed_dict: Any) -> dict[str, Any]:
    return typing.get_type_hints(typed_dict)
