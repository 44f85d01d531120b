"""The Hermes platform adapter for Herald's gadgets and phones: a relay, nothing more.

Each Hermes adapter call becomes one bridge request (DESIGN.md has the table), each
``inbound`` event from herald becomes a ``MessageEvent`` or a prompt answer handed to
Hermes's own resolver, and herald's questions about access are answered from Hermes's
allowlists and pairing store. The same class serves both platforms; the instance knows
its platform name, the bridge (one herald child) is shared.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import weakref
from typing import Any, Literal, Optional

from gateway.config import Platform, PlatformConfig
from gateway.platforms.base import (
    BasePlatformAdapter,
    MessageEvent,
    MessageType,
    ProcessingOutcome,
    SendResult,
)

from . import compat
from .bridge import BridgeError, ChildSpec, HeraldBridge, child_env, shared_bridge, spawn
from .locations import data_dir, herald_argv
from .pairing import Pairing
from .prompts import Prompts
from .settings import flag
from .speech import SpeechOwner
from .wire import Answer, Body, Chat, FileArgs, InboundArgs, Profile, Question, SendTextArgs

logger = logging.getLogger(__name__)

# Follow-ups held while a finished turn lets go of its chat (see _hand_over): at most
# this many per chat (more go to Hermes at once), for at most this long.
MAX_HELD = 64
MAX_HOLD_S = 60.0
# Hermes echoes what speech-to-text heard as an ordinary message of this shape.
TRANSCRIPT_ECHO = ('🎙️ "', '"')
MEDIA_TYPES = {
    "image": MessageType.PHOTO,
    "video": MessageType.VIDEO,
    "audio": MessageType.AUDIO,
    "document": MessageType.DOCUMENT,
}
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
        self.bridge: HeraldBridge = shared_bridge(data_dir(), self._child_spec)
        self._typing: set[str] = set()
        # Each running turn's id, as herald's answer to turn_started brings it.
        self._turns: dict[tuple[str, str], str] = {}
        self._names: dict[str, str] = {}
        # Chats whose agent run is over while Hermes may still hold their session;
        # written from the agent's thread by the run hooks (set operations are atomic).
        self._runs_over: set[str] = set()
        # Messages held until Hermes lets go of their chat's finished turn, in order,
        # and what wakes their release when the chat's state changes.
        self._held: dict[str, list[MessageEvent]] = {}
        self._held_wake: dict[str, asyncio.Event] = {}
        self._spawned: set[asyncio.Task[Any]] = set()
        # Gadgets with a speaker, as their profiles last said.
        self._speakers: set[str] = set()
        # The chat of each session key Hermes has run a turn under.
        self._session_chats: dict[str, str] = {}
        self.speech = SpeechOwner(self.bridge.request, self._synthesize)
        self.prompts = Prompts(self)
        self.pairing = Pairing(self, self._claim_home)

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

    def _child_spec(self) -> ChildSpec:
        argv = herald_argv("serve", "--backend", "bridge")
        return ChildSpec(argv=argv, env=child_env(), cwd=data_dir().parent)

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
        self._run_going(chat_id)
        self._session_chats[compat.session_key(self, event.source)] = chat_id
        self.speech.turn_started(chat_id, self._speech_road(event))
        # Hermes starts the agent only when this returns: the turn is named here and
        # herald told in one line that nobody answers, ahead of the turn's replies.
        turn_id = secrets.token_hex(6)
        self._turns[(chat_id, event.message_id or "")] = turn_id
        await self.bridge.notify({"op": "turn_started", "args": {"chat": self.chat(chat_id), "turn_id": turn_id}})

    async def on_processing_complete(self, event: MessageEvent, outcome: ProcessingOutcome) -> None:
        chat_id = event.source.chat_id
        # Over for certain now, whatever the hooks saw; turn_ended below tells the device.
        self._runs_over.add(chat_id)
        await self._end_turn(chat_id, outcome.value, event.message_id or "")
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
        return chat_id in self._speakers

    async def begin_streaming_tts(
        self, chat_id: str, audio_format: Any, metadata: Optional[dict[str, Any]] = None
    ) -> Any:
        if chat_id not in self._speakers:
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
        if chat_id not in self._speakers or not compat.speaks_reply(self.gateway_runner, self, event):
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
        return {"name": self._names.get(chat_id, chat_id), "type": "dm", "chat_id": chat_id}

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

    def _spawn(self, coro: Any) -> None:
        spawn(self._spawned, coro)

    # -- inbound: device -> Hermes -------------------------------------------------

    async def on_inbound(self, args: InboundArgs) -> None:
        source = args["source"]
        chat_id = source["chat"]["id"]
        user_name = source.get("user_name")
        body = args["body"]
        if body["kind"] == "prompt_answer":
            self.prompts.answered(body)
            return
        if body["kind"] == "speech_stopped":
            self.speech.stopped(body["speech_id"])
            return
        if user_name:
            self._names[chat_id] = user_name
        message_id = args["message_id"]
        event = self._event(chat_id, body)
        if event is None:
            logger.warning("herald sent an inbound body Hermes has no message for: %r", body)
            return
        event.source = self.build_source(
            chat_id=chat_id,
            chat_type="dm",
            user_id=source["user_id"],
            user_name=user_name or None,
            message_id=message_id,
        )
        event.message_id = message_id
        profile = args.get("profile")
        if self.platform_name == "gadget" and profile is not None:
            self._describe_device(event, profile)
        self._claim_home(chat_id)
        await self._hand_over(event)

    def _describe_device(self, event: MessageEvent, profile: Profile) -> None:
        """Tell the model which device it talks to, and speak on one with a speaker.

        herald sends a gadget's profile with each of its messages (as it is then), so
        describing it costs no round trip.
        """
        chat_id = event.source.chat_id
        if not profile["paired"]:
            return
        event.channel_prompt = device_prompt(chat_id, self._names.get(chat_id, chat_id), profile)
        if not profile["speaker_rate"]:
            self._speakers.discard(chat_id)
            return
        self._speakers.add(chat_id)
        if flag(self.config.extra, "speak_replies", True):
            # Every reply is spoken (Hermes's ``/voice tts``) unless the chat chose
            # otherwise. Only in memory: Hermes persists the mode when someone uses
            # ``/voice``, and ``/voice off`` in the chat wins from then on.
            compat.speak_by_default(self.gateway_runner, self, event.source)

    def _claim_home(self, chat_id: str) -> None:
        """``auto_home``: the first device that may talk becomes the platform's home
        channel, as if it had sent ``/sethome``, so cron and ``hermes send`` reach it."""
        if not flag(self.config.extra, "auto_home", True):
            return
        variable = f"{self.platform_name.upper()}_HOME_CHANNEL"
        platforms = compat.platform_configs(self.gateway_runner)
        if os.getenv(variable) or platforms is None:
            return
        from gateway.config import HomeChannel
        from hermes_cli.config import save_env_value

        save_env_value(variable, chat_id)
        platform_config: PlatformConfig = platforms.setdefault(self.platform, self.config)
        platform_config.home_channel = HomeChannel(
            platform=self.platform, chat_id=chat_id, name=self._names.get(chat_id, chat_id)
        )
        logger.info("%s is now the %s home channel (auto_home)", chat_id, self.platform_name)

    async def _end_turn(self, chat_id: str, outcome: str, message_id: Optional[str] = None) -> None:
        """End the chat's turn (the one of ``message_id``, else whichever it has) once:
        its speech says the last of it, and the device hears how it ended."""
        if message_id is None:
            key = next((k for k in self._turns if k[0] == chat_id), None)
        else:
            key = (chat_id, message_id)
        turn_id = self._turns.pop(key, None) if key is not None else None
        if turn_id is None:
            return
        if outcome == "failure":
            # herald plays its cue and shows its notice; a gadget whose turns are spoken
            # hears the failure said too, synthesized as turn_ended leaves (which it
            # does before the speech can begin: before this task's first await).
            self.speech.turn_failed(self.chat(chat_id))
        else:
            await self.speech.turn_over(chat_id)
        await self.bridge.notify(
            {"op": "turn_ended", "args": {"chat": self.chat(chat_id), "turn_id": turn_id, "outcome": outcome}}
        )

    def model_gave_up(self, chat_id: str) -> None:
        """Hermes ran out of tries at the model (a hook, on the agent's thread): the
        turn ends as failed now, so the device says so instead of waiting in silence;
        Hermes's own error text still arrives as a reply."""
        loop = self.bridge.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: self._spawn(self._end_turn(chat_id, "failure")))

    def run_hook(self, chat_id: str, over: bool) -> None:
        """The chat's main agent run began or returned (a run hook, on the agent's
        thread): Hermes may start another run in the same turn for a message it queued,
        and then follow-ups must meet that run as busy input again."""
        if over:
            self._runs_over.add(chat_id)
            return
        # Set operations are atomic, and done here they keep the hooks' order.
        self._runs_over.discard(chat_id)
        loop = self.bridge.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake_held, chat_id)

    def _run_going(self, chat_id: str) -> None:
        """The chat has a run in progress: held follow-ups may go to Hermes now."""
        self._runs_over.discard(chat_id)
        self._wake_held(chat_id)

    def _wake_held(self, chat_id: str) -> None:
        wake = self._held_wake.get(chat_id)
        if wake is not None:
            wake.set()

    async def _hand_over(self, event: MessageEvent) -> None:
        """Give Hermes a device's message, unless its chat's turn is only finishing.

        The device sees the final reply (and then ``turn.end``) before Hermes lets go of
        the session: Hermes still saves the turn and runs ``on_processing_complete``. A
        message arriving then takes Hermes's busy path, which interrupts the agent
        whose run is already over; the stale interrupt aborts the next run, and the
        message is answered late, twice, or not at all (DESIGN.md, "Follow-ups"). Such
        a message, and those after it, wait here until the turn has let go (or a new run
        of the chat began) and then go to Hermes in order, as if sent just then.
        """
        chat_id = event.source.chat_id
        held = self._held.get(chat_id)
        if held is not None and len(held) < MAX_HELD:
            held.append(event)
            return
        if held is not None:
            logger.warning("%s sent over %d messages while its turn ended; passing them on", chat_id, MAX_HELD)
        elif chat_id in self._runs_over and self._owner_task(event) is not None:
            logger.debug("holding a message from %s until its finished turn lets go", chat_id)
            self._held[chat_id] = [event]
            self._spawn(self._release_held(event))
            return
        await self.handle_message(event)

    def _owner_task(self, event: MessageEvent) -> Optional[asyncio.Task[Any]]:
        """The live task through which Hermes holds the event's session, if any."""
        return compat.session_task(self, compat.session_key(self, event.source))

    async def _release_held(self, first: MessageEvent) -> None:
        chat_id = first.source.chat_id
        wake = self._held_wake[chat_id] = asyncio.Event()
        deadline = asyncio.get_running_loop().time() + MAX_HOLD_S
        try:
            # A run Hermes starts for a message it queued clears the mark (the run
            # hooks, on_processing_start): these messages then meet a running agent,
            # as Hermes means them to.
            while chat_id in self._runs_over:
                task = self._owner_task(first)
                left = deadline - asyncio.get_running_loop().time()
                if task is None:
                    break
                if left <= 0:
                    logger.warning("Hermes still holds %s %.0f s after its turn ended; passing its messages on", chat_id, MAX_HOLD_S)
                    break
                wake.clear()
                woken = asyncio.ensure_future(wake.wait())
                try:
                    await asyncio.wait({task, woken}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    woken.cancel()
        finally:
            del self._held_wake[chat_id]
            # Messages that come in meanwhile join the list, so order holds.
            held = self._held[chat_id]
            while held:
                try:
                    await self.handle_message(held.pop(0))
                except Exception:
                    logger.exception("handing a held message from %s to Hermes failed", chat_id)
            del self._held[chat_id]

    def _event(self, chat_id: str, body: Body) -> Optional[MessageEvent]:
        if body["kind"] == "text":
            return MessageEvent(text=body["text"], reply_to_message_id=body.get("reply_to") or None)
        if body["kind"] == "voice":
            transcript = body.get("transcript")
            if transcript:
                # The client already ran speech-to-text; Hermes need not do it again.
                return MessageEvent(text=transcript)
            return MessageEvent(
                text="",
                message_type=MessageType.VOICE,
                media_urls=[body["path"]],
                media_types=["audio/wav"],
            )
        if body["kind"] == "media":
            return MessageEvent(
                text=body.get("caption") or "",
                message_type=MEDIA_TYPES.get(body["media_kind"], MessageType.DOCUMENT),
                media_urls=[body["path"]],
                media_types=[body.get("mime") or "application/octet-stream"],
            )
        if body["kind"] == "command":
            command = body["command"]
            if command == "new":
                self.prompts.new_conversation_asked(chat_id)
            if command in ("stop", "new"):
                return MessageEvent(text=f"/{command}", message_type=MessageType.COMMAND)
        return None

    # -- herald's questions: who may talk to the agent (pairing.py) ------------------

    async def answer(self, question: Question) -> Answer:
        return await self.pairing.answer(question)


def device_prompt(chat_id: str, name: str, profile: Profile) -> str:
    """What the model should know about a gadget, the same words every turn (so prompt
    caching holds) for as long as the device says the same about itself."""
    screen = profile["screen"]
    parts = [f'You are talking through the gadget "{name}" (id {chat_id}).']
    if screen and screen["width"] and screen["height"]:
        size = f"{screen['width']}x{screen['height']} pixels"
        if screen["text_cols"] and screen["text_rows"]:
            size += f", {screen['text_cols']} columns by {screen['text_rows']} rows of text"
        parts.append(f"Its screen is {size}.")
    else:
        parts.append("It has no screen.")
    if profile["charset"] == "ascii":
        parts.append("The screen shows ASCII only: other characters are transliterated or left out.")
    if profile["speaker_rate"]:
        parts.append("It has a speaker: write replies that read well aloud.")
    else:
        parts.append("It has no speaker: replies are only shown.")
    actions = [a for a in profile["actions"] if a["name"]]
    if actions:
        parts.append(f'Its actions, run with the gadget_action tool (device "{chat_id}"):')
        for action in actions:
            line = f"- {action['name']}: {action['description'] or 'no description'}"
            if action["params"]:
                line += f" (args: {json.dumps(action['params'], sort_keys=True)})"
            parts.append(line)
    return "\n".join(parts)


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


def live_adapter(platform: str) -> Optional["HeraldAdapter"]:
    """The connected adapter of a platform in this process, if any."""
    for adapter in list(_live_adapters):
        if adapter.platform_name == platform:
            return adapter
    return None


def _session_adapter() -> tuple[Optional["HeraldAdapter"], str]:
    """The live adapter and chat of the agent run on this thread, if it is ours."""
    chat_id = compat.session_env("HERMES_SESSION_CHAT_ID")
    adapter = live_adapter(compat.session_env("HERMES_SESSION_PLATFORM")) if chat_id else None
    return adapter, chat_id


def note_run_started(task_id: str = "", session_id: str = "", **_: Any) -> None:
    """The ``pre_llm_call`` hook, fired as an agent run begins (see ``_hand_over``)."""
    _note_run(task_id, session_id, over=False)


def note_run_over(task_id: str = "", session_id: str = "", **_: Any) -> None:
    """The ``on_session_end`` hook, fired as an agent run returns (see ``_hand_over``)."""
    _note_run(task_id, session_id, over=True)


def _note_run(task_id: str, session_id: str, over: bool) -> None:
    adapter, chat_id = _session_adapter()
    if adapter is None or not is_main_run(adapter, task_id, session_id):
        return
    adapter.run_hook(chat_id, over)


def note_model_error(
    task_id: str = "",
    session_id: str = "",
    retry_count: Optional[int] = None,
    max_retries: Optional[int] = None,
    retryable: Optional[bool] = None,
    **_: Any,
) -> None:
    """The ``api_request_error`` hook, fired for each failed model call: the last try
    (or one not worth retrying) fails the chat's turn. 0.22 then keeps retrying in
    recovery cycles for minutes; the device has heard the failure by then."""
    adapter, chat_id = _session_adapter()
    if adapter is None or not is_main_run(adapter, task_id, session_id):
        return
    # retry_count counts the tries before this one.
    last_try = retry_count is not None and max_retries is not None and retry_count + 1 >= max_retries
    if retryable is False or last_try:
        adapter.model_gave_up(chat_id)


def is_main_run(adapter: "HeraldAdapter", task_id: str, session_id: str) -> bool:
    """Whether the run hooks speak of the chat's own conversation.

    The same hooks fire for subagents and the background memory review (they carry
    the chat's session context too, and may end during the chat's next turn); their
    ``task_id`` is their own, while the gateway runs a chat's turn with the session id
    as its task id. A ``/background`` task is its own session: it is not the agent
    Hermes keeps running for the chat.
    """
    if not task_id or task_id != session_id:
        return False
    running = compat.running_agent_session(adapter.gateway_runner, compat.session_env("HERMES_SESSION_KEY"))
    return running is None or running == session_id


def settle_approval(session_key: str = "", **_: Any) -> None:
    """The ``post_approval_response`` hook: withdraw cards of settled approvals."""
    for adapter in list(_live_adapters):
        adapter.prompts.approval_settled(session_key)
