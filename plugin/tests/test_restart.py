"""Settings the Hermes way, and failures that say why: each test starts gateways of its
own, in a home of its own, with changed ``platforms.*.extra``.
"""

from __future__ import annotations

import re
import socket
from contextlib import contextmanager
from typing import Iterator

from conftest import Station
from devices import is_reply_speech
from harness import Gateway


@contextmanager
def reserved_port() -> Iterator[int]:
    """A port of 127.0.0.1 that stays the test's while the block runs, for herald to listen on.

    A socket bound to it holds it, with SO_REUSEADDR and never listening. Linux then gives
    the port to nobody who asks for any free one (a bind to port 0, the local port of an
    outgoing connection) and refuses it to a bind without SO_REUSEADDR; herald's listener
    sets that option (tokio does), so it can bind the port beside a socket that does not
    listen, and once it listens no one else can. (Finding a free port and closing it
    before herald starts would leave a gap in which any socket could take it.)"""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        yield int(holder.getsockname()[1])


def test_config_yaml_extras_win_and_the_first_approved_gadget_becomes_home(station: Station) -> None:
    home = station.home
    with reserved_port() as port:
        home.hermes("config", "set", "platforms.gadget.extra.port", str(port))
        home.hermes("config", "set", "platforms.gadget.extra.speak_replies", "false")
        rig = station.start()
        try:
            # herald.toml asks for port 0 (any); config.yaml's extra names the port.
            assert rig.gadget_url == f"ws://127.0.0.1:{port}/gadget", rig.gadget_url
            with rig.stranger_gadget(name="Homebody") as gadget:
                code = gadget.wait_for(lambda f: f.get("type") == "pairing")["code"]
                home.hermes("pairing", "approve", "gadget", str(code))
                gadget.wait_for(lambda f: f.get("type") == "paired", timeout=30)
                rig.gateway.wait_for_log("is now the gadget home channel")
                sent = home.hermes("send", "--to", "gadget", "Welcome home.", check=False)
                assert sent.returncode == 0, sent.stdout + sent.stderr
                gadget.reply("Welcome home.")
            # The first phone that talks becomes the mobile home channel.
            with rig.phone("tel-homebody") as phone:
                phone.say("hello, new home")
                phone.message("stub: hello, new home")
                sent = home.hermes("send", "--to", "mobile", "Welcome home, phone.", check=False)
                assert sent.returncode == 0, sent.stdout + sent.stderr
                phone.message("Welcome home, phone.")
            # speak_replies: false: a gadget with a speaker reads its replies, silently
            # (herald would hold turn.end back until speech had ended).
            with rig.gadget("studio", speaker_rate=16000) as studio:
                studio.say("how is the weather in the studio?")
                studio.reply("It is sunny and warm today.")
                studio.wait_for(lambda f: f.get("type") == "turn.end")
            assert not any(is_reply_speech(f) for f in studio.frames), studio.frames
            assert (home.path / "herald" / "herald.generated.toml").stat().st_mode & 0o077 == 0
        finally:
            rig.gateway.stop()


def test_a_busy_port_is_reported_once_with_its_fix_and_not_retried(station: Station) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        station.home.hermes("config", "set", "platforms.gadget.extra.port", str(port))
        gateway = Gateway(station.home)
        try:
            # Not retryable: Hermes passes the cause on and stops, instead of a loop.
            gateway.wait_for_log("Gateway exiting cleanly", timeout=90)
            assert gateway.process.wait(30) is not None
            info = station.home.hermes("gadget", "info").stdout
        finally:
            gateway.stop()
    log = gateway.log()
    failures = re.findall(r"herald\.bridge: herald cannot start: .*", log)
    assert len(failures) == 1, failures
    assert f"127.0.0.1:{port}" in failures[0] and "Address already in use" in failures[0], failures
    assert "restart the gateway" in failures[0] and "herald serve" not in failures[0]
    assert len(re.findall(r"started herald \(pid", log)) == 1, log[-3000:]
    assert "not running" in info and "hermes gateway run" in info, info


def test_a_bad_setting_is_reported_with_the_hermes_command_that_fixes_it(station: Station) -> None:
    station.home.hermes("config", "set", "platforms.gadget.extra.heartbeat_s", "1")
    gateway = Gateway(station.home)
    try:
        gateway.wait_for_log("Gateway exiting cleanly", timeout=90)
    finally:
        gateway.stop()
    failures = re.findall(r"herald\.bridge: herald cannot start: .*", gateway.log())
    assert len(failures) == 1, failures
    assert "gadget.heartbeat_s: must be between 5 and 300" in failures[0], failures
    assert "hermes config set platforms.gadget.extra.heartbeat_s VALUE" in failures[0], failures


def test_a_missing_herald_binary_is_reported_once_with_its_fix(station: Station) -> None:
    gateway = Gateway(station.home, {"HERALD_BIN": str(station.home.path / "no-such-herald")})
    try:
        gateway.wait_for_log("No messaging platforms enabled", timeout=90)
    finally:
        gateway.stop()
    reports = re.findall(r"Herald's gadget and mobile platforms are off: .*", gateway.log())
    assert len(reports) == 1, reports
    assert "no-such-herald is not an executable" in reports[0] and "herald-hermes wheel" in reports[0]
    assert "started herald" not in gateway.log()
