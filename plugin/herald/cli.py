"""``hermes gadget ...`` and ``hermes mobile ...``: thin wrappers around ``herald``.

Each subcommand runs the herald binary against this Hermes home's data directory, so it
talks to the herald the gateway started. Pairing is Hermes's own: ``hermes gadget pair``
is ``hermes pairing list`` / ``approve gadget CODE``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from .locations import HeraldMissing, herald_argv


def setup_gadget(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="herald_command", required=True)
    sub.add_parser("info", help="Where gadgets connect and whether herald is running")
    devices = sub.add_parser("devices", help="Enrolled gadgets: online, last seen, firmware")
    devices.add_argument("--json", action="store_true", help="Print JSON")
    forget = sub.add_parser("forget", help="Remove a gadget so a reset device can enroll again")
    forget.add_argument("device_id")
    pair = sub.add_parser("pair", help="List pairing requests, or approve a gadget's code")
    pair.add_argument("code", nargs="?")
    update = sub.add_parser("update", help="Send a firmware image to a gadget and wait for it")
    update.add_argument("device_id")
    update.add_argument("image", help="An ESP-IDF application image (.bin)")


def setup_mobile(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="herald_command", required=True)
    sub.add_parser("info", help="Where phones connect and whether herald is running")
    devices = sub.add_parser("devices", help="Phones that connected: online, owner, last seen")
    devices.add_argument("--json", action="store_true", help="Print JSON")


def run_gadget(args: argparse.Namespace) -> None:
    command = args.herald_command
    if command == "pair":
        pair("gadget", args.code)
    elif command == "info":
        run_herald("info")
    elif command == "devices":
        run_herald("devices", *(["--json"] if args.json else []))
    elif command == "forget":
        run_herald("forget", args.device_id)
    elif command == "update":
        run_herald("ota", "push", args.device_id, str(Path(args.image).resolve()), "--wait")


def run_mobile(args: argparse.Namespace) -> None:
    if args.herald_command == "info":
        run_herald("info")
    elif args.herald_command == "devices":
        run_herald("phones", *(["--json"] if args.json else []))


def pair(platform: str, code: str | None) -> None:
    from hermes_cli.pairing import pairing_command

    if code:
        pairing_command(argparse.Namespace(pairing_action="approve", platform=platform, code=code))
    else:
        pairing_command(argparse.Namespace(pairing_action="list"))


def run_herald(*args: str) -> None:
    try:
        argv = herald_argv(*args)
    except HeraldMissing as err:
        print(f"hermes: {err}", file=sys.stderr)
        sys.exit(2)
    sys.exit(subprocess.run(argv).returncode)

