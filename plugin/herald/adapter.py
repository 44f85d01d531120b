"""The Hermes platform adapter for Herald's gadgets and phones: the surface Hermes calls.

Each Hermes adapter call becomes one bridge request (DESIGN.md has the table). What keeps
state of its own lives beside it: ``inbound.py`` (a device's messages, handed to Hermes
through ``followups.py``, which holds them while a finished turn lets go),
``prompts.py`` (approval, confirmation and clarify cards and their answers),
``pairing.py`` (herald's questions about who may talk), ``turns.py`` and ``speech.py``
(a turn's end and its spoken reply); ``hooks.py`` brings Hermes's run hooks to them.
The same class serves both platforms; the instance knows its platform name, the bridge
(one herald child) is shared.
"""

from __future__ import annotations

import logging
import secrets
import weakref
from typing import Any, Literal, Optional

from gateway.config import Platform, PlatformConfig
from gateway.platforms.base import BasePlatformAdapter, MessageEvent, ProcessingOutcome, SendResult

from . import compat
from .bridge import BridgeError, ChildSpec, HeraldBridge, child_env, shared_bridge
from .followups import FollowUps
from .inbound import Inbound
from .locations import data_dir, herald_argv
from .pairing import Pairing
from .prompts import Prompts
from .speech import SpeechOwner
from .turns import Turns
from .wire import Answer, Chat, FileArgs, InboundArgs, Question, SendTextArgs

logger = logging.getLogger(__name__)

# Hermes echoes what speech-to-text heard as an ordinary message of this shape.
TRANSCRIPT_ECHO = ('🎙️ "', '"')
# SendResult.error_kind for each bridge error kind (Hermes's SEND_ERROR_KINDS).
SEND_ERROR_KINDS = {
    "offline": "forbidden",
    "unknown_chat": "not_found",
    "unknown_message": "not_found",
    "unavailable": "transient",
    "timeout": "transient",
}

_live_adapters: "weakref.WeakSet[HeraldAdapter]" = weakref.WeakSet()


class HeraldAdapter(BasePlatformAdapter):
    supports_status_text = True
    # The last streaming edit always comes with finalize=True, so a device knows the
    # reply is complete even when the text did not change.
    REQUIRES_EDIT_FINALIZE = True

    def __init__(self, config: PlatformConfig, platform_name: str) -> None:
        super().__init__(config, Platform(platform_name))
        self.platform_name = platform_name
        self.bridge: HeraldBridge = shared_bridge(data_dir(), herald_child)
        self._typing: set[str] = set()
        # The chat of each session key Hermes has run a turn under.
        self._session_chats: dict[str, str] = {}
        self.speech = SpeechOwner(self.bridge.request, self._synthesize)
        self.turns = Turns(self.bridge, self.speech, self.chat)
        self.prompts = Prompts(self)
        self.follow_ups = FollowUps(self)
        self.inbound = Inbound(self, self.follow_ups)
        self.pairing = Pairing(self, self.inbound.claim_home)

    # -- lifecycle ----------------------------------------------------------------

    async def connect(self, *, is_reconnect: bool = False) -> bool:
        if not await self.bridge.attach(self.platform_name, self):
            failure = self.bridge.failure
            # A start-up failure (busy port, bad settings, no binary) needs the owner;
            # retrying would only repeat it.
            self._set_fatal_error(
                "herald_failed" if failure else "herald_unavailable",
                failure or "herald did not start",
                retryable=failure is None,
            )
            return False
        version = compat.hermes_version()
        missing = compat.missing_features(self.gateway_runner, self)
        support = compat.describe_support(version, missing)
        if support:
            # Said at connect, once per platform, so an update that broke something is
            # found here rather than by a device that stays silent.
            (logger.info if compat.is_tested(version) else logger.error)("%s: %s", self.platform_name, support)
        if any(feature.essential for feature in missing):
            await self.bridge.detach(self.platform_name)
            self._set_fatal_error("hermes_incompatible", support or "Hermes is incompatible", retryable=False)
            return False
        compat.ask_before_voice_replies(self.gateway_runner)
        _live_adapters.add(self)
        self.pairing.watch()
        self._mark_connected()
        return True

    async def disconnect(self) -> None:
        _live_adapters.discard(self)
        self.pairing.stop_watching()
        await self.bridge.detach(self.platform_name)
        self._mark_disconnected()

    # -- outbound: Hermes -> device ---------------------------------------------

    def chat(self, chat_id: str) -> Chat:
        return {"platform": self.platform_name, "id": str(chat_id)}

    async def send(
        self,
        chat_id: str,
        content: str,
        reply_to: Optional[str] = None,
        metadata: Optional[dict[str, Any]] = None,
    ) -> SendResult:
        transcript = echoed_transcript(content)
        if transcript is not None:
            # Hermes's echo of what speech-to-text heard: a gadget shows it apart from
            # the reply; herald decides per platform.
            try:
                await self.bridge.request({"op": "transcript", "args": {"chat": self.chat(chat_id), "text": transcript}})
            except BridgeError as err:
                return failed(err)
            return SendResult(success=True)
        streaming = bool((metadata or {}).get("expect_edits"))
        args: SendTextArgs = {"chat": self.chat(chat_id), "text": content, "streaming": streaming, "interim": False}
        if reply_to is not None:
            args["reply_to"] = reply_to
        try:
            result = await self.bridge.request({"op": "send_text", "args": args})
        except BridgeError as err:
            return failed(err)
        message_id = result.get("message_id", "")
        if streaming:
            self.speech.reply_text(self.chat(chat_id), message_id, content, final=False)
        return SendResult(success=True, message_id=message_id)

    async def edit_message(
        self, chat_id: str, message_id: str, content: str, *, finalize: bool = False
    ) -> SendResult:
        try:
            await self.bridge.request(
                {
                    "op": "edit_text",
                    "args": {"chat": self.chat(chat_id), "message_id": message_id, "text": content, "finalize": finalize},
                }
            )
        except BridgeError as err:
            return failed(err)
        self.speech.reply_text(self.chat(chat_id), message_id, content, final=finalize)
        return SendResult(success=True, message_id=message_id)

    async def send_typing(self, chat_id: str, metadata: Any = None) -> None:
        # Hermes refreshes typing every 2 s; the device needs to hear it once.
        if chat_id in self._typing:
            return
        self._typing.add(chat_id)
        await self.bridge.notify({"op": "typing", "args": {"chat": self.chat(chat_id), "on": True}})

    async def stop_typing(self, chat_id: str) -> None:
        if chat_id not in self._typing:
            return
        self._typing.discard(chat_id)
        await self.bridge.notify({"op": "typing", "args": {"chat": self.chat(chat_id), "on": False}})

    def set_status_text(self, chat_id: str, text: Optional[str]) -> None:
        # Called from the agent's worker thread: hop onto the bridge's loop.
        super().set_status_text(chat_id, text)
        self.bridge.notify_soon({"op": "status", "args": {"chat": self.chat(chat_id), "text": text or ""}})

    async def on_processing_start(self, event: MessageEvent) -> None:
        chat_id = event.source.chat_id
        self.follow_ups.run_going(chat_id)
        self._session_chats[compat.session_key(self, event.source)] = chat_id
        self.speech.turn_started(chat_id, self._speech_road(event))
        await self.turns.start(chat_id, event.message_id or "")

    async def on_processing_complete(self, event: MessageEvent, outcome: ProcessingOutcome) -> None:
        chat_id = event.source.chat_id
        # Over for certain now, whatever the hooks saw; the turn's end tells the device.
        self.follow_ups.run_ended(chat_id)
        await self.turns.end(chat_id, outcome.value, event.message_id or "")
        await self.prompts.turn_over(chat_id)

    # -- questions: shown as cards, answered on the device (prompts.py) --------------

    async def send_exec_approval(
        self,
        chat_id: str,
        command: str,
        session_key: str,
        description: Optional[str] = "dangerous command",
        metadata: Optional[dict[str, Any]] = None,
        allow_permanent: bool = True,
        allow_session: bool = True,
        smart_denied: bool = False,
        **_later: Any,
    ) -> SendResult:
        """Hermes 0.19 and 0.20 call this (0.20 adds ``allow_session``); 0.22 calls it too
        once ``supports_exec_approval_buttons`` says so, with room for more keywords."""
        try:
            await self.prompts.exec_approval(
                chat_id, command, session_key, description or "", allow_permanent, allow_session, smart_denied
            )
        except BridgeError as err:
            return failed(err)
        # The card is not a message: Hermes 0.22 edits the message it is given when the
        # approval times out, and herald withdraws the card itself.
        return SendResult(success=True)

    async def _send_exec_approval_prompt(self, prompt: Any) -> SendResult:
        """Hermes 0.22's exec approval hook: the prompt's actions say what is offered."""
        choices = set(getattr(prompt, "choices", ()) or ())
        return await self.send_exec_approval(
            chat_id=str(prompt.chat_id),
            command=str(prompt.command),
            session_key=str(prompt.session_key),
            description=str(getattr(prompt, "description", "") or ""),
            metadata=getattr(prompt, "metadata", None),
            allow_permanent="always" in choices,
            allow_session="session" in choices,
        )

    @classmethod
    def supports_exec_approval_buttons(cls) -> bool:
        """Hermes 0.22 asks before sending an approval: devices answer with buttons."""
        return True

    async def send_clarify(
        self,
        chat_id: str,
        question: str,
        choices: Optional[list[str]],
        clarify_id: str,
        session_key: str,
        metadata: Optional[dict[str, Any]] = None,
    ) -> SendResult:
        options = [str(c) for c in choices or []]
        try:
            prompt_id = await self.prompts.clarify(chat_id, question, options, clarify_id, session_key)
            return SendResult(success=True, message_id=prompt_id)
        except BridgeError as err:
            if err.kind != "unsupported":
                return failed(err)
        # A question without choices on a gadget: asked in words, the reply resolves it.
        return await super().send_clarify(chat_id, question, choices, clarify_id, session_key, metadata)

    async def send_slash_confirm(
        self,
        chat_id: str,
        title: str,
        message: str,
        session_key: str,
        confirm_id: str,
        metadata: Optional[dict[str, Any]] = None,
    ) -> SendResult:
        try:
            prompt_id = await self.prompts.confirm(chat_id, title, message, session_key, confirm_id)
        except BridgeError as err:
            return failed(err)
        return SendResult(success=True, message_id=prompt_id)

    # -- speech and files ---------------------------------------------------------

    async def send_voice(
        self,
        chat_id: str,
        audio_path: str,
        caption: Optional[str] = None,
        reply_to: Optional[str] = None,
        metadata: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> SendResult:
        # Hermes is not asked for whole-file speech of a turn said here
        # (_streaming_tts_turn_completed): a voice file that comes is meant to be heard,
        # after the reply being said if there is one (herald has read it once taken).
        joined = self.speech.join(chat_id, str(audio_path))
        if joined is not None and await joined:
            result = SendResult(success=True)
        else:
            result = await self._send_file("send_voice", chat_id, audio_path)
        if result.success and caption:
            return await self.send(chat_id, caption, reply_to=reply_to, metadata=metadata)
        return result

    async def play_tts(self, chat_id: str, audio_path: str, **kwargs: Any) -> SendResult:
        """Hermes's automatic speech of a reply, as one file: not again when it was said.
        (0.19 synthesizes it for a voice message's unstreamed reply without asking.)"""
        if self.speech.speaks(chat_id):
            return SendResult(success=True)
        return await self.send_voice(chat_id, audio_path, **kwargs)

    def _streaming_tts_turn_completed(
        self, session_key: Optional[str], turn_marker: Any = None, *, event: Any = None
    ) -> bool:
        """Whether Hermes should skip its whole-file speech of this turn's reply: Hermes
        asks this (0.20 and later; on 0.19 ``compat.ask_before_voice_replies`` makes it
        ask) before it synthesizes one, so a turn said here is not synthesized again."""
        chat_id = event.source.chat_id if event is not None else self._session_chats.get(session_key or "")
        if chat_id is not None and self.speech.speaks(chat_id):
            return True
        done = getattr(super(), "_streaming_tts_turn_completed", None)
        return bool(done(session_key, turn_marker, event=event)) if callable(done) else False

    # -- streaming speech (Hermes 0.20 and later drive these; speech.py owns them) --------

    def supports_streaming_tts(self, chat_id: str, audio_format: Any) -> bool:
        return self.inbound.has_speaker(chat_id)

    async def begin_streaming_tts(
        self, chat_id: str, audio_format: Any, metadata: Optional[dict[str, Any]] = None
    ) -> Any:
        if not self.inbound.has_speaker(chat_id):
            return None
        handle = compat.streaming_handle(chat_id, audio_format)
        return handle if await self.speech.begin(self.chat(chat_id), audio_format, handle) else None

    async def write_streaming_tts(self, handle: Any, chunk: bytes) -> None:
        await self.speech.write(self.chat(handle.chat_id), handle, chunk)

    async def finish_streaming_tts(self, handle: Any, *, interrupted: bool = False) -> None:
        await self.speech.finish(self.chat(handle.chat_id), handle, abort=interrupted)

    async def abort_streaming_tts(self, handle: Any, error: Optional[str] = None) -> None:
        await self.speech.finish(self.chat(handle.chat_id), handle, abort=True)

    def _speech_road(self, event: MessageEvent) -> Optional[str]:
        """How this turn's reply reaches the gadget's speaker, if it does (speech.py)."""
        chat_id = event.source.chat_id
        if not self.inbound.has_speaker(chat_id) or not compat.speaks_reply(self.gateway_runner, self, event):
            return None
        return "hooks" if compat.hermes_streams_speech(self, event) else "sentences"

    def _synthesize(self, text: str) -> Optional[str]:
        words = self.prepare_tts_text(text)
        if not words:
            return None
        # A file of its own, as Hermes's runner names its own (``.mp3``, which Hermes
        # aligns with a command provider's format): 0.19 names one by the second it was
        # made in, so gadgets speaking at once would overwrite and remove each other's.
        folder = data_dir() / "speech"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return compat.synthesize_speech(words, str(folder / f"{secrets.token_hex(8)}.mp3"))

    async def send_image_file(
        self,
        chat_id: str,
        image_path: str,
        caption: Optional[str] = None,
        reply_to: Optional[str] = None,
        metadata: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> SendResult:
        return await self._send_file("send_image", chat_id, image_path, caption=caption)

    async def send_document(
        self,
        chat_id: str,
        file_path: str,
        caption: Optional[str] = None,
        file_name: Optional[str] = None,
        reply_to: Optional[str] = None,
        metadata: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> SendResult:
        return await self._send_file("send_document", chat_id, file_path, caption=caption)

    async def get_chat_info(self, chat_id: str) -> dict[str, Any]:
        return {"name": self.inbound.name_of(chat_id), "type": "dm", "chat_id": chat_id}

    async def _send_file(
        self,
        op: Literal["send_voice", "send_image", "send_document"],
        chat_id: str,
        path: str,
        caption: Optional[str] = None,
    ) -> SendResult:
        args: FileArgs = {"chat": self.chat(chat_id), "path": str(path)}
        if caption is not None:
            args["caption"] = caption
        try:
            await self.bridge.request({"op": op, "args": args})
        except BridgeError as err:
            return failed(err)
        return SendResult(success=True)

    # -- herald's side (bridge.Endpoint) -------------------------------------------

    async def on_inbound(self, args: InboundArgs) -> None:
        """herald's ``inbound`` event: an answer to a card, speech the device stopped, a
        turn herald gave up, or a device's message for Hermes."""
        body = args["body"]
        if body["kind"] == "prompt_answer":
            self.prompts.answered(body)
        elif body["kind"] == "speech_stopped":
            self.speech.stopped(body["speech_id"])
        elif body["kind"] == "turn_timed_out":
            self.turns.timed_out(args["source"]["chat"]["id"], body["turn_id"])
        else:
            if body["kind"] == "command" and body["command"] == "new":
                # The device's own gesture is the confirmation Hermes asks for "/new".
                self.prompts.new_conversation_asked(args["source"]["chat"]["id"])
            await self.inbound.message(args)

    async def answer(self, question: Question) -> Answer:
        return await self.pairing.answer(question)


def herald_child() -> ChildSpec:
    """How the shared bridge starts herald."""
    argv = herald_argv("serve", "--backend", "bridge")
    return ChildSpec(argv=argv, env=child_env(), cwd=data_dir().parent)


def echoed_transcript(content: str) -> str | None:
    """The transcript in Hermes's echo of a voice message, or None for other text."""
    opening, closing = TRANSCRIPT_ECHO
    if len(content) > len(opening) and content.startswith(opening) and content.endswith(closing):
        return content[len(opening) : -len(closing)]
    return None


def failed(err: BridgeError) -> SendResult:
    return SendResult(
        success=False,
        error=err.message or err.kind,
        retryable=err.kind in ("unavailable", "timeout"),
        error_kind=SEND_ERROR_KINDS.get(err.kind, "unknown"),
    )


def live_adapters() -> list[HeraldAdapter]:
    """The connected adapters in this process."""
    return list(_live_adapters)


def live_adapter(platform: str) -> Optional[HeraldAdapter]:
    """The connected adapter of a platform in this process, if any."""
    return next((adapter for adapter in live_adapters() if adapter.platform_name == platform), None)
