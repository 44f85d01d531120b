"""A gadget's spoken replies, from the first sentence on: one owner for a turn's speech.

A reply reaches a gadget's speaker by one of two roads, and this module is the only
place that knows which one a turn took, what it already said and whether the device
stopped it:

- **Hermes's streaming hooks** (0.20 and later, a voice turn with a provider that
  streams PCM): Hermes calls ``begin``/``write``/``finish``/``abort``; each becomes a
  bridge request (``speech_begin``, ``speech_write`` with base64 PCM, ``speech_end``,
  ``speech_abort``).
- **Sentence by sentence** (every other spoken turn: 0.19, typed turns, providers with no
  chunked API): as the reply streams in as edits, its first clause (once long enough to
  say) and then each complete sentence is cleaned of
  markup, synthesized by Hermes's own text-to-speech (its provider and voice) on a
  worker thread and handed to herald as a file (``speech_file``), in order, into one
  stream that herald resamples and paces; the next sentence is synthesized while the
  previous one plays.

Either way herald plays one stream per turn; talking, cancel or a new conversation on
the device stop it, herald says ``speech_stopped``, and what is left is dropped: the
hooks' handle is marked aborted (Hermes stops synthesizing), the sentence road stops.
A turn spoken here (``speaks``) is not spoken again from Hermes's whole-file speech. A
turn that fails is said to have failed, in one short sentence, after herald's cue.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Optional, Protocol

from .bridge import BridgeError
from .wire import Chat, Request, Result, SpeechArgs

logger = logging.getLogger(__name__)

# A sentence ends at . ! ? … (and their full-width forms) before a space, or at a
# line break; a short one is joined to the next so the voice keeps its flow.
SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"')\]]*\s+|\n\s*\n|\n(?=\s*[-*•]\s)")
MIN_SENTENCE_CHARS = 20
# A turn's first words are said as soon as a clause of them is complete: at a comma,
# semicolon, colon or dash, once it holds a few words (a shorter one is not worth a
# pause), so the speaker starts before the first sentence has ended. One that ends the
# text so far counts at once (Hermes's previews carry no trailing space, so waiting for
# the next word would cost a token), unless a digit precedes it: "1," may go on "000".
CLAUSE_END = re.compile(r"(?<=[,;:，；：])\s+|\s+[—–]\s+|\s+-\s+|(?<=\D[,;:，；：])$|\s+[—–]$")
MIN_CLAUSE_WORDS = 4
# Hermes's streaming cursor, when one is configured, trails every preview.
CURSORS = "▉▌█▍▎▏"
# A speech_write waits while herald's buffer is full, which is real time at most.
WRITE_TIMEOUT_S = 60.0
# The longest a turn's end waits for its speech to begin (a first synthesis).
OPEN_WAIT_S = 15.0
# What a failed turn says: herald's own failure notice, in words.
FAILED_SENTENCE = "Sorry, that did not work."
# herald's failure cue (two falling notes, 150 + 220 ms) plays as the turn fails, and
# speech replaces whatever plays: the sentence waits for the cue to be heard.
FAILURE_CUE_S = 0.4

CODE_BLOCK = re.compile(r"```.*?(```|$)", re.S)
INLINE_CODE = re.compile(r"`([^`]*)`")
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
URL = re.compile(r"https?://\S+")
# Hermes's attachment directives: the file is sent on its own, its path is not words.
MEDIA_TAG = re.compile(r"MEDIA:\S+|\[\[audio_as_voice\]\]")


def speakable(text: str) -> str:
    """What is read aloud of some reply text: no code blocks, links read by their words,
    no bare addresses or emoji; Hermes's own ``prepare_tts_text`` does the rest."""
    text = CODE_BLOCK.sub(" ", text)
    text = MEDIA_TAG.sub(" ", text)
    text = INLINE_CODE.sub(r"\1", text)
    text = LINK.sub(r"\1", text)
    text = URL.sub(" ", text)
    text = "".join(c for c in text if not _is_pictograph(c))
    return re.sub(r"\s+", " ", text).strip()


def _is_pictograph(c: str) -> bool:
    # Emoji and other symbols (So), plus the joiners and selectors that glue them.
    return unicodedata.category(c) == "So" or c in "\u200d\ufe0f\ufe0e"


def split_sentences(text: str, final: bool, first_clause: bool = False) -> tuple[list[str], int]:
    """The complete sentences at the start of ``text`` and how much of it they use; with
    ``final`` the rest is a sentence too. Fences left open hold back what follows. With
    ``first_clause`` (nothing of the reply said yet) a first clause long enough to say
    comes out on its own when it ends before the first sentence does."""
    if not final and text.count("```") % 2:
        text = text[: text.rfind("```")]
    sentences: list[str] = []
    start = used = 0
    if first_clause:
        clause = first_clause_end(text)
        sentence = next((m.end() for m in SENTENCE_END.finditer(text) if m.end() >= MIN_SENTENCE_CHARS), None)
        if clause is not None and (sentence is None or clause < sentence):
            sentences.append(text[:clause].strip())
            start = used = clause
    for end in SENTENCE_END.finditer(text):
        if end.end() - start < MIN_SENTENCE_CHARS:
            continue
        sentences.append(text[start : end.end()].strip())
        start = used = end.end()
    if final and text[start:].strip():
        sentences.append(text[start:].strip())
        used = len(text)
    return [s for s in sentences if s], used


def first_clause_end(text: str) -> Optional[int]:
    """Where the first clause of ``text`` that is long enough to say ends, if one has."""
    for end in CLAUSE_END.finditer(text):
        if len(text[: end.start()].split()) >= MIN_CLAUSE_WORDS and end.end() >= MIN_SENTENCE_CHARS:
            return end.end()
    return None


@dataclass
class VoiceFile:
    """A voice file the agent sent while the turn's reply is being said: it joins the
    reply's stream after what is queued, and ``taken`` says whether herald took it."""

    path: str
    taken: "asyncio.Future[bool]"


@dataclass
class Speech:
    """One turn's speech on one gadget."""

    speech_id: str
    chat_id: str
    # "hooks" or "sentences"
    road: str
    begun: bool = False
    stopped: bool = False
    # Hermes's StreamingTTSHandle, on the hooks' road.
    handle: Any = None
    # The sentence road: what of the streamed message was queued, sentences to speak.
    message_id: str = ""
    taken: int = 0
    queue: "asyncio.Queue[Optional[str | VoiceFile]]" = field(default_factory=asyncio.Queue)
    worker: Optional["asyncio.Task[None]"] = None
    spoke: bool = False
    # The turn is over: nothing more joins the queue.
    over: bool = False
    # Set once the stream has begun at herald, or the worker gave up on it.
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    # The turn failed and says so (FAILED_SENTENCE); its speech waits until then
    # (the event loop's clock).
    failed: bool = False
    not_before: float = 0.0


class Requester(Protocol):
    """The bridge's ``request``."""

    def __call__(self, request: Request, timeout: float = ...) -> Awaitable[Result]: ...


class SpeechOwner:
    """The speech of each gadget chat's current turn, for one adapter."""

    def __init__(self, request: Requester, synthesize: Callable[[str], Optional[str]]) -> None:
        # synthesize(text) -> audio file path (blocking: it runs on a worker thread).
        self._request = request
        self._synthesize = synthesize
        # Each gadget chat's current (or last) turn's speech.
        self._turns: dict[str, Speech] = {}
        self._by_id: dict[str, Speech] = {}

    # -- a turn's road --------------------------------------------------------------

    def turn_started(self, chat_id: str, road: Optional[str]) -> None:
        """A turn begins; ``road`` is how it will be spoken (None: not spoken here)."""
        self._retire(chat_id)
        if road is not None:
            self._add(Speech(os.urandom(8).hex(), chat_id, road))

    async def turn_over(self, chat_id: str) -> None:
        """The turn ended: the sentence road says the last of it, then ends the stream.

        A stream whose first words are still being synthesized is waited for, so that
        it begins within the turn: herald then ends the turn once it has been heard. (A
        short reply is complete only with the turn's last edit, a moment before this.)"""
        speech = self._turns.get(chat_id)
        if speech is None or speech.road != "sentences":
            return
        speech.over = True
        speech.queue.put_nowait(None)
        if speech.worker is not None:
            try:
                await asyncio.wait_for(speech.opened.wait(), OPEN_WAIT_S)
            except asyncio.TimeoutError:
                logger.warning("speech for %s took over %.0f s to begin; ending its turn", chat_id, OPEN_WAIT_S)

    def speaks(self, chat_id: str) -> bool:
        """Whether this turn is said here: Hermes's hooks began, its reply streamed into
        the sentence road (which says all of it), or it failed and says so. Hermes's
        whole-file speech of the same reply would say it a second time."""
        speech = self._turns.get(chat_id)
        return speech is not None and (speech.begun or bool(speech.message_id) or speech.failed)

    def turn_failed(self, chat: Chat) -> None:
        """The turn failed: after herald's failure cue, the gadget hears it said, once,
        instead of the rest of the reply (if any) or Hermes's error text."""
        speech = self._turns.get(chat["id"])
        if speech is None or speech.failed or speech.stopped:
            return
        speech.failed = True
        if speech.handle is not None:
            speech.handle.aborted = True
        if speech.worker is not None:
            speech.worker.cancel()
        # A stream of its own: the reply's, if it began, was replaced by the cue.
        self._by_id.pop(speech.speech_id, None)
        speech.speech_id, speech.begun = os.urandom(8).hex(), False
        self._by_id[speech.speech_id] = speech
        speech.queue = asyncio.Queue()
        for sentence in (FAILED_SENTENCE, None):
            speech.queue.put_nowait(sentence)
        loop = asyncio.get_running_loop()
        speech.not_before = loop.time() + FAILURE_CUE_S
        speech.worker = loop.create_task(self._speak(chat, speech))

    def stopped(self, speech_id: str) -> None:
        """The device stopped the speech (talk, cancel, new conversation)."""
        speech = self._by_id.get(speech_id)
        if speech is None:
            return
        speech.stopped = True
        if speech.handle is not None:
            # Hermes checks this before each chunk it synthesizes.
            speech.handle.aborted = True
        if speech.worker is not None:
            speech.worker.cancel()

    def _add(self, speech: Speech) -> None:
        self._turns[speech.chat_id] = speech
        self._by_id[speech.speech_id] = speech

    def _retire(self, chat_id: str) -> None:
        speech = self._turns.pop(chat_id, None)
        if speech is not None:
            self._by_id.pop(speech.speech_id, None)

    # -- Hermes's streaming hooks -----------------------------------------------------

    async def begin(self, chat: Chat, audio_format: Any, handle: Any) -> bool:
        """``begin_streaming_tts``: a stream at Hermes's format, or False to decline."""
        chat_id = chat["id"]
        speech = self._turns.get(chat_id)
        if speech is not None and speech.failed:
            # The turn was said to have failed: a reply Hermes writes after that is shown.
            return False
        if speech is None or speech.road != "hooks":
            # Not a turn Hermes streams as far as the plugin knew at its start.
            speech = Speech(os.urandom(8).hex(), chat_id, "hooks")
            self._add(speech)
        try:
            await self._request(
                {
                    "op": "speech_begin",
                    "args": {
                        "chat": chat,
                        "speech_id": speech.speech_id,
                        "sample_rate": int(audio_format.sample_rate),
                        "channels": int(audio_format.channels),
                    },
                }
            )
        except BridgeError as err:
            logger.debug("speech_begin for %s failed: %s", chat_id, err)
            return False
        speech.begun = True
        speech.handle = handle
        handle.speech_id = speech.speech_id
        return True

    async def write(self, chat: Chat, handle: Any, pcm: bytes) -> None:
        speech = self._by_id.get(str(getattr(handle, "speech_id", "")))
        if speech is None or speech.stopped or not pcm:
            return
        chunk = base64.b64encode(pcm).decode()
        try:
            result = await self._request(
                {"op": "speech_write", "args": {"chat": chat, "speech_id": speech.speech_id, "pcm": chunk}},
                timeout=WRITE_TIMEOUT_S,
            )
        except BridgeError as err:
            logger.debug("speech_write for %s failed: %s", speech.chat_id, err)
            handle.aborted = True
            return
        if result.get("dropped"):
            self.stopped(speech.speech_id)

    async def finish(self, chat: Chat, handle: Any, abort: bool) -> None:
        speech = self._by_id.get(str(getattr(handle, "speech_id", "")))
        if speech is None:
            return
        if abort:
            handle.aborted = True
        if not speech.stopped:
            op: Literal["speech_abort", "speech_end"] = "speech_abort" if abort else "speech_end"
            try:
                await self._request({"op": op, "args": {"chat": chat, "speech_id": speech.speech_id}})
            except BridgeError as err:
                logger.debug("%s for %s failed: %s", op, speech.chat_id, err)

    # -- the sentence road ------------------------------------------------------------

    def reply_text(self, chat: Chat, message_id: str, text: str, final: bool) -> None:
        """A streamed reply as it stands: queue the sentences it completes."""
        speech = self._turns.get(chat["id"])
        if speech is None or speech.road != "sentences" or speech.stopped or speech.failed:
            return
        if message_id != speech.message_id:
            # A new message of the same turn (after a tool call): its own text.
            speech.message_id, speech.taken = message_id, 0
        text = text.rstrip(CURSORS + " ")
        first = not speech.spoke and speech.queue.empty() and speech.worker is None
        sentences, used = split_sentences(text[speech.taken :], final, first_clause=first)
        speech.taken += used
        for sentence in sentences:
            words = speakable(sentence)
            if words:
                speech.queue.put_nowait(words)
        if speech.worker is None and not speech.queue.empty():
            speech.worker = asyncio.ensure_future(self._speak(chat, speech))

    def join(self, chat_id: str, path: str) -> Optional["asyncio.Future[bool]"]:
        """A voice file the agent sent while the sentence road says the turn's reply: it
        plays after what the stream has still to say (as a stream of its own it would cut
        the reply off); None when no such stream is under way."""
        speech = self._turns.get(chat_id)
        if speech is None or speech.worker is None or speech.worker.done():
            return None
        if speech.stopped or speech.failed or speech.over:
            return None
        voice = VoiceFile(path, asyncio.get_running_loop().create_future())
        speech.queue.put_nowait(voice)
        return voice.taken

    async def _speak(self, chat: Chat, speech: Speech) -> None:
        """Synthesize and hand over the turn's sentences (and voice files that joined
        them) in order, then end the stream."""
        args: SpeechArgs = {"chat": chat, "speech_id": speech.speech_id}
        # A failed turn gives the speech a new queue and worker; this one keeps its own.
        queue = speech.queue
        piece: Optional[str | VoiceFile] = None
        try:
            while True:
                piece = await queue.get()
                if piece is None:
                    break
                path = piece.path if isinstance(piece, VoiceFile) else await asyncio.to_thread(self._synthesize, piece)
                if path is None:
                    continue
                try:
                    if not speech.begun:
                        # Synthesized meanwhile: a failed turn's sentence follows the cue.
                        await asyncio.sleep(speech.not_before - asyncio.get_running_loop().time())
                        # The rate is the file's own; herald resamples each file.
                        await self._request(
                            {"op": "speech_begin", "args": {**args, "sample_rate": 24000, "channels": 1}}
                        )
                        speech.begun = True
                        speech.opened.set()
                    result = await self._request(
                        {"op": "speech_file", "args": {**args, "path": path}}, timeout=WRITE_TIMEOUT_S
                    )
                finally:
                    # The agent's own file is not ours to remove.
                    if not isinstance(piece, VoiceFile):
                        _remove(path)
                if isinstance(piece, VoiceFile):
                    piece.taken.set_result(not result.get("dropped"))
                if result.get("dropped"):
                    return
                speech.spoke = True
            if speech.begun:
                await self._request({"op": "speech_end", "args": args})
        except BridgeError as err:
            logger.warning("speaking a reply on %s failed: %s", speech.chat_id, err)
        except asyncio.CancelledError:
            pass
        finally:
            speech.opened.set()
            # Voice files that did not join are played on their own (send_voice).
            while True:
                if isinstance(piece, VoiceFile) and not piece.taken.done():
                    piece.taken.set_result(False)
                if queue.empty():
                    break
                piece = queue.get_nowait()


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
