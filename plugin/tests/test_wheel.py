"""The wheel a Hermes owner installs with pip, end to end.

The ``herald-hermes`` wheel is built from this checkout, installed with the Hermes line
under test into a new virtualenv (no ``install.sh``, no Rust, no ``HERALD_BIN``), enabled
as the README says, and one gadget turn goes through ``hermes gateway run``. The gateway
runs as a service would run it, without the venv's ``bin`` on ``PATH``, and its herald
must be the binary the wheel installed there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import admin_get
from devices import GadgetClient, gadget_id
from harness import Gateway, PipHermesHome, build_wheel, fresh_hermes_venv, hermes_line
from stub_model import Rule, StubServer

pytestmark = pytest.mark.any_line


def test_the_wheel_alone_brings_herald_to_a_fresh_hermes(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "wheels")
    venv = fresh_hermes_venv(tmp_path / "venv", hermes_line(), str(wheel))
    binary = venv / "bin" / "herald"
    assert os.access(binary, os.X_OK), sorted(p.name for p in (venv / "bin").iterdir())

    model = StubServer()
    model.start()
    model.script.set_rules([Rule(match="weather", reply="It is sunny and warm today.")])
    home = PipHermesHome(tmp_path / "home", venv, model.base_url)
    key = os.urandom(32)
    home.set_env(GADGET_ALLOWED_USERS=gadget_id(key))
    data = home.herald_on_free_ports()
    home.enable_herald()
    # Hermes finds the plugin by its entry point: no directory plugin in the home.
    assert not (home.path / "plugins" / "herald").exists()
    assert "HERALD_BIN" not in home.env and str(venv / "bin") not in home.env["PATH"].split(os.pathsep)
    found = home.run_python("from herald.locations import find_herald; print(find_herald())")
    assert found.strip() == str(binary)

    gateway = Gateway(home)
    try:
        gateway.wait_ready()
        gateway.wait_for_log("herald ready")
        started = re.findall(r"started herald \(pid (\d+)\)", gateway.log())
        assert started, gateway.log()[-3000:]
        assert Path(f"/proc/{started[-1]}/exe").resolve() == binary.resolve()
        info = admin_get(data, "/v1/info")
        with GadgetClient(str(info["gadget_url"]), key, "Wheel") as gadget:
            gadget.say("how is the weather?")
            start = gadget.wait_for(lambda f: f.get("type") == "turn.start")
            reply = gadget.reply("It is sunny and warm today.")
            end = gadget.wait_for(lambda f: f.get("type") == "turn.end")
        assert reply["text"] == "It is sunny and warm today."
        assert end["turn"] == start["turn"] and end["outcome"] == "success", end
    finally:
        gateway.stop()
        model.stop()
    assert not gateway.leftovers, gateway.log()[-3000:]
