"""``hermes`` with timestamps: the gateway that ``hermes_latency.py`` measures.

Run with the Hermes virtualenv's python in place of the ``hermes`` command (the bench
hands ``harness.Gateway`` a directory whose ``bin/hermes`` is a shim that runs this
file). It wraps a few methods of Hermes's adapter base class, in memory, then runs
``hermes_cli.main.main()`` with the arguments it was given (``gateway run -v``). No
file of Hermes or the plugin changes, and the wrappers sit where Hermes and the plugin
meet, so the records mark the moment a message is handed to Hermes and the moment
Hermes hands a reply back.

Records are JSON lines appended to ``$HERALD_BENCH_TRACE``, one ``os.write`` each (a
single unbuffered system call, so a record is on disk before the wrapped call goes on,
and lines from different threads never interleave):

- ``{"k": "in", "t", "p", "text"}``: ``BasePlatformAdapter.handle_message`` entered
  (``t`` is ``time.time_ns()``, ``p`` the platform, ``text`` the event's text);
- ``{"k": "send" | "edit", "t", "p", "text"}``: an adapter's own ``send`` /
  ``edit_message`` entered (every subclass defined after this module ran, which
  includes the plugin's, since Hermes loads plugins when the gateway starts).

With ``HERALD_BENCH_DETAIL=1`` the plugin's bridge to herald is traced as well, to
split each direction into herald's part and the plugin's part:

- ``{"k": "rd", "t", "type", "op", "id", "chat", "text"}``: a line from herald was
  parsed (``HeraldBridge._dispatch``); ``text`` is an inbound text body's text;
- ``{"k": "wr", "t0", "t1", "type", "op", "id", "chat", "text"}``: a line to herald,
  from the call (``t0``) until it was handed to the pipe (``t1``,
  ``HeraldBridge._put``); ``text`` is the request's text argument;
- ``{"k": "start", "t0", "t1", "text"}``: the plugin's ``on_processing_start``, which
  Hermes awaits before it runs the agent, from entry (``t0``) to return (``t1``);
- ``{"k": "hold", "t", "text"}``: the plugin held a message back because Hermes still
  held its chat's finished turn (``t``: ``FollowUps._release_held`` began;
  written when it ends; DESIGN.md, "Follow-ups"): the wait until it lets go is then
  part of the inbound time;
- ``{"k": "slow", "t", "ms", "what"}``: one callback of the event loop (a task's step,
  say) ran from ``t`` for ``ms`` milliseconds, over ``SLOW_MS``: while it ran, nothing
  else on the loop could (herald's lines wait in the pipe). ``what`` names the task's
  coroutine or the callback. The time includes waits for the GIL within the callback.

With ``HERALD_BENCH_PROFILE=PATH`` the event loop's thread (the main thread) runs
under cProfile and its stats are dumped to ``PATH`` when the gateway returns. With
``HERALD_BENCH_SWITCH_INTERVAL=S`` the interpreter's GIL switch interval is set to ``S``
seconds (Python's default is 0.005), an experiment on how long the event loop waits
for the GIL while Hermes's agent threads run.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from typing import Any, Callable, Coroutine, Optional

TRACE_ENV = "HERALD_BENCH_TRACE"
DETAIL_ENV = "HERALD_BENCH_DETAIL"
PROFILE_ENV = "HERALD_BENCH_PROFILE"
SWITCH_ENV = "HERALD_BENCH_SWITCH_INTERVAL"
# Enough of a reply to find a turn's marker in it; the rest only bloats the file.
TEXT_LIMIT = 200
SLOW_MS = 2.0

AsyncMethod = Callable[..., Coroutine[Any, Any, Any]]


class Trace:
    """An append-only file of JSON lines, safe to write from any thread."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def write(self, record: dict[str, Any]) -> None:
        os.write(self.fd, json.dumps(record, separators=(",", ":")).encode() + b"\n")


def platform_of(adapter: Any) -> str:
    platform = getattr(adapter, "platform", None)
    return str(getattr(platform, "value", platform))


def clip(text: Any) -> str:
    return str(text)[:TEXT_LIMIT] if text is not None else ""


def wrap_handle_message(trace: Trace, base: type) -> None:
    original: AsyncMethod = base.handle_message  # type: ignore[attr-defined]

    @functools.wraps(original)
    async def handle_message(self: Any, event: Any) -> Any:
        now = time.time_ns()
        trace.write({"k": "in", "t": now, "p": platform_of(self), "text": clip(getattr(event, "text", ""))})
        return await original(self, event)

    base.handle_message = handle_message  # type: ignore[attr-defined]


def wrap_outbound(trace: Trace, cls: type) -> None:
    """Wrap ``send`` and ``edit_message`` where ``cls`` itself defines them.

    Only the class's own definitions: a subclass of a wrapped adapter inherits the
    wrapper, and wrapping again would record its calls twice. ``functools.wraps``
    keeps ``__wrapped__``, so ``inspect.signature`` still sees Hermes's parameters.
    """
    own = vars(cls)
    if "send" in own:
        send: AsyncMethod = own["send"]

        @functools.wraps(send)
        async def traced_send(self: Any, chat_id: Any, content: Any, *args: Any, **kwargs: Any) -> Any:
            now = time.time_ns()
            trace.write({"k": "send", "t": now, "p": platform_of(self), "text": clip(content)})
            return await send(self, chat_id, content, *args, **kwargs)

        setattr(cls, "send", traced_send)
    if "edit_message" in own:
        edit: AsyncMethod = own["edit_message"]

        @functools.wraps(edit)
        async def traced_edit(self: Any, chat_id: Any, message_id: Any, content: Any, *args: Any, **kwargs: Any) -> Any:
            now = time.time_ns()
            trace.write({"k": "edit", "t": now, "p": platform_of(self), "text": clip(content)})
            return await edit(self, chat_id, message_id, content, *args, **kwargs)

        setattr(cls, "edit_message", traced_edit)


def line_text(message: Any) -> str:
    """The text a bridge line carries: an inbound body's, or a request's ``text``."""
    if not isinstance(message, dict):
        return ""
    args = message.get("args")
    if not isinstance(args, dict):
        return ""
    body = args.get("body")
    if isinstance(body, dict):
        return clip(body.get("text", ""))
    return clip(args.get("text", ""))


def line_chat(message: dict[str, Any]) -> str:
    """The chat a bridge line is about (a request's ``chat``, an inbound's source)."""
    args = message.get("args")
    if not isinstance(args, dict):
        return ""
    source = args.get("source")
    chat = source.get("chat") if isinstance(source, dict) else args.get("chat")
    return str(chat.get("id", "")) if isinstance(chat, dict) else ""


def line_fields(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {}
    return {
        "type": message.get("type"),
        "op": message.get("op"),
        "id": message.get("id"),
        "chat": line_chat(message),
        "text": line_text(message),
    }


def wrap_own_call(adapter: type, name: str, record: Callable[[Any, int, int], None]) -> None:
    """Wrap ``adapter``'s own async method ``name(event, ...)``: once it returns,
    ``record(event, entered, returned)`` (times from ``time.time_ns()``)."""
    method: Optional[AsyncMethod] = vars(adapter).get(name)
    if method is None:
        return
    original = method

    @functools.wraps(original)
    async def traced(self: Any, event: Any, *args: Any, **kwargs: Any) -> Any:
        entered = time.time_ns()
        try:
            return await original(self, event, *args, **kwargs)
        finally:
            record(event, entered, time.time_ns())

    setattr(adapter, name, traced)


def wrap_hold(trace: Trace, follow_ups: type) -> None:
    def record(first: Any, entered: int, _returned: int) -> None:
        trace.write({"k": "hold", "t": entered, "text": clip(getattr(first, "text", ""))})

    wrap_own_call(follow_ups, "_release_held", record)


def wrap_processing_start(trace: Trace, adapter: type) -> None:
    def record(event: Any, entered: int, returned: int) -> None:
        trace.write({"k": "start", "t0": entered, "t1": returned, "text": clip(getattr(event, "text", ""))})

    wrap_own_call(adapter, "on_processing_start", record)


def wrap_bridge(trace: Trace, bridge: type) -> None:
    """Time the plugin's lines to and from herald (``HeraldBridge``'s two ends)."""
    if getattr(bridge, "_bench_traced", False):
        return
    dispatch: Callable[..., Any] = bridge._dispatch  # type: ignore[attr-defined]
    put: Callable[..., Any] = bridge._put  # type: ignore[attr-defined]

    @functools.wraps(dispatch)
    def traced_dispatch(self: Any, message: Any) -> Any:
        now = time.time_ns()
        trace.write({"k": "rd", "t": now, **line_fields(message)})
        return dispatch(self, message)

    @functools.wraps(put)
    def traced_put(self: Any, message: Any) -> Any:
        start = time.time_ns()
        try:
            return put(self, message)
        finally:
            trace.write({"k": "wr", "t0": start, "t1": time.time_ns(), **line_fields(message)})

    bridge._dispatch = traced_dispatch  # type: ignore[attr-defined]
    bridge._put = traced_put  # type: ignore[attr-defined]
    bridge._bench_traced = True  # type: ignore[attr-defined]


def callback_name(handle: Any) -> str:
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    get_coro = getattr(owner, "get_coro", None)
    if callable(get_coro):
        coro = get_coro()
        return str(getattr(coro, "__qualname__", coro))
    return str(getattr(callback, "__qualname__", callback))


def wrap_loop_callbacks(trace: Trace) -> None:
    """Record the event loop's long callbacks (``asyncio.events.Handle._run``, which
    the loop calls for every ready callback and task step)."""
    import asyncio.events

    run: Callable[[Any], None] = asyncio.events.Handle._run
    limit_ns = int(SLOW_MS * 1e6)

    @functools.wraps(run)
    def timed_run(self: Any) -> None:
        start = time.time_ns()
        try:
            run(self)
        finally:
            took = time.time_ns() - start
            if took > limit_ns:
                trace.write({"k": "slow", "t": start, "ms": took / 1e6, "what": callback_name(self)})

    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]


def install(trace: Trace, detail: bool) -> None:
    from gateway.platforms.base import BasePlatformAdapter

    wrap_handle_message(trace, BasePlatformAdapter)
    if detail:
        wrap_loop_callbacks(trace)

    # Hermes imports the plugin (and so defines HeraldAdapter) while the gateway
    # starts, after this runs: a hook on the base class catches the class as it is
    # made, wherever Hermes imports it from.
    def on_subclass(cls: type, /, **kwargs: Any) -> None:
        super(BasePlatformAdapter, cls).__init_subclass__(**kwargs)
        wrap_outbound(trace, cls)
        if detail:
            # The plugin's adapter module has imported its bridge class by now.
            bridge = getattr(sys.modules.get(cls.__module__), "HeraldBridge", None)
            if isinstance(bridge, type):
                wrap_bridge(trace, bridge)
            # Held messages are the plugin's follow-ups module's, beside the adapter's.
            package = cls.__module__.rpartition(".")[0]
            follow_ups = getattr(sys.modules.get(f"{package}.followups"), "FollowUps", None)
            if isinstance(follow_ups, type):
                wrap_hold(trace, follow_ups)
            wrap_processing_start(trace, cls)

    BasePlatformAdapter.__init_subclass__ = classmethod(on_subclass)


def main() -> int:
    path = os.environ.get(TRACE_ENV)
    if not path:
        print(f"{TRACE_ENV} is not set: name the file for the timing records", file=sys.stderr)
        return 2
    # hermes_cli.main reads sys.argv as it is imported (its profile override), so the
    # command line must look like `hermes ARGS` before that import.
    sys.argv = ["hermes", *sys.argv[1:]]
    from hermes_cli.main import main as hermes_main

    install(Trace(path), detail=os.environ.get(DETAIL_ENV) == "1")
    switch = os.environ.get(SWITCH_ENV)
    if switch:
        sys.setswitchinterval(float(switch))
    profile_path = os.environ.get(PROFILE_ENV)
    if not profile_path:
        result = hermes_main()
        return result if isinstance(result, int) else 0
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        result = hermes_main()
    finally:
        profiler.disable()
        profiler.dump_stats(profile_path)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
