"""Settings the Hermes way, and failures that say why: each test starts its own gateway on
the suite's home (after the shared one has stopped) with changed ``platforms.*.extra``.
"""

from __future__ import annotations

import re
import socket
from typing import Iterator

import pytest

from conftest import Rig, admin_get
from harness import Gateway

pytestmark = pytest.mark.ends_gateway


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def fresh_start(rig: Rig) -> Iterator[None]:
    """The shared gateway stopped, and the home channels /sethome and auto_home saved
    taken out of .env again (the harness rewrites it from its own entries)."""
    rig.gateway.stop()
    rig.home.set_env()
    yield
    rig.home.update_config(lambda c: c.pop("platforms", None))


def test_config_yaml_extras_win_and_the_first_approved_gadget_becomes_home(rig: Rig, fresh_start: None) -> None:
    port = free_port()
    rig.home.hermes("config", "set", "platforms.gadget.extra.port", str(port))
    rig.home.hermes("config", "set", "platforms.gadget.extra.speak_replies", "false")
    gateway = Gateway(rig.home)
    try:
        gateway.wait_ready()
        gateway.wait_for_log("herald ready")
        # herald.toml asks for port 0 (any); config.yaml's extra names the port.
        url = f"ws://127.0.0.1:{port}/gadget"
        rig.gadget_url = url
        with rig.stranger_gadget(name="Homebody") as gadget:
            code = gadget.wait_for(lambda f: f.get("type") == "pairing")["code"]
            rig.home.hermes("pairing", "approve", "gadget", str(code))
            gadget.wait_for(lambda f: f.get("type") == "paired", timeout=30)
            gateway.wait_for_log("is now the gadget home channel")
            sent = rig.home.hermes("send", "--to", "gadget", "Welcome home.", check=False)
            assert sent.returncode == 0, sent.stdout + sent.stderr
            gadget.reply("Welcome home.")
        # The first phone that talks becomes the mobile home channel.
        rig.mobile_url = admin_get(rig.home.path / "herald", "/v1/info")["mobile_url"]
        with rig.phone("tel-homebody") as phone:
            phone.say("hello, new home")
            phone.message("stub: hello, new home")
            sent = rig.home.hermes("send", "--to", "mobile", "Welcome home, phone.", check=False)
            assert sent.returncode == 0, sent.stdout + sent.stderr
            phone.message("Welcome home, phone.")
        # speak_replies: false: a gadget with a speaker reads its replies, silently.
        with rig.gadget("studio", speaker_rate=16000) as studio:
            studio.say("how is the weather in the studio?")
            studio.reply("It is sunny and warm today.")
            studio.wait_for(lambda f: f.get("type") == "turn.end")
        assert not any(f.get("type") == "audio.start" for f in studio.frames), studio.frames
        assert (rig.home.path / "herald" / "herald.generated.toml").stat().st_mode & 0o077 == 0
    finally:
        gateway.stop()


def test_a_busy_port_is_reported_once_with_its_fix_and_not_retried(rig: Rig, fresh_start: None) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        rig.home.hermes("config", "set", "platforms.gadget.extra.port", str(port))
        gateway = Gateway(rig.home)
        try:
            # Not retryable: Hermes passes the cause on and stops, instead of a loop.
            gateway.wait_for_log("Gateway exiting cleanly", timeout=90)
            assert gateway.process.wait(30) is not None
            info = rig.home.hermes("gadget", "info").stdout
        finally:
            gateway.stop()
    log = gateway.log()
    failures = re.findall(r"herald\.bridge: herald cannot start: .*", log)
    assert len(failures) == 1, failures
    assert f"127.0.0.1:{port}" in failures[0] and "Address already in use" in failures[0], failures
    assert "restart the gateway" in failures[0] and "herald serve" not in failures[0]
    assert len(re.findall(r"started herald \(pid", log)) == 1, log[-3000:]
    assert "not running" in info and "hermes gateway run" in info, info


def test_a_bad_setting_is_reported_with_the_hermes_command_that_fixes_it(rig: Rig, fresh_start: None) -> None:
    rig.home.hermes("config", "set", "platforms.gadget.extra.heartbeat_s", "1")
    gateway = Gateway(rig.home)
    try:
        gateway.wait_for_log("Gateway exiting cleanly", timeout=90)
    finally:
        gateway.stop()
    failures = re.findall(r"herald\.bridge: herald cannot start: .*", gateway.log())
    assert len(failures) == 1, failures
    assert "gadget.heartbeat_s: must be between 5 and 300" in failures[0], failures
    assert "hermes config set platforms.gadget.extra.heartbeat_s VALUE" in failures[0], failures


def test_a_missing_herald_binary_is_reported_once_with_its_fix(rig: Rig, fresh_start: None) -> None:
    gateway = Gateway(rig.home, {"HERALD_BIN": str(rig.home.path / "no-such-herald")})
    try:
        gateway.wait_for_log("No messaging platforms enabled", timeout=90)
    finally:
        gateway.stop()
    reports = re.findall(r"Herald's gadget and mobile platforms are off: .*", gateway.log())
    assert len(reports) == 1, reports
    assert "no-such-herald is not an executable" in reports[0] and "herald-hermes wheel" in reports[0]
    assert "started herald" not in gateway.log()
