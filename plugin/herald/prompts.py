"""The questions Hermes asks a device's user, shown as cards, and their answers.

Hermes blocks on three kinds: an exec approval (once / session / always / deny), a slash
command's confirmation (once / always / cancel) and a clarify question (one choice,
several, or the user's own words). Each becomes an ``ask`` request; herald shows a card
and sends the user's choice back as a ``prompt_answer`` inbound body, which goes to
Hermes's own resolver for that kind. A card whose question Hermes settled some other way
(a typed ``/approve``, the turn's end, the next clarify) is withdrawn.

Requests that fail raise :class:`BridgeError`; the adapter says so to Hermes.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from . import compat
from .bridge import spawn
from .wire import AskArgs, Prompt, PromptAnswerBody

if TYPE_CHECKING:
    from .adapter import HeraldAdapter

CONFIRM_TTL_S = 300
MAX_EARLY_ANSWERS = 32
EXEC_CHOICES = frozenset({"once", "session", "always", "deny"})
CONFIRM_CHOICES = frozenset({"once", "always", "cancel"})
# A note after a choice's words, as Hermes marks its first choice "(Recommended)".
CHOICE_NOTE = re.compile(r"\s*\([^)]*\)\s*$")
# What a clarify's answer is when every choice was turned down on a gadget.
NONE_OF_THESE = "None of these"


@dataclass
class PendingPrompt:
    """A question shown on a device, and how to hand its answer back to Hermes."""

    kind: str
    chat_id: str
    session_key: str
    hermes_id: str = ""
    choices: list[str] = field(default_factory=list)
    multi_select: bool = False
    # herald drops an unanswered card after its ttl without telling Hermes.
    ttl_s: Optional[int] = None
    asked: float = field(default_factory=time.monotonic)


class Prompts:
    """The cards of one platform's chats that wait for an answer."""

    def __init__(self, adapter: HeraldAdapter) -> None:
        self._adapter = adapter
        self._bridge = adapter.bridge
        self._pending: dict[str, PendingPrompt] = {}
        # Answers that overtook herald's reply to their own question (see _ask).
        self._early_answers: dict[str, PromptAnswerBody] = {}
        # Chats whose device asked for a new conversation: that was the "/new" confirmation.
        self._new_asked: set[str] = set()
        self._spawned: set[asyncio.Task[Any]] = set()

    async def exec_approval(
        self,
        chat_id: str,
        command: str,
        session_key: str,
        description: str,
        allow_permanent: bool,
        allow_session: bool,
        smart_denied: bool,
    ) -> None:
        prompt: Prompt = {
            "kind": "exec_approval",
            "command": command,
            "description": description,
            # herald's card leaves out what is not allowed and refuses it if sent anyway;
            # a smart-denied command may run once at most, as Hermes's own buttons say.
            "allow_permanent": allow_permanent and not smart_denied,
            "allow_session": allow_session and not smart_denied,
        }
        await self._ask(chat_id, prompt, None, PendingPrompt("exec_approval", chat_id, session_key))

    async def clarify(
        self, chat_id: str, question: str, choices: list[str], clarify_id: str, session_key: str
    ) -> str:
        """The card's id; ``unsupported`` when the device cannot show this question."""
        multi_select = bool(choices) and compat.clarify_multi_select(session_key, clarify_id)
        # Hermes asks one question at a time: one still shown for the chat was answered
        # some other way (typed, or the question before it lapsed).
        for prompt_id, earlier in list(self._pending.items()):
            if earlier.kind == "clarify" and earlier.chat_id == chat_id:
                await self._withdraw(prompt_id)
        prompt: Prompt = {"kind": "clarify", "question": question, "choices": choices, "multi_select": multi_select}
        pending = PendingPrompt("clarify", chat_id, session_key, clarify_id, choices, multi_select)
        return await self._ask(chat_id, prompt, compat.clarify_timeout(), pending)

    async def confirm(self, chat_id: str, title: str, message: str, session_key: str, confirm_id: str) -> Optional[str]:
        """The card's id, or None when the device's own gesture already answered."""
        if title == "/new" and chat_id in self._new_asked:
            self._new_asked.discard(chat_id)
            self._spawn(self._resolve_confirm(chat_id, session_key, confirm_id, "once"))
            return None
        prompt: Prompt = {"kind": "confirm", "title": title, "text": message}
        return await self._ask(chat_id, prompt, CONFIRM_TTL_S, PendingPrompt("confirm", chat_id, session_key, confirm_id))

    def new_conversation_asked(self, chat_id: str) -> None:
        """The device's "new conversation" gesture: Hermes's "/new" confirmation is answered."""
        self._new_asked.add(chat_id)

    def answered(self, body: PromptAnswerBody) -> None:
        """A device's answer to a card; resolving it may wait on Hermes, so it runs apart."""
        self._spawn(self._hand_answer(body))

    async def turn_over(self, chat_id: str) -> None:
        """Approvals and clarifications block the agent; once its turn is over they are moot."""
        for prompt_id, prompt in list(self._pending.items()):
            if prompt.chat_id == chat_id and prompt.kind in ("exec_approval", "clarify"):
                await self._withdraw(prompt_id)

    def approval_settled(self, session_key: str) -> None:
        """Hermes finished an approval some other way (typed /approve, timeout).

        Called from the agent's thread by the ``post_approval_response`` hook. Once the
        session has no approval left waiting, its cards are stale.
        """
        loop = self._bridge.loop
        if loop is None or compat.approval_waiting(session_key):
            return
        for prompt_id, prompt in list(self._pending.items()):
            if prompt.kind == "exec_approval" and prompt.session_key == session_key:
                loop.call_soon_threadsafe(self._spawn, self._withdraw(prompt_id))

    async def _ask(self, chat_id: str, prompt: Prompt, ttl_s: Optional[int], pending: PendingPrompt) -> str:
        args: AskArgs = {"chat": self._adapter.chat(chat_id), "prompt": prompt}
        if ttl_s is not None:
            args["ttl_s"] = ttl_s
        result = await self._bridge.request({"op": "ask", "args": args})
        prompt_id = result.get("prompt_id", "")
        # Cards herald has dropped unanswered (a turn's end withdraws the others).
        now = time.monotonic()
        for stale in [i for i, p in self._pending.items() if p.ttl_s is not None and now - p.asked > p.ttl_s]:
            del self._pending[stale]
        pending.ttl_s = ttl_s
        self._pending[prompt_id] = pending
        # A quick answer can be read from herald before this coroutine resumes.
        early = self._early_answers.pop(prompt_id, None)
        if early is not None:
            self._spawn(self._hand_answer(early))
        return prompt_id

    async def _withdraw(self, prompt_id: str) -> None:
        prompt = self._pending.pop(prompt_id, None)
        if prompt is not None:
            await self._bridge.request_quietly(
                {"op": "withdraw", "args": {"chat": self._adapter.chat(prompt.chat_id), "prompt_id": prompt_id}}
            )

    async def _hand_answer(self, body: PromptAnswerBody) -> None:
        prompt_id = body["prompt_id"]
        prompt = self._pending.pop(prompt_id, None)
        if prompt is None:
            # Either the question is over, or its answer overtook herald's reply to the
            # question itself; keep a few for the latter.
            while len(self._early_answers) >= MAX_EARLY_ANSWERS:
                self._early_answers.pop(next(iter(self._early_answers)))
            self._early_answers[prompt_id] = body
            return
        choice = body["choice"]
        if prompt.kind == "exec_approval":
            compat.resolve_approval(prompt.session_key, choice if choice in EXEC_CHOICES else "deny")
            self._adapter.resume_typing_for_chat(prompt.chat_id)
        elif prompt.kind == "clarify":
            compat.resolve_clarify(prompt.hermes_id, clarify_text(prompt, body))
        elif prompt.kind == "confirm":
            wire = choice if choice in CONFIRM_CHOICES else "cancel"
            await self._resolve_confirm(prompt.chat_id, prompt.session_key, prompt.hermes_id, wire)

    async def _resolve_confirm(self, chat_id: str, session_key: str, confirm_id: str, choice: str) -> None:
        reply = await compat.resolve_confirm(session_key, confirm_id, choice)
        if reply:
            await self._adapter.send(chat_id, reply)

    def _spawn(self, coro: Any) -> None:
        spawn(self._spawned, coro)


def clarify_text(prompt: PendingPrompt, body: PromptAnswerBody) -> str:
    """The answer Hermes's clarify resolver expects: the chosen option (a JSON list of
    them for a multi-select question) or the user's words.

    A question whose every choice the user turned down is answered in words, so the
    model hears it; an empty answer would mean that nobody answered."""
    choice = body["choice"]
    if choice == "option":
        index = body.get("index")
        if index is not None and 0 <= index < len(prompt.choices):
            one = prompt.choices[index]
            return json.dumps([one]) if prompt.multi_select else one
    if choice == "options":
        picked = [prompt.choices[i] for i in body.get("indices", []) if 0 <= i < len(prompt.choices)]
        return json.dumps(picked) if picked else NONE_OF_THESE
    if choice == "other":
        text = body.get("text", "")
        return typed_selection(prompt, text) if prompt.multi_select else text
    if choice == "cancel":
        return NONE_OF_THESE
    return ""


def typed_selection(prompt: PendingPrompt, text: str) -> str:
    """A multi-select answer typed as "red, blue": the JSON list of those choices when
    each names one (a note such as Hermes's "(Recommended)" need not be typed), else the
    words as they are."""
    by_name = {CHOICE_NOTE.sub("", choice).casefold(): choice for choice in prompt.choices}
    named = [part.strip().casefold() for part in text.split(",") if part.strip()]
    if named and all(part in by_name for part in named):
        return json.dumps([by_name[part] for part in named])
    return text
