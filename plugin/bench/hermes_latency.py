"""What Herald and its plugin add to a turn through the real Hermes gateway.

    plugin/.hermes-venv/bin/python plugin/bench/hermes_latency.py [--rate 50] [--duration 20]
    plugin/.hermes-venv/bin/python plugin/bench/hermes_latency.py --find-max

A real ``hermes gateway run`` (hermes-agent 0.19.0, the plugin installed by install.sh,
streaming by edits, herald in bridge mode) answers typed turns from gadgets and phones
with the tests' stub model, which echoes the user's line (``stub: <text>``). Each turn's
text is a unique marker (``bench g3 n000417``), so every record of it can be found:

- the client stamps ``time.time_ns()`` right before the WebSocket send and when the
  first frame with the marker's reply arrives (a gadget's ``reply.delta``/``reply``, a
  phone's ``message``);
- inside the gateway, ``trace_gateway.py`` stamps the entry of
  ``BasePlatformAdapter.handle_message`` (the device's message reaches Hermes) and of
  the adapter's ``send``/``edit_message`` (Hermes hands back a reply); the first call
  whose text holds the marker counts, as on the device.

Both processes read the same clock, so per turn:

    inbound  = handle_message entry - client send        (herald + plugin, in)
    hermes   = first send/edit with the marker - handle_message entry
    outbound = client receive - that send/edit's entry    (plugin + herald, out)
    end to end = client receive - client send

The client's own overhead (a Python WebSocket client: json, a thread hand-off) is in
both directions. ``--detail`` also traces the plugin's bridge lines to herald and
splits each direction at the pipe; ``--profile`` runs the gateway's event loop under
cProfile (slower: use it to see where time goes, not for the figures).

Turns are sent open loop at a steady total rate, alternating gadgets and phones. Hermes
runs one message per session at a time (a second one meets its busy path: an interrupt
or a queue), so a device is given a turn only when its previous one has ended (the
gadget's ``turn.end``, the phone's ``typing`` stop) and ``--rest`` has passed; there are
enough devices that each has a turn about once per ``--device-period`` seconds. A slot
with no free device is skipped and counted (the offered rate was then not reached).
``--find-max`` steps the rate up and reports the highest at which nothing was lost
(no reply within ``--drain`` seconds), late (end to end over 1 s) or skipped.

``--detail`` splits each direction: ``in_herald`` (client send -> the plugin parsed
herald's ``inbound`` line: the client, herald, the pipe and the wait for the gateway's
event loop; for phones also herald's ``is_authorized`` question, answered by the plugin
in ``in_authz``), ``in_plugin`` (that line -> ``handle_message``), ``on_start`` (the plugin's
``on_processing_start``, which Hermes awaits before it runs the agent: the plugin's share
of Hermes's time), ``out_plugin`` (``send``/
``edit_message`` -> its line written to herald) and ``out_herald`` (that line -> the
client has the frame). It also lists the event loop's callbacks over 2 ms and which of
them overlapped the slowest inbound hops, and the bridge's lines per turn by direction,
kind and op (every line of the run, divided by the turns sent). Each run prints CPU
milliseconds per turn of
the gateway (and of its loop thread), herald, the stub model and the clients.

Everything listens on 127.0.0.1 in a temporary directory; the gateway (and so herald)
and the stub model are stopped at the end. herald is ``--herald``, else ``$HERALD_BIN``,
else the checkout's release build. Exit status: 0, or 1 when a plain run lost a turn,
was late, skipped or met a busy session, 2 when the bench itself could not run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

BENCH = Path(__file__).resolve().parent
TESTS = BENCH.parent / "tests"
sys.path.insert(0, str(TESTS))

from websockets.exceptions import ConnectionClosed  # noqa: E402

from devices import GadgetClient, PhoneClient  # noqa: E402
from harness import REPO_ROOT, Gateway, HarnessError, HermesHome, herald_binary, hermes_venv  # noqa: E402

# A release build: a debug herald would measure the compiler's settings.
DEFAULT_HERALD = REPO_ROOT / "target" / "release" / "herald"
MARKER = re.compile(r"bench [gp]\d+ n\d{6}")
LATE_NS = 1_000_000_000
# trace_gateway.py's SLOW_MS: callbacks at least this long are recorded.
SLOW_CALLBACK_MS = 2.0
# How Hermes answers a message for a session it still holds (the busy ack in
# gateway/run.py: interrupt, queue, steer).
BUSY_NOTICES = ("⚡", "⏳", "⏩")
GOAL_MS = 5.0
READY_RE = re.compile(r"herald ready: gadgets at (\S+), phones at (\S+)")
# The first turn of a fresh home waits on Hermes's model-metadata look-ups (offline).
FIRST_TURN_S = 120.0
WARM_TURN_S = 60.0
WARM_BATCH = 8
WARM_BUDGET_S = 300.0
RECV_POLL_S = 0.2
# herald's limit of phones per user (its "already has 32 devices" refusal), and the
# app tokens (users) the bench makes so that enough phones can connect.
PHONES_PER_USER = 32
PHONE_USERS = 16


class BenchError(RuntimeError):
    pass


@dataclass
class Turn:
    marker: str
    kind: str  # "g" (gadget) or "p" (phone)
    sent: int  # client time.time_ns() right before the WebSocket send
    timeout_ns: int  # given up (the device freed) this long after it was sent
    first: Optional[int] = None  # first frame holding the marker's reply
    final: Optional[int] = None  # the reply complete
    done: Optional[int] = None  # the turn's end signal
    reply_turn: Optional[str] = None  # a gadget's turn id, to match its turn.end
    gave_up: bool = False
    busy_notices: int = 0  # Hermes's "⚡ Interrupting…" (or queued) notices seen meanwhile


class Device:
    """One connected client, a thread reading everything it is sent, and its turn."""

    def __init__(self, name: str, kind: str, client: GadgetClient | PhoneClient, pool: "Pool") -> None:
        self.name = name
        self.kind = kind
        self.client = client
        self.pool = pool
        self.lock = threading.Lock()
        self.turn: Optional[Turn] = None
        self.turns = 0
        # Busy notices outside any turn of ours (a sign that Hermes still held a session).
        self.stray_busy = 0
        self.error: Optional[str] = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.read, name=f"device-{name}", daemon=True)
        self.thread.start()

    def start_turn(self, marker: str, timeout_s: Optional[float] = None) -> Turn:
        """Send a turn; it is given up after ``timeout_s`` (the pool's by default)."""
        timeout_ns = self.pool.turn_timeout_ns if timeout_s is None else int(timeout_s * 1e9)
        turn = Turn(marker=marker, kind=self.kind, sent=0, timeout_ns=timeout_ns)
        with self.lock:
            self.turn = turn
            self.turns += 1
        # Stamped last, just before the frame leaves (the say() builds a small dict).
        turn.sent = time.time_ns()
        self.client.say(marker)
        return turn

    def read(self) -> None:
        ws = self.client.ws
        while not self.stop.is_set():
            try:
                data = ws.recv(timeout=RECV_POLL_S)
            except TimeoutError:
                self.check_timeout()
                continue
            except ConnectionClosed as err:
                if not self.stop.is_set():
                    self.error = f"connection closed: {err}"
                return
            now = time.time_ns()
            if isinstance(data, str):
                frame = json.loads(data)
                if isinstance(frame, dict):
                    # Keepalives and the like, answered as the test client answers them.
                    self.client.on_frame(frame)
                    self.on_frame(frame, now)
            self.check_timeout()

    def on_frame(self, frame: dict[str, Any], now: int) -> None:
        with self.lock:
            turn = self.turn
        text = str(frame.get("text", ""))
        busy = text.startswith(BUSY_NOTICES)
        if turn is None:
            self.stray_busy += busy
            return
        turn.busy_notices += busy
        if self.kind == "g":
            kind = frame.get("type")
            is_reply = kind in ("reply.delta", "reply") and turn.marker in text
            is_final = kind == "reply" and not frame.get("interim") and turn.marker in text
            ends = kind == "turn.end" and (turn.reply_turn is None or frame.get("turn") == turn.reply_turn)
            if is_reply and turn.reply_turn is None:
                turn.reply_turn = frame.get("turn") or None
        else:
            is_reply = frame.get("t") == "message" and turn.marker in text
            is_final = is_reply and bool(frame.get("final"))
            ends = frame.get("t") == "typing" and bool(frame.get("stop"))
        if is_reply and turn.first is None:
            turn.first = now
        if is_final and turn.final is None:
            turn.final = now
        if ends and turn.final is not None:
            turn.done = now
            self.finish()

    def check_timeout(self) -> None:
        with self.lock:
            turn = self.turn
        if turn is None or turn.sent == 0:
            return
        if time.time_ns() - turn.sent > turn.timeout_ns:
            turn.gave_up = True
            self.finish()

    def finish(self) -> None:
        with self.lock:
            self.turn = None
        self.pool.release(self)

    def close(self) -> None:
        self.stop.set()
        self.client.close()
        self.thread.join(5)


class Pool:
    """Idle devices of each kind, the longest idle first, each free after a rest."""

    def __init__(self, rest_s: float, turn_timeout_s: float) -> None:
        self.rest_ns = int(rest_s * 1e9)
        self.turn_timeout_ns = int(turn_timeout_s * 1e9)
        self.lock = threading.Lock()
        self.idle: dict[str, deque[tuple[int, Device]]] = {"g": deque(), "p": deque()}
        self.devices: list[Device] = []
        self.released = threading.Condition(self.lock)

    def register(self, device: Device) -> None:
        """A new device; it becomes idle when its first turn ends (``release``)."""
        with self.lock:
            self.devices.append(device)

    def release(self, device: Device) -> None:
        with self.lock:
            self.idle[device.kind].append((time.time_ns() + self.rest_ns, device))
            self.released.notify_all()

    def take(self, kind: str) -> Optional[Device]:
        with self.lock:
            queue = self.idle[kind]
            if queue and queue[0][0] <= time.time_ns():
                return queue.popleft()[1]
        return None

    def count(self, kind: str) -> int:
        return sum(1 for d in self.devices if d.kind == kind)

    def wait_idle(self, devices: Optional[list[Device]] = None, timeout: float = 10) -> bool:
        """Wait until these devices (all, by default) are back among the idle."""
        wanted = set(map(id, devices if devices is not None else self.devices))
        deadline = time.monotonic() + timeout
        with self.lock:
            while not wanted <= {id(d) for q in self.idle.values() for _at, d in q}:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.released.wait(left)
        return True


class Markers:
    """Unique turn texts: a fixed-width number, so no marker is a prefix of another."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, device: Device) -> str:
        self.next += 1
        return f"bench {device.name} n{self.next:06d}"


# -- the system under test ------------------------------------------------------------


class StubModel:
    """The tests' stub model in a process of its own, so its work (parsing ever longer
    conversations) does not compete with the clients for this process's GIL."""

    def __init__(self, python: Path, log: Path) -> None:
        self.log = log.open("w")
        self.process = subprocess.Popen(
            [str(python), str(TESTS / "stub_model.py"), "0"],
            stdout=subprocess.PIPE,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        stdout = self.process.stdout
        assert stdout is not None
        line: list[str] = []
        # Its first line is its URL; a thread keeps the wait bounded.
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(20)
        if not line or not line[0].startswith("http://127.0.0.1:"):
            self.stop()
            raise BenchError(f"the stub model did not start (see {log})")
        self.base_url = line[0].strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.log.close()


@dataclass
class System:
    root: Path
    model: StubModel
    home: HermesHome
    gateway: Gateway
    trace: Path
    gadget_url: str
    mobile_url: str
    # App tokens, each a phone user; herald lets one user have PHONES_PER_USER phones.
    app_tokens: list[str]


def launcher(root: Path, venv: Path) -> Path:
    """A directory whose ``bin/hermes`` runs trace_gateway.py with Hermes's python.

    harness.Gateway runs ``<venv>/bin/hermes gateway run -v``; pointed at this
    directory for that one call it starts the traced gateway, with no copy of its code.
    """
    shim = root / "launcher"
    (shim / "bin").mkdir(parents=True)
    script = shim / "bin" / "hermes"
    script.write_text(f'#!/bin/sh\nexec "{venv / "bin" / "python"}" "{BENCH / "trace_gateway.py"}" "$@"\n')
    script.chmod(0o755)
    return shim


def start_system(args: argparse.Namespace, root: Path) -> System:
    venv = hermes_venv()
    binary = herald_binary()
    model = StubModel(venv / "bin" / "python", root / "model.log")
    try:
        home = HermesHome(root / "home", venv, model.base_url)
        # As the plugin's tests run it: streaming by edits, no tool chatter.
        home.config.update(
            streaming={"enabled": True, "transport": "edit", "cursor": ""},
            display={"platforms": {p: {"tool_progress": "off"} for p in ("gadget", "mobile")}},
        )
        home.write_config()
        app_tokens = [os.urandom(32).hex() for _ in range(PHONE_USERS)]
        extra_tokens = ",".join(f"bench{i}:{token}" for i, token in enumerate(app_tokens[1:], 1))
        # Every device may talk: the bench makes new ones as the rate needs them.
        home.set_env(
            GADGET_ALLOW_ALL_USERS="true",
            MOBILE_ALLOW_ALL_USERS="true",
            MOBILE_TOKEN=app_tokens[0],
            MOBILE_EXTRA_TOKENS=extra_tokens,
        )
        home.herald_on_free_ports()
        home.install_herald(binary)
        trace = root / "trace.jsonl"
        extra = {"HERALD_BENCH_TRACE": str(trace), "HERALD_BIN": str(binary)}
        if args.detail:
            extra["HERALD_BENCH_DETAIL"] = "1"
        if args.profile:
            extra["HERALD_BENCH_PROFILE"] = str(Path(args.profile).resolve())
        if args.switch_interval:
            extra["HERALD_BENCH_SWITCH_INTERVAL"] = str(args.switch_interval)
        home.venv = launcher(root, venv)
        try:
            gateway = Gateway(home, extra)
        finally:
            home.venv = venv
    except BaseException:
        model.stop()
        raise
    try:
        gateway.wait_ready()
        gateway.wait_for_log("herald ready")
        found = READY_RE.search(gateway.log())
        if found is None:
            raise BenchError("the gateway's log has no herald URLs")
        if not trace.exists():
            raise BenchError("the gateway wrote no trace: was trace_gateway.py run?")
    except BaseException:
        gateway.stop()
        model.stop()
        raise
    return System(root, model, home, gateway, trace, found.group(1), found.group(2), app_tokens)


def stop_system(system: System) -> None:
    code = system.gateway.stop()
    system.model.stop()
    if system.gateway.leftovers:
        print(f"note: the gateway (exit {code}) left processes behind; they were killed", file=sys.stderr)


# -- CPU -------------------------------------------------------------------------------

CLOCK_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int, thread: Optional[int] = None) -> float:
    """User + system CPU seconds of a process (or one of its threads) so far."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the command name: state is field 3, utime 14 and stime 15 (proc(5)).
    return (int(fields[11]) + int(fields[12])) * CLOCK_TICK_S


def machine_cpu_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine, all cores (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values) - idle) * CLOCK_TICK_S, sum(values) * CLOCK_TICK_S


def herald_pid(gateway_pid: int) -> Optional[int]:
    """The herald child of the gateway (the plugin's bridge started it)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        if name.startswith("herald") and int(text.rsplit(")", 1)[1].split()[1]) == gateway_pid:
            return int(stat.parent.name)
    return None


class CpuMeter:
    """CPU used during a load window by each process of the bench, and by the machine."""

    def __init__(self, system: "System") -> None:
        self.pids = {"gateway": system.gateway.process.pid, "stub model": system.model.process.pid}
        herald = herald_pid(system.gateway.process.pid)
        if herald is not None:
            self.pids["herald"] = herald
        self.start = self.sample()

    def sample(self) -> dict[str, float]:
        values = {name: process_cpu_s(pid) for name, pid in self.pids.items()}
        # The gateway's main thread runs its asyncio loop (and so the plugin); the
        # others are Hermes's agent workers and helpers.
        gateway = self.pids["gateway"]
        values["gateway loop thread"] = process_cpu_s(gateway, gateway)
        values["bench clients"] = time.process_time()
        values["machine busy"], values["machine total"] = machine_cpu_s()
        return values

    def used(self) -> dict[str, float]:
        end = self.sample()
        return {name: end[name] - self.start[name] for name in end}


# -- load ------------------------------------------------------------------------------


class Fleet:
    """The devices, grown as a rate needs them, and every turn they were given."""

    def __init__(self, system: System, pool: Pool) -> None:
        self.system = system
        self.pool = pool
        self.markers = Markers()
        self.warmed = False

    def grow(self, gadgets: int, phones: int) -> None:
        """Connect devices up to these counts, one at a time (a gadget's first contact
        counts against herald's enrollment limits while its handshake runs), then give
        each new one a first turn, which Hermes spends creating its session."""
        fresh: list[Device] = []
        for kind, want in (("g", gadgets), ("p", phones)):
            have = self.pool.count(kind)
            for index in range(have, want):
                name = f"{kind}{index}"
                client = self.connect(kind, index, name)
                client.drain(0.05)
                device = Device(name, kind, client, self.pool)
                self.pool.register(device)
                fresh.append(device)
        if not fresh:
            return
        if not self.warmed:
            # The home's very first turn is slow and gets Hermes's one-off notices.
            self.warm(fresh[:1], FIRST_TURN_S)
            self.warmed = True
            fresh = fresh[1:]
        # A few at a time: a session's first turn costs Hermes more than the next ones.
        budget = time.monotonic() + WARM_BUDGET_S
        for batch in range(0, len(fresh), WARM_BATCH):
            if time.monotonic() > budget:
                raise BenchError(f"warming {len(fresh)} new devices took over {WARM_BUDGET_S:.0f} s")
            self.warm(fresh[batch : batch + WARM_BATCH], WARM_TURN_S)

    def connect(self, kind: str, index: int, name: str) -> GadgetClient | PhoneClient:
        try:
            if kind == "g":
                return GadgetClient(self.system.gadget_url, os.urandom(32), f"Bench {name}")
            tokens = self.system.app_tokens
            if index >= len(tokens) * PHONES_PER_USER:
                raise BenchError(f"at most {len(tokens) * PHONES_PER_USER} phones (PHONE_USERS x PHONES_PER_USER)")
            token = tokens[index // PHONES_PER_USER]
            return PhoneClient(self.system.mobile_url, token, f"bench-{name}")
        except (AssertionError, OSError, ConnectionClosed) as err:
            # devices.py asserts on a refused handshake; say which device and why.
            raise BenchError(f"device {name} could not connect: {err!r}") from None

    def warm(self, devices: list[Device], timeout: float) -> None:
        """A first turn for each device, all at once; not part of any figure."""
        turns = [device.start_turn(self.markers(device), timeout) for device in devices]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(t.done is None and not t.gave_up for t in turns):
            time.sleep(0.05)
        missing = [t.marker for t in turns if t.first is None]
        if missing:
            raise BenchError(f"warm-up turns got no reply in {timeout:.0f} s: {missing[:5]}")
        if not self.pool.wait_idle(devices, 10):
            raise BenchError("devices did not become idle after warming up")

    def run(self, rate: float, duration: float) -> "Offered":
        """Offer turns at ``rate`` per second for ``duration`` seconds, open loop."""
        kinds = [k for k in ("g", "p") if self.pool.count(k)]
        offered = Offered(rate=rate, duration=duration)
        meter = CpuMeter(self.system)
        start = time.monotonic()
        offered.window = (time.time_ns(), 0)
        slots = int(rate * duration)
        for index in range(slots):
            slot = start + index / rate
            pause = slot - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            kind = kinds[index % len(kinds)]
            device = self.pool.take(kind)
            if device is None:
                offered.skipped[kind] = offered.skipped.get(kind, 0) + 1
                continue
            turn = device.start_turn(self.markers(device))
            offered.turns.append(turn)
            # How far behind its slot the scheduler sent (a late scheduler lowers the rate).
            offered.max_slip_s = max(offered.max_slip_s, time.monotonic() - slot)
        offered.elapsed_s = time.monotonic() - start
        offered.window = (offered.window[0], time.time_ns())
        offered.cpu_s = meter.used()
        return offered

    def drain(self, offered: "Offered", timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(t.done is None and not t.gave_up for t in offered.turns):
            time.sleep(0.05)
        # Devices that hold a turn still count it against the next step: let them end.
        self.pool.wait_idle(timeout=max(0.0, deadline - time.monotonic()) + 1)

    def close(self) -> None:
        for device in self.pool.devices:
            device.close()


@dataclass
class Offered:
    rate: float
    duration: float
    turns: list[Turn] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    max_slip_s: float = 0.0
    cpu_s: dict[str, float] = field(default_factory=dict)
    window: tuple[int, int] = (0, 0)  # time.time_ns() while turns were being sent


# -- analysis --------------------------------------------------------------------------


@dataclass
class GatewayTimes:
    """The first trace time of each marker at each point in the gateway."""

    handed: dict[str, int] = field(default_factory=dict)  # handle_message entered
    replied: dict[str, int] = field(default_factory=dict)  # send/edit_message entered
    read: dict[str, int] = field(default_factory=dict)  # herald's inbound line parsed
    written: dict[str, tuple[int, int]] = field(default_factory=dict)  # send_text/edit_text line
    started: dict[str, tuple[int, int]] = field(default_factory=dict)  # on_processing_start ran
    # Messages the plugin held until Hermes let go of their chat's last turn.
    held: set[str] = field(default_factory=set)
    # herald's is_authorized questions: (read, answer written).
    authz: list[tuple[int, int]] = field(default_factory=list)
    # The event loop's long callbacks: (start, end, what).
    slow: list[tuple[int, int, str]] = field(default_factory=list)
    # Bridge lines by direction, kind and op ("wr request typing"), every turn's.
    lines: Counter[str] = field(default_factory=Counter)


def read_trace(path: Path) -> GatewayTimes:
    times = GatewayTimes()
    asked: dict[Any, int] = {}
    with path.open() as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the gateway may still be writing the last line
            kind = record.get("k")
            found = MARKER.search(str(record.get("text", "")))
            marker = found.group(0) if found else None
            if kind == "in" and marker:
                times.handed.setdefault(marker, record["t"])
            elif kind in ("send", "edit") and marker:
                times.replied.setdefault(marker, record["t"])
            if kind in ("rd", "wr"):
                times.lines[f"{kind} {record.get('type')} {record.get('op') or ''}".strip()] += 1
            if kind == "rd":
                if record.get("op") == "inbound" and marker:
                    times.read.setdefault(marker, record["t"])
                elif record.get("type") == "request" and record.get("op") == "is_authorized":
                    asked[record.get("id")] = record["t"]
            elif kind == "start" and marker:
                times.started.setdefault(marker, (record["t0"], record["t1"]))
            elif kind == "hold" and marker:
                times.held.add(marker)
            elif kind == "slow":
                start = int(record["t"])
                times.slow.append((start, start + int(record["ms"] * 1e6), str(record.get("what"))))
            elif kind == "wr":
                if record.get("type") == "response" and record.get("id") in asked:
                    times.authz.append((asked.pop(record.get("id")), record["t1"]))
                elif record.get("op") in ("send_text", "edit_text") and marker:
                    times.written.setdefault(marker, (record["t0"], record["t1"]))
    return times


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest rank: the smallest value with at least ``share`` of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def spread(values_ns: Sequence[int]) -> dict[str, float]:
    if not values_ns:
        return {}
    ms = [v / 1e6 for v in values_ns]
    return {"n": len(ms), "p50": percentile(ms, 0.5), "p99": percentile(ms, 0.99), "max": max(ms)}


def analyse(offered: Offered, times: GatewayTimes, fleet: Fleet, detail: bool) -> dict[str, Any]:
    report: dict[str, Any] = {
        "rate": offered.rate,
        "duration_s": offered.duration,
        "elapsed_s": round(offered.elapsed_s, 2),
        "max_slip_ms": round(offered.max_slip_s * 1e3, 2),
        "devices": {"gadgets": fleet.pool.count("g"), "phones": fleet.pool.count("p")},
        "kinds": {},
    }
    for kind, label in (("g", "gadgets"), ("p", "phones")):
        turns = [t for t in offered.turns if t.kind == kind]
        series: dict[str, list[int]] = {k: [] for k in ("inbound", "hermes", "outbound", "end_to_end")}
        parts: dict[str, list[int]] = {
            k: []
            for k in ("in_herald", "in_authz", "in_plugin", "on_start", "out_plugin", "out_herald")
        }
        lost = late = untraced = unended = 0
        for turn in turns:
            if turn.first is None:
                lost += 1
                continue
            if turn.done is None:
                unended += 1
            e2e = turn.first - turn.sent
            series["end_to_end"].append(e2e)
            if e2e > LATE_NS:
                late += 1
            handed = times.handed.get(turn.marker)
            replied = times.replied.get(turn.marker)
            if handed is None or replied is None:
                untraced += 1
                continue
            series["inbound"].append(handed - turn.sent)
            series["hermes"].append(replied - handed)
            series["outbound"].append(turn.first - replied)
            if not detail:
                continue
            read = times.read.get(turn.marker)
            written = times.written.get(turn.marker)
            if read is not None:
                parts["in_herald"].append(read - turn.sent)
                parts["in_plugin"].append(handed - read)
            if written is not None:
                parts["out_plugin"].append(written[1] - replied)
                parts["out_herald"].append(turn.first - written[1])
            if read is not None and kind == "p":
                # herald asks Hermes whether a phone's user may talk, for every message;
                # the question read last before the message is taken as this one's
                # (phones share a user, so this is an estimate when turns overlap).
                answers = [(a, b) for a, b in times.authz if turn.sent <= a and b <= read]
                if answers:
                    parts["in_authz"].append(answers[-1][1] - answers[-1][0])
            # Hermes awaits on_processing_start before it runs the agent: the plugin's
            # share of Hermes's time.
            started = times.started.get(turn.marker)
            if started is not None:
                parts["on_start"].append(started[1] - started[0])
        entry: dict[str, Any] = {
            "sent": len(turns),
            "answered": len(turns) - lost,
            "lost": lost,
            "late": late,
            "skipped": offered.skipped.get(kind, 0),
            "unended": unended,
            "untraced": untraced,
            "busy_notices": sum(t.busy_notices for t in turns),
            "held": sum(1 for t in turns if t.marker in times.held),
            "stray_busy_notices": sum(d.stray_busy for d in fleet.pool.devices if d.kind == kind),
        }
        entry.update({name: spread(values) for name, values in series.items()})
        if detail:
            entry["detail"] = {name: spread(values) for name, values in parts.items()}
        report["kinds"][label] = entry
    cpu = dict(offered.cpu_s)
    total = cpu.pop("machine total", 0.0)
    sent = max(1, len(offered.turns))
    report["cpu_ms_per_turn"] = {name: round(used * 1e3 / sent, 1) for name, used in cpu.items() if name != "machine busy"}
    report["machine_busy_pct"] = round(100 * cpu.get("machine busy", 0.0) / total, 1) if total else None
    report["cores"] = os.cpu_count()
    per_device = Counter(t.marker.split()[1] for t in offered.turns)
    busiest = max(per_device.values(), default=0)
    report["turns_per_device_s"] = round(busiest / max(offered.elapsed_s, 1e-9), 2)
    if detail:
        report["loop"] = loop_report(offered, times)
        report["bridge_lines_per_turn"] = {
            "written": round(sum(n for k, n in times.lines.items() if k.startswith("wr")) / sent, 2),
            "read": round(sum(n for k, n in times.lines.items() if k.startswith("rd")) / sent, 2),
            "by_kind": {k: round(n / sent, 2) for k, n in sorted(times.lines.items())},
        }
    # Every turn's timestamps (time.time_ns()), for anyone who wants to look closer.
    report["turns"] = [
        {
            "marker": t.marker,
            "sent": t.sent,
            "first": t.first,
            "final": t.final,
            "done": t.done,
            "handed": times.handed.get(t.marker),
            "replied": times.replied.get(t.marker),
            "read": times.read.get(t.marker),
            "written": (times.written.get(t.marker) or (None, None))[1],
        }
        for t in offered.turns
    ]
    return report


def overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def loop_report(offered: Offered, times: GatewayTimes) -> dict[str, Any]:
    """What kept the gateway's event loop from reading herald's lines in time."""
    start, end = offered.window
    inside = [s for s in times.slow if overlap((s[0], s[1]), (start, end))]
    by_name: dict[str, list[float]] = {}
    for began, ended, what in inside:
        by_name.setdefault(what, []).append((ended - began) / 1e6)
    top = sorted(by_name.items(), key=lambda item: -sum(item[1]))[:10]
    # The slowest inbound hops (client send -> the plugin parsed herald's line), and
    # how much of each the loop spent in long callbacks.
    hops = [
        (times.read[t.marker] - t.sent, t)
        for t in offered.turns
        if t.marker in times.read
    ]
    worst = sorted(hops, key=lambda h: -h[0])[:5]

    def asked(turn: Turn, hop: int) -> dict[str, float]:
        # A phone's hop holds herald's is_authorized question: when Python read it and
        # answered, from the client's send (with the loop idle, the rest is herald's).
        answers = [(a, b) for a, b in times.authz if turn.sent <= a and b <= turn.sent + hop]
        if turn.kind != "p" or not answers:
            return {}
        return {"authz_read_ms": round((answers[-1][0] - turn.sent) / 1e6, 2), "authz_answered_ms": round((answers[-1][1] - turn.sent) / 1e6, 2)}

    return {
        "blocked_pct": round(100 * sum(sum(v) for v in by_name.values()) / max(1, (end - start) / 1e6), 1),
        "slow_callbacks": [
            {"what": what, "count": len(ms), "total_ms": round(sum(ms), 1), "max_ms": round(max(ms), 1)} for what, ms in top
        ],
        "worst_inbound": [
            {
                "marker": turn.marker,
                "ms": round(hop / 1e6, 2),
                "in_slow_callbacks_ms": round(
                    sum(overlap((s[0], s[1]), (turn.sent, turn.sent + hop)) for s in times.slow) / 1e6, 2
                ),
                "callbacks": sorted(
                    {s[2] for s in times.slow if overlap((s[0], s[1]), (turn.sent, turn.sent + hop))}
                )[:4],
                **asked(turn, hop),
            }
            for hop, turn in worst
        ],
    }


def within_goal(report: dict[str, Any]) -> bool:
    """Both directions under GOAL_MS at p99, for gadgets and phones."""
    return all(
        k.get(name) and k[name]["p99"] < GOAL_MS for k in report["kinds"].values() for name in ("inbound", "outbound")
    )


def passed(report: dict[str, Any]) -> bool:
    return all(
        k["lost"] == 0 and k["late"] == 0 and k["skipped"] == 0 and k["busy_notices"] == 0
        for k in report["kinds"].values()
    )


def show(report: dict[str, Any]) -> str:
    lines = [
        f"rate {report['rate']:g}/s for {report['duration_s']:g} s "
        f"({report['devices']['gadgets']} gadgets + {report['devices']['phones']} phones, "
        f"scheduler slip max {report['max_slip_ms']} ms)",
        f"CPU ms per turn: {report['cpu_ms_per_turn']}; machine busy {report['machine_busy_pct']}% "
        f"of {report['cores']} cores while sending; busiest device {report['turns_per_device_s']} turns/s",
        f"{'':10} {'':12} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}",
    ]
    for label, entry in report["kinds"].items():
        lines.append(
            f"{label}: sent {entry['sent']}, answered {entry['answered']}, lost {entry['lost']}, "
            f"late {entry['late']}, skipped {entry['skipped']}, not ended {entry['unended']}, "
            f"untraced {entry['untraced']}, busy notices {entry['busy_notices']}"
            + (f", held by the plugin {entry['held']}" if "detail" in entry else "")
            + (f", busy notices between turns {entry['stray_busy_notices']}" if entry["stray_busy_notices"] else "")
        )
        goal = [
            f"{name} p99 {entry[name]['p99']:.2f} ms {'<' if entry[name]['p99'] < GOAL_MS else '>='} {GOAL_MS:g}"
            for name in ("inbound", "outbound")
            if entry.get(name)
        ]
        if goal:
            lines.append(f"{'':10} goal: " + "; ".join(goal))
        rows = [(name, entry[name]) for name in ("inbound", "outbound", "hermes", "end_to_end")]
        rows += list(entry.get("detail", {}).items())
        for name, stats in rows:
            if stats:
                lines.append(f"{'':10} {name:12} {stats['p50']:9.2f} {stats['p99']:9.2f} {stats['max']:9.2f}")
    bridge = report.get("bridge_lines_per_turn")
    if bridge:
        lines.append(
            f"bridge lines per turn: {bridge['written']} written by the plugin, {bridge['read']} read "
            "(herald's; 'wr response' are answers to herald's questions, 'rd response' herald's answers):"
        )
        lines.append("  " + ", ".join(f"{kind} {n}" for kind, n in bridge["by_kind"].items()))
    loop = report.get("loop")
    if loop:
        lines.append(f"event loop in callbacks over {SLOW_CALLBACK_MS:g} ms: {loop['blocked_pct']}% of the time; the longest:")
        for entry in loop["slow_callbacks"]:
            lines.append(f"  {entry['total_ms']:9.1f} ms in {entry['count']:4} (max {entry['max_ms']:6.1f}) {entry['what']}")
        lines.append("slowest inbound hops to the plugin, and the loop's long callbacks meanwhile:")
        for entry in loop["worst_inbound"]:
            authz = (
                f" (herald's is_authorized read at {entry['authz_read_ms']} ms, answered at {entry['authz_answered_ms']} ms)"
                if "authz_read_ms" in entry
                else ""
            )
            lines.append(
                f"  {entry['marker']}: {entry['ms']} ms, {entry['in_slow_callbacks_ms']} ms in long callbacks"
                f"{': ' + ', '.join(entry['callbacks']) if entry['callbacks'] else ''}{authz}"
            )
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------


def devices_for(args: argparse.Namespace, rate: float) -> tuple[int, int]:
    """Enough devices that each gets a turn about once per ``--device-period``."""
    auto = max(2, math.ceil(rate / 2 * args.device_period))
    return (args.gadgets if args.gadgets is not None else auto, args.phones if args.phones is not None else auto)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=50.0, help="turns per second in all (default 50)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load (default 20)")
    parser.add_argument("--gadgets", type=int, help="gadgets (default: enough for --device-period)")
    parser.add_argument("--phones", type=int, help="phones (default: as many as gadgets)")
    parser.add_argument("--device-period", type=float, default=2.0, help="seconds between a device's turns, on average (default 2)")
    parser.add_argument("--rest", type=float, default=0.1, help="seconds a device waits after its turn ended (default 0.1)")
    parser.add_argument("--drain", type=float, default=10.0, help="seconds to wait for the last replies (default 10)")
    parser.add_argument("--find-max", action="store_true", help="step the rate up; report the highest that holds")
    parser.add_argument("--steps", default="2,4,6,8,10,15,25,50,100,200", help="rates for --find-max, lowest first")
    parser.add_argument("--step-duration", type=float, default=10.0, help="seconds per --find-max step (default 10)")
    parser.add_argument("--detail", action="store_true", help="also trace the bridge lines (herald vs plugin)")
    parser.add_argument("--profile", help="cProfile the gateway's event loop into this file")
    parser.add_argument("--switch-interval", type=float, help="the gateway's GIL switch interval, seconds (Python: 0.005)")
    parser.add_argument("--herald", help="the herald binary (default $HERALD_BIN, else target/release/herald)")
    parser.add_argument("--json", help="write the reports to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, trace)")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.duration <= 0:
        parser.error("--rate and --duration must be positive")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    os.environ["HERALD_BIN"] = args.herald or os.environ.get("HERALD_BIN") or str(DEFAULT_HERALD)
    root = Path(tempfile.mkdtemp(prefix="herald-hermes-bench-"))
    reports: list[dict[str, Any]] = []
    summary: dict[str, Any] = {
        "command": [Path(sys.executable).name, *sys.argv],
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_before": Path("/proc/loadavg").read_text().split()[:3],
        "reports": reports,
    }
    status = 0
    try:
        system = start_system(args, root)
        pool = Pool(args.rest, args.drain)
        fleet = Fleet(system, pool)
        try:
            rates = [float(r) for r in args.steps.split(",")] if args.find_max else [args.rate]
            duration = args.step_duration if args.find_max else args.duration
            best: Optional[float] = None
            best_goal: Optional[float] = None
            goal_held = True
            for rate in rates:
                try:
                    fleet.grow(*devices_for(args, rate))
                except BenchError as err:
                    if not args.find_max or best is None:
                        raise
                    print(f"rate {rate:g}/s: {err}; stopping", flush=True)
                    break
                offered = fleet.run(rate, duration)
                fleet.drain(offered, args.drain)
                report = analyse(offered, read_trace(system.trace), fleet, args.detail)
                reports.append(report)
                print(show(report), flush=True)
                errors = [f"{d.name}: {d.error}" for d in pool.devices if d.error]
                if errors:
                    print("device errors: " + "; ".join(errors[:5]), flush=True)
                if not passed(report) or errors:
                    if args.find_max:
                        print(f"rate {rate:g}/s did not hold; stopping", flush=True)
                    status = 0 if args.find_max else 1
                    break
                best = rate
                # The goal counts only while every lower step met it as well.
                goal_held = goal_held and within_goal(report)
                if goal_held:
                    best_goal = rate
            summary.update(highest_rate=best, highest_rate_within_goal=best_goal)
            if args.find_max:
                print(f"highest rate with nothing lost, late or skipped: {best if best is not None else 'none'}")
                print(
                    f"highest rate with both directions under {GOAL_MS:g} ms at p99 (and every lower step too): "
                    f"{best_goal if best_goal is not None else 'none'}"
                )
        finally:
            fleet.close()
            stop_system(system)
    except (BenchError, HarnessError) as err:
        print(f"error: {err}", file=sys.stderr)
        status = 2
    finally:
        summary["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2))
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
