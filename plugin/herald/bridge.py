"""The one ``herald`` child process both platforms share, and the line protocol to it.

``herald serve --backend bridge`` does every bit of protocol work; this module only
keeps it running and carries JSON lines over its stdin/stdout (see DESIGN.md for the
format). Pipes of a child process are the channel because nothing else on the machine
can reach them: there is no port to find, no socket file to guard.

One :class:`HeraldBridge` exists per data directory. The first adapter that connects
starts the child, the last that disconnects stops it; in between a supervisor restarts
it with backoff whenever it exits. Lines from herald go three ways: responses resolve
the futures of our requests, requests (``is_authorized``, ``pairing_code``) and
``inbound`` events go to the adapter of the platform they name. ``wire.py`` holds the
lines as types.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from .wire import (
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    Answer,
    ErrorKind,
    HeraldLine,
    InboundArgs,
    LineTooLong,
    Notification,
    PluginLine,
    Question,
    ReadyArgs,
    Request,
    Result,
    Unanswerable,
    answer_line,
    decode_line,
    encode_line,
    error_kind,
    error_line,
    event_line,
    request_line,
)

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 30.0
RESTART_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
# A child that stayed up this long is healthy again: the next crash restarts quickly.
STABLE_UPTIME_S = 60.0
STOP_GRACE_S = 10.0
# Inbound events of one chat waiting for Hermes. The reader must never block (Hermes's
# answers to herald come through it), so beyond this many an event is dropped, and said so.
MAX_INBOUND_QUEUED = 256
KILL_GRACE_S = 5.0


class BridgeError(Exception):
    """A request failed; ``kind`` is one of the protocol's error kinds."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Endpoint(Protocol):
    """What a platform adapter answers for herald."""

    async def on_inbound(self, args: InboundArgs) -> None: ...

    async def answer(self, question: Question) -> Answer: ...


@dataclass(frozen=True)
class ChildSpec:
    """How to start herald: the command line and its environment."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path


class HeraldBridge:
    """Supervises one herald child and multiplexes both platforms over its pipes."""

    def __init__(self, spec: Callable[[], ChildSpec]) -> None:
        self._spec = spec
        self._endpoints: dict[str, Endpoint] = {}
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Result]] = {}
        self._process: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stopping = False
        self._drain_lock = asyncio.Lock()
        # Each chat's inbound events, in herald's order, with a task delivering them
        # while there are any: one chat waiting on Hermes (a voice message it
        # transcribes while busy) holds up no other.
        self._inbound: dict[tuple[str, str], asyncio.Queue[InboundArgs]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.info: ReadyArgs | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        # Why herald cannot start (it exited before `ready`), with the fix; set once.
        self.failure: str | None = None
        self._settled = asyncio.Event()
        # herald's last `error:` line on stderr: why it could not start.
        self._last_error = ""

    @property
    def running(self) -> bool:
        return self._ready.is_set()

    async def attach(self, platform: str, endpoint: Endpoint) -> bool:
        """Register a platform; start herald if it is the first. True once herald is ready,
        False when it cannot start (:attr:`failure` says why)."""
        self._endpoints[platform] = endpoint
        if self.failure is None and (self._supervisor is None or self._supervisor.done()):
            self.loop = asyncio.get_running_loop()
            self._stopping = False
            self._settled.clear()
            self._supervisor = asyncio.create_task(self._supervise(), name="herald-supervisor")
        try:
            await asyncio.wait_for(self._settled.wait(), READY_TIMEOUT_S)
        except asyncio.TimeoutError:
            logger.error("herald did not become ready within %.0f s", READY_TIMEOUT_S)
            return False
        return self._ready.is_set()

    async def detach(self, platform: str) -> None:
        """Forget a platform; stop herald when none is left."""
        self._endpoints.pop(platform, None)
        if not self._endpoints:
            await self.stop()

    async def stop(self) -> None:
        """Close herald's stdin (its signal to shut down), then escalate if it lingers."""
        self._stopping = True
        process = self._process
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            if not await _exited(process, STOP_GRACE_S):
                process.terminate()
                if not await _exited(process, KILL_GRACE_S):
                    process.kill()
                    await process.wait()
        for task in (self._supervisor, *self._tasks):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._supervisor = None
        self._inbound.clear()

    async def request(self, request: Request, timeout: float = REQUEST_TIMEOUT_S) -> Result:
        """Send a request and wait for its result; raises :class:`BridgeError`. The line
        leaves before the first await, ahead of anything sent after it."""
        process = self._process
        if not self._ready.is_set() or process is None or process.stdin is None:
            raise BridgeError("unavailable", "herald is not running")
        request_id = next(self._ids)
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._put(request_line(request_id, request))
        self._pending[request_id] = future
        return await self._result(request_id, future, request["op"], timeout)

    async def _result(self, request_id: int, future: asyncio.Future[Result], op: str, timeout: float) -> Result:
        try:
            await self._drain()
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise BridgeError("timeout", f"herald did not answer {op} in {timeout:.0f} s") from None
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, notification: Notification) -> None:
        """Tell herald something that needs no answer (a turn's start and end, typing,
        status): the line leaves before the first await, ahead of anything sent after it,
        and nothing waits for herald, only for room in the pipe as requests do. A herald
        that is not running does not hear it."""
        try:
            self._put(event_line(notification))
            await self._drain()
        except BridgeError as err:
            logger.debug("herald %s not sent: %s", notification["op"], err)

    def notify_soon(self, notification: Notification) -> None:
        """:meth:`notify` from any thread (status lines from the agent's worker)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(spawn, self._tasks, self.notify(notification))

    def call_from_thread(self, request: Request, timeout: float = REQUEST_TIMEOUT_S) -> Result:
        """A blocking request for code on another thread (tool handlers)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            raise BridgeError("unavailable", "herald is not running in this process")
        future = asyncio.run_coroutine_threadsafe(self.request(request, timeout), loop)
        return future.result(timeout + 5)

    async def request_quietly(self, request: Request) -> None:
        """A request whose failure only matters to the log (typing, status, turn ends)."""
        try:
            await self.request(request)
        except BridgeError as err:
            logger.debug("herald %s failed: %s", request["op"], err)

    async def _write(self, message: PluginLine) -> None:
        self._put(message)
        await self._drain()

    def _put(self, message: PluginLine) -> None:
        """Hand a line to the pipe at once: lines leave in the order they were made."""
        process = self._process
        if process is None or process.stdin is None or process.stdin.is_closing():
            raise BridgeError("unavailable", "herald is not running")
        try:
            line = encode_line(message)
        except LineTooLong as err:
            raise BridgeError("bad_request", str(err)) from None
        try:
            process.stdin.write(line)
        except (BrokenPipeError, ConnectionResetError) as err:
            raise BridgeError("unavailable", f"herald went away: {err}") from None

    async def _drain(self) -> None:
        """Wait while the pipe holds more than its limit (one waiter at a time)."""
        process = self._process
        if process is None or process.stdin is None:
            return
        async with self._drain_lock:
            try:
                await process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as err:
                raise BridgeError("unavailable", f"herald went away: {err}") from None

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping:
            started = time.monotonic()
            was_ready = False
            try:
                spec = self._spec()
                await self._run_child(spec)
                was_ready = self._ready.is_set()
                cause = self._last_error or "herald exited before it was ready"
            except (OSError, RuntimeError, ValueError) as err:
                # No binary, or settings that cannot be read: nothing to retry.
                cause = str(err)
            self._ready.clear()
            self._fail_pending()
            if self._stopping:
                return
            if not was_ready:
                # It never started: a busy port, bad settings. Restarting cannot help.
                self._give_up(cause)
                return
            if time.monotonic() - started >= STABLE_UPTIME_S:
                failures = 0
            delay = RESTART_BACKOFF_S[min(failures, len(RESTART_BACKOFF_S) - 1)]
            failures += 1
            logger.warning("herald exited; restarting in %.0f s", delay)
            await asyncio.sleep(delay)

    async def _run_child(self, spec: ChildSpec) -> None:
        process = await asyncio.create_subprocess_exec(
            *spec.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=spec.env,
            cwd=spec.cwd,
            limit=MAX_LINE_BYTES,
        )
        self._process = process
        logger.info("started herald (pid %s)", process.pid)
        assert process.stdout is not None and process.stderr is not None
        log_task = asyncio.create_task(self._forward_log(process.stderr))
        try:
            await self._read(process.stdout)
        finally:
            code = await process.wait()
            await log_task
            logger.log(logging.INFO if self._stopping else logging.ERROR, "herald exited with %s", code)

    async def _forward_log(self, stderr: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stderr.readline()
            except ValueError:
                continue
            if not line:
                return
            text = line.decode(errors="replace").rstrip()
            if text.startswith("error: "):
                self._last_error = text.removeprefix("error: ")
            logger.info("herald: %s", text)

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stdout.readline()
            except ValueError:
                logger.error("herald sent a line over %d bytes; dropped", MAX_LINE_BYTES)
                continue
            if not line:
                return
            message = decode_line(line)
            if isinstance(message, Unanswerable):
                spawn(self._tasks, self._refuse(message))
            elif message is None:
                logger.error("herald sent a line this plugin cannot read; dropped: %.200r", line)
            else:
                self._dispatch(message)

    def _dispatch(self, message: HeraldLine) -> None:
        if message["type"] == "response":
            future = self._pending.get(message["id"])
            if future is None or future.done():
                return
            if message["ok"]:
                future.set_result(message.get("result", {}))
            else:
                error = message.get("error", {"kind": "failed", "message": ""})
                future.set_exception(BridgeError(error_kind(error["kind"]), error["message"]))
        elif message["type"] == "request":
            spawn(self._tasks, self._answer(message))
        elif message["op"] == "ready":
            self._on_ready(message["args"])
        else:
            self._queue_inbound(message["args"])

    def _give_up(self, cause: str) -> None:
        self.failure = f"herald cannot start: {cause}. {hermes_hint(cause)}"
        logger.error("%s", self.failure)
        self._settled.set()

    def _on_ready(self, info: ReadyArgs) -> None:
        if info["protocol"] != PROTOCOL_VERSION:
            logger.error("herald speaks bridge protocol %s, this plugin %s", info["protocol"], PROTOCOL_VERSION)
            return
        self.info = info
        self._last_error = ""
        self._ready.set()
        self._settled.set()
        logger.info("herald ready: gadgets at %s, phones at %s", info["gadget_url"], info["mobile_url"])

    async def _answer(self, question: Question) -> None:
        request_id, op, platform = question["id"], question["op"], question["args"]["platform"]
        endpoint = self._endpoints.get(platform)
        reply: PluginLine
        try:
            if endpoint is None:
                # herald serves both platforms; Hermes may have enabled only one.
                if op != "is_authorized":
                    raise BridgeError("denied", f"platform {platform!r} is not enabled in Hermes")
                reply = answer_line(request_id, {"authorized": False})
            else:
                reply = answer_line(request_id, await endpoint.answer(question))
        except BridgeError as err:
            reply = error_line(request_id, err.kind, err.message)
        except Exception as err:  # an answer must always go back, or herald waits
            logger.exception("answering herald's %s failed", op)
            reply = error_line(request_id, "unavailable", str(err))
        with contextlib.suppress(BridgeError):
            await self._write(reply)

    async def _refuse(self, request: Unanswerable) -> None:
        logger.warning("herald asked something this plugin cannot read: %s", request.reason)
        with contextlib.suppress(BridgeError):
            await self._write(error_line(request.id, "bad_request", request.reason))

    def _queue_inbound(self, args: InboundArgs) -> None:
        chat = args["source"]["chat"]
        key = (chat["platform"], chat["id"])
        queue = self._inbound.get(key)
        if queue is None:
            queue = self._inbound[key] = asyncio.Queue(MAX_INBOUND_QUEUED)
            spawn(self._tasks, self._deliver_inbound(key, queue))
        try:
            queue.put_nowait(args)
        except asyncio.QueueFull:
            logger.error("Hermes is %d messages behind from %s:%s; dropped one", MAX_INBOUND_QUEUED, *key)

    async def _deliver_inbound(self, key: tuple[str, str], queue: asyncio.Queue[InboundArgs]) -> None:
        """Hand one chat's events to its platform in the order herald sent them."""
        try:
            while not queue.empty():
                args = queue.get_nowait()
                endpoint = self._endpoints.get(key[0])
                if endpoint is None:
                    logger.warning("inbound for %s, which Hermes does not serve; dropped", key[0])
                    continue
                try:
                    await endpoint.on_inbound(args)
                except Exception:
                    logger.exception("handling an inbound message from herald failed")
        finally:
            # No await since the queue was found empty: nothing can have joined it.
            if self._inbound.get(key) is queue:
                del self._inbound[key]

    def _fail_pending(self) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(BridgeError("unavailable", "herald exited"))
        self._pending.clear()


def spawn(tasks: set[asyncio.Task[Any]], coro: Any) -> None:
    """Run ``coro`` as a task kept in ``tasks`` until it is done (so it is not lost)."""
    task = asyncio.ensure_future(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def _exited(process: asyncio.subprocess.Process, timeout: float) -> bool:
    try:
        await asyncio.wait_for(process.wait(), timeout)
    except asyncio.TimeoutError:
        return False
    return True


def hermes_hint(cause: str) -> str:
    """The fix for a start-up failure, in Hermes's terms (herald's own hints name
    herald's flags, which do not apply under Hermes)."""
    lowered = cause.lower()
    setting = re.match(r"(gadget|mobile)\.(\w+):", cause)
    if setting:
        platform, key = setting.groups()
        return (
            f"Fix {key} in platforms.{platform}.extra (`hermes config set platforms.{platform}.extra.{key} "
            f"VALUE`) or in [{platform}] of $HERMES_HOME/herald/herald.toml, then restart the gateway."
        )
    if "in use" in lowered:
        return (
            "Another program holds that port: stop it, or choose another with "
            "`hermes config set platforms.gadget.extra.port PORT` (or platforms.mobile.extra.port), "
            "then restart the gateway."
        )
    if "herald.toml" in lowered or "config" in lowered or "tls" in lowered:
        return (
            "Fix the setting named above (platforms.gadget.extra / platforms.mobile.extra in "
            "config.yaml, or $HERMES_HOME/herald/herald.toml), then restart the gateway."
        )
    if "no such file" in lowered or "herald binary" in lowered or "permission denied" in lowered:
        return (
            "Install herald (pip install the herald-hermes wheel into Hermes's Python environment, "
            "or set HERALD_BIN), then restart the gateway."
        )
    # herald's own hint names herald's flags, which do not apply here.
    return "See herald's lines above in this log and `hermes gadget info`, then restart the gateway."


_bridges: dict[Path, HeraldBridge] = {}


def shared_bridge(data_dir: Path, spec: Callable[[], ChildSpec]) -> HeraldBridge:
    """The bridge for ``data_dir``, created on first use: one herald per Hermes home."""
    bridge = _bridges.get(data_dir)
    if bridge is None:
        bridge = HeraldBridge(spec)
        _bridges[data_dir] = bridge
    return bridge


def running_bridge() -> HeraldBridge | None:
    """The bridge serving this process, if herald is up here (the gateway process)."""
    for bridge in _bridges.values():
        if bridge.running:
            return bridge
    return None


def child_env() -> dict[str, str]:
    """herald reads its settings (GADGET_*, MOBILE_*) from the environment Hermes loaded."""
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "info")
    return env
