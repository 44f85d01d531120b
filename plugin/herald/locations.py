"""Where herald lives for this Hermes home: its binary and its data directory.

Every process of one Hermes home (the gateway, ``hermes send``, ``hermes gadget ...``)
derives the same data directory, which is how a short-lived ``herald`` command finds the
server the gateway started (its admin endpoint file is in there).
"""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

from hermes_constants import get_hermes_home

from .settings import write_config

PLUGIN_DIR = Path(__file__).resolve().parent


class HeraldMissing(RuntimeError):
    pass


def data_dir() -> Path:
    return Path(get_hermes_home()) / "herald"


def find_herald() -> Path | None:
    """``$HERALD_BIN``, else the copy ``install.sh`` put beside the plugin, else the one the
    wheel installed in this Python environment's scripts directory (found even when that
    directory is not on ``PATH``, as under a service that runs the venv's ``hermes``
    directly), else ``PATH``."""
    configured = os.environ.get("HERALD_BIN")
    if configured:
        path = Path(configured)
        return path if os.access(path, os.X_OK) else None
    for candidate in (PLUGIN_DIR / "bin" / "herald", Path(sysconfig.get_path("scripts")) / "herald"):
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("herald")
    return Path(found) if found else None


def herald_argv(*args: str) -> list[str]:
    """A herald command line for this home; raises :class:`HeraldMissing`."""
    binary = find_herald()
    if binary is None:
        raise HeraldMissing(
            "the herald binary was not found: pip install the herald-hermes wheel into "
            "Hermes's Python environment, or set HERALD_BIN"
        )
    argv = [str(binary), "--data-dir", str(data_dir())]
    # config.yaml's platforms.*.extra over herald.toml (settings.py).
    config = write_config(data_dir())
    if config is not None:
        argv += ["--config", str(config)]
    return argv + list(args)
