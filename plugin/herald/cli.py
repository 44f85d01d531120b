"""``hermes gadget ...`` and ``hermes mobile ...``: herald's commands, in Hermes's terms.

Most subcommands run the herald binary against this Hermes home's data directory, so
they talk to the herald the gateway started. ``info`` explains what it finds with
Hermes's commands and checks Hermes's speech settings; ``pair`` is Hermes's own pairing:
with a code it is ``hermes pairing approve gadget CODE``, without one it waits for a
device that shows a code and approves it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from . import compat
from .locations import HeraldMissing, herald_argv
from .settings import GENERATED, SettingsError

PAIR_WAIT_S = 300.0
PAIR_POLL_S = 0.5


def setup_gadget(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="herald_command", required=True)
    sub.add_parser("info", help="Whether herald is listening, where gadgets connect, voice settings")
    devices = sub.add_parser("devices", help="Enrolled gadgets: online, last seen, firmware")
    devices.add_argument("--json", action="store_true", help="Print JSON")
    forget = sub.add_parser("forget", help="Remove a gadget so a reset device can enroll again")
    forget.add_argument("device_id")
    pair = sub.add_parser(
        "pair",
        help="Approve a gadget: the code it shows, or (without one) wait for a gadget showing a code",
    )
    pair.add_argument("target", nargs="?", help="The code on the gadget's screen, or its id (hg-...)")
    pair.add_argument("--yes", action="store_true", help="Approve without asking (only if exactly one gadget waits)")
    pair.add_argument("--timeout", type=float, default=PAIR_WAIT_S, help="Seconds to wait for a gadget")
    update = sub.add_parser("update", help="Send a firmware image to a gadget and wait for it")
    update.add_argument("device_id")
    update.add_argument("image", help="An ESP-IDF application image (.bin)")
    console = sub.add_parser("console", help="Print (and open) a one-time link that logs in to herald's console")
    console.add_argument("--no-open", action="store_true", help="Only print the link")


def setup_mobile(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="herald_command", required=True)
    sub.add_parser("info", help="Whether herald is listening, where phones connect, voice settings")
    devices = sub.add_parser("devices", help="Phones that connected: online, owner, last seen")
    devices.add_argument("--json", action="store_true", help="Print JSON")


def run_gadget(args: argparse.Namespace) -> None:
    guarded(gadget_command, args)


def run_mobile(args: argparse.Namespace) -> None:
    guarded(mobile_command, args)


def guarded(command: Callable[[argparse.Namespace], None], args: argparse.Namespace) -> None:
    """Run a subcommand; `pair` without a code and `info` use Hermes internals
    (DESIGN.md), so a Hermes that changed them gets a clear error, not a traceback."""
    try:
        command(args)
    except (AttributeError, ImportError) as err:
        version = compat.hermes_version()
        tested = ", ".join(compat.TESTED_LINES.values())
        sys.exit(f"error: Hermes {version} differs from the lines the Herald plugin is tested on ({tested}): {err}")


def gadget_command(args: argparse.Namespace) -> None:
    command = args.herald_command
    if command == "pair":
        target = args.target or ""
        if target and not target.startswith("hg-"):
            approve_code("gadget", target)
        else:
            sys.exit(pair_waiting("gadget", target or None, args.yes, args.timeout))
    elif command == "info":
        sys.exit(info())
    elif command == "devices":
        run_herald("devices", *(["--json"] if args.json else []))
    elif command == "forget":
        run_herald("forget", args.device_id)
    elif command == "update":
        run_herald("ota", "push", args.device_id, str(Path(args.image).resolve()), "--wait")
    elif command == "console":
        run_herald("console", *(["--no-open"] if args.no_open else []))


def mobile_command(args: argparse.Namespace) -> None:
    if args.herald_command == "info":
        sys.exit(info())
    elif args.herald_command == "devices":
        run_herald("phones", *(["--json"] if args.json else []))


def approve_code(platform: str, code: str) -> None:
    compat.approve_code_command(platform, code)


def pair_waiting(platform: str, device: str | None, yes: bool, timeout: float) -> int:
    """Wait for a device showing a pairing code, then approve it (asking first)."""
    store = compat.new_pairing_store()
    deadline = time.monotonic() + timeout
    waiting = pending(store, platform, device)
    if not waiting:
        print(f"Waiting for {device or 'a ' + platform} to show a pairing code (Ctrl+C to stop)...")
    while not waiting:
        if time.monotonic() >= deadline:
            print(f"No {platform} asked to pair within {timeout:.0f} s.", file=sys.stderr)
            return 1
        time.sleep(PAIR_POLL_S)
        waiting = pending(store, platform, device)
    if yes and len(waiting) > 1:
        names = ", ".join(label(entry) for entry in waiting)
        print(f"{len(waiting)} devices wait ({names}); name one: hermes {platform} pair --yes ID", file=sys.stderr)
        return 1
    approved = 0
    for entry in waiting:
        if not yes and not confirm(f"Approve {label(entry)}? [y/N] "):
            continue
        compat.approve_waiting(store, platform, entry)
        print(f"Approved {label(entry)}.")
        approved += 1
    return 0 if approved else 1


def confirm(question: str) -> bool:
    """Yes only when someone typed it; no terminal (a script) means no."""
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        print()
        return False


def pending(store: Any, platform: str, device: str | None) -> list[dict[str, Any]]:
    entries = [e for e in store.list_pending(platform) if e.get("user_id")]
    return [e for e in entries if device is None or e["user_id"] == device]


def label(entry: dict[str, Any]) -> str:
    name = entry.get("user_name")
    return f"{name} ({entry['user_id']})" if name else str(entry["user_id"])


def info() -> int:
    """Where devices connect, whether herald listens, and whether voice can work."""
    try:
        argv = herald_argv("info", "--json")
    except (HeraldMissing, SettingsError) as err:
        print(f"hermes: {err}", file=sys.stderr)
        return 2
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stderr.strip() or f"herald info exited {result.returncode}", file=sys.stderr)
        return result.returncode
    about = json.loads(result.stdout)
    if about.get("running"):
        print(f"Server:              listening (herald {about.get('version') or '?'})")
    else:
        print("Server:              not running: enable the platforms (platforms.gadget.enabled /")
        print("                     platforms.mobile.enabled) and start `hermes gateway run`")
    print(f"Gadgets connect to:  {about.get('gadget_url')}")
    print(f"Phones connect to:   {about.get('mobile_url')}")
    print(f"Data directory:      {about.get('data_dir')}")
    config = about.get("config")
    source = "platforms.*.extra in config.yaml over herald.toml" if config and config.endswith(GENERATED) else None
    print(f"Settings:            {source or config or 'defaults and the environment'}")
    for line in hermes_report():
        print(line)
    for line in voice_report():
        print(line)
    return 0


def hermes_report() -> list[str]:
    """The Hermes in use, whether the plugin is tested on its line, and what is off on it.

    Outside the gateway only what the classes and modules show can be checked; the
    gateway's log says the rest at connect."""
    from gateway.platforms.base import BasePlatformAdapter
    from gateway.run import GatewayRunner

    version = compat.hermes_version()
    tested = ", ".join(compat.TESTED_LINES.values())
    verdict = "a tested line" if compat.is_tested(version) else f"not a tested line (tested: {tested})"
    lines = [f"Hermes:              {version}, {verdict}"]
    for feature in compat.missing_features(GatewayRunner, BasePlatformAdapter, live=False):
        lines.append(f"  off: {feature.name} (needs {feature.needs})")
    return lines


def voice_report() -> list[str]:
    """Hermes's speech settings as a gadget owner needs them, with a warning when unusable."""
    # Checking must not install anything.
    os.environ.setdefault("HERMES_DISABLE_LAZY_INSTALLS", "1")
    stt, configured, tts, speaks = compat.speech_settings()
    lines = [f"Speech-to-text:      {stt if stt != 'none' else configured}"]
    if stt == "none":
        lines.append(
            "  warning: Hermes cannot transcribe gadget voice; set stt.provider (README: Voice with Hermes)"
        )
    lines.append(f"Text-to-speech:      {tts}")
    if not speaks:
        lines.append(
            "  warning: Hermes cannot speak replies; set tts.provider (README: Voice with Hermes)"
        )
    return lines


def run_herald(*args: str) -> None:
    try:
        argv = herald_argv(*args)
    except (HeraldMissing, SettingsError) as err:
        print(f"hermes: {err}", file=sys.stderr)
        sys.exit(2)
    sys.exit(subprocess.run(argv).returncode)
