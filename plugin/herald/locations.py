"""Where herald lives for this Hermes home: its binary and its data directory.

Every process of one Hermes home (the gateway, ``hermes send``, ``hermes gadget ...``)
derives the same data directory, which is how a short-lived ``herald`` command finds the
server the gateway started (its admin endpoint file is in there).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hermes_constants import get_hermes_home

from .settings import write_config

PLUGIN_DIR = Path(__file__).resolve().parent


class HeraldMissing(RuntimeError):
    pass


def data_dir() -> Path:
    return Path(get_hermes_home()) / "herald"


def find_herald() -> Path | None:
    """``$HERALD_BIN``, else the copy installed beside the plugin, else ``PATH``."""
    configured = os.environ.get("HERALD_BIN")
    if configured:
        path = Path(configured)
        return path if os.access(path, os.X_OK) else None
    installed = PLUGIN_DIR / "bin" / "herald"
    if os.access(installed, os.X_OK):
        return installed
    found = shutil.which("herald")
    return Path(found) if found else None


def herald_argv(*args: str) -> list[str]:
    """A herald command line for this home; raises :class:`HeraldMissing`."""
    binary = find_herald()
    if binary is None:
        raise HeraldMissing(
            "the herald binary was not found: set HERALD_BIN or run plugin/install.sh"
        )
    argv = [str(binary), "--data-dir", str(data_dir())]
    # config.yaml's platforms.*.extra over herald.toml (settings.py).
    config = write_config(data_dir())
    if config is not None:
        argv += ["--config", str(config)]
    return argv + list(args)
