"""A real Hermes Agent for the tests: its virtualenv, a throwaway home, its gateway.

Nothing here imports Hermes: the tests drive it the way a user does, through the
`hermes` command and the files in ``HERMES_HOME``. ``run.sh`` installs one tested
Hermes line (``hermes_lines.py``) and pytest into one virtualenv and runs the suite
with it.

- :func:`hermes_venv` is that virtualenv (or the one ``HERMES_VENV`` names), and
  :func:`hermes_line` the line it holds.
- :class:`HermesHome` is a temporary ``HERMES_HOME`` whose model is the local stub;
  the Herald plugin goes in with ``install.sh`` and ``hermes plugins enable`` (the
  documented path).
- :class:`Gateway` runs ``hermes gateway run`` as a child process and stops it.
- :func:`build_wheel` and :func:`fresh_hermes_venv` make the other documented install, the
  ``herald-hermes`` wheel in a new Hermes environment, and :class:`PipHermesHome` is a home
  of that environment, run as a service runs it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from hermes_lines import Line, installed_line

PLUGIN_ROOT = Path(__file__).resolve().parent.parent
REPO_ROOT = PLUGIN_ROOT.parent


class HarnessError(RuntimeError):
    pass


def hermes_venv() -> Path:
    """The virtualenv with Hermes: ``$HERMES_VENV``, else the one running pytest."""
    configured = os.environ.get("HERMES_VENV")
    venv = Path(configured) if configured else Path(sys.prefix)
    line = installed_line(venv)
    if line is None or not (venv / "bin" / line.command).exists():
        raise HarnessError(f"{venv} holds no tested Hermes line: run plugin/tests/run.sh")
    return venv


def hermes_line() -> Line:
    """The Hermes line under test."""
    line = installed_line(hermes_venv())
    assert line is not None
    return line


def hermes_command(venv: Path) -> Path:
    """The line's ``hermes`` (0.20's fork calls it ``hermesx``)."""
    line = installed_line(venv)
    return venv / "bin" / (line.command if line else "hermes")


def herald_binary() -> Path:
    """``$HERALD_BIN``, else the debug build of this checkout."""
    configured = os.environ.get("HERALD_BIN")
    binary = Path(configured) if configured else REPO_ROOT / "target" / "debug" / "herald"
    if not os.access(binary, os.X_OK):
        raise HarnessError(f"no herald binary at {binary}: cargo build -p herald, or set HERALD_BIN")
    return binary


def run_step(argv: list[str], timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run one set-up command; :class:`HarnessError` with its output if it fails."""
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout)
    if result.returncode != 0:
        raise HarnessError(f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def build_wheel(out: Path) -> Path:
    """The ``herald-hermes`` wheel of this checkout (``plugin/pyproject.toml``), in ``out``;
    or the one ``$HERALD_WHEEL`` names, built from this checkout the same way beforehand
    (``scripts/check`` builds it before cargo is busy with other builds).

    Built with the profile ``cargo test`` uses (dev) in the workspace's target directory
    (``CARGO_TARGET_DIR`` if set, which cargo and maturin both honour), so CI compiles
    herald in one profile only: the crates ``cargo test`` compiled are reused, not built
    again for release. (The few whose features differ, because ``cargo test --workspace``
    adds test-only ones such as tokio's ``test-util``, compile once more, in dev, and stay
    fresh afterwards: the second line's run reuses them.) Users build theirs with
    ``maturin build --release``.
    """
    prebuilt = os.environ.get("HERALD_WHEEL")
    if prebuilt:
        if not Path(prebuilt).is_file():
            raise HarnessError(f"HERALD_WHEEL names no file: {prebuilt}")
        return Path(prebuilt)
    # A cold build compiles the whole binary.
    result = run_step(
        [sys.executable, "-m", "maturin", "build", "--profile", "dev", "--locked", "--out", str(out)],
        timeout=1800,
        cwd=PLUGIN_ROOT,
    )
    wheels = list(out.glob("herald_hermes-*.whl"))
    if len(wheels) != 1:
        raise HarnessError(f"maturin built {wheels} in {out}:\n{result.stderr}")
    return wheels[0]


def fresh_hermes_venv(path: Path, line: Line, *packages: str) -> Path:
    """A new virtualenv with the line's Hermes and ``packages``, made the way an owner
    makes one: ``python -m venv``, then one ``pip install``."""
    run_step([sys.executable, "-m", "venv", str(path)], timeout=120)
    pip = [str(path / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    run_step([*pip, line.requirement, *packages], timeout=900)
    return path


def base_config(model_url: str) -> dict[str, Any]:
    """A config.yaml for quiet, predictable tests against the stub model.

    Manual approvals (the default ``smart`` mode first asks the model), no Tirith
    (it would try to download a scanner), no title generation or nudges (they would
    send extra requests to the model).
    """
    return {
        "model": {
            "provider": "custom",
            "base_url": model_url,
            "default": "stub-model",
            "api_key": "stub",
            "context_length": 128000,
        },
        "approvals": {"mode": "manual"},
        "security": {"tirith_enabled": False},
        "auxiliary": {"title_generation": {"enabled": False}},
        "memory": {"nudge_interval": 0},
        "skills": {"creation_nudge_interval": 0},
    }


class HermesHome:
    """A temporary ``HERMES_HOME`` and the commands that run in it."""

    def __init__(self, root: Path, venv: Path, model_url: str) -> None:
        self.path = root
        self.venv = venv
        self.path.mkdir(parents=True, exist_ok=True)
        self.config: dict[str, Any] = base_config(model_url)
        self.write_config()
        self.env_file: dict[str, str] = {}

    @property
    def executable(self) -> Path:
        """This home's ``hermes`` command."""
        return hermes_command(self.venv)

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The agent's terminal snapshots a login shell: with the developer's HOME it would
        # run their profile (a pyenv rehash there waits a minute on a lock a killed shell
        # left behind). A home of its own keeps every run the same.
        user_home = self.path / "user"
        user_home.mkdir(exist_ok=True)
        env.update(
            HOME=str(user_home),
            HERMES_HOME=str(self.path),
            HERMES_DISABLE_LAZY_INSTALLS="1",
            PATH=f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        )
        # A developer's own Hermes settings must not leak into the test home.
        for name in ("HERMES_PROFILE", "HERMES_BUNDLED_PLUGINS", "HERMES_SAFE_MODE"):
            env.pop(name, None)
        return env

    def write_config(self) -> None:
        # JSON is YAML, so no YAML library is needed on this side.
        (self.path / "config.yaml").write_text(json.dumps(self.config, indent=2))

    def read_config(self) -> dict[str, Any]:
        """The config as Hermes left it (it rewrites the file when commands change it)."""
        # PyYAML up to 0.20, ruamel.yaml alone from 0.22.
        out = self.run_python(
            "import json, sys\n"
            "try:\n    from yaml import safe_load\n"
            "except ImportError:\n    from ruamel.yaml import YAML\n    safe_load = YAML(typ='safe').load\n"
            "print(json.dumps(safe_load(open(sys.argv[1]))))",
            str(self.path / "config.yaml"),
        )
        loaded = json.loads(out)
        return loaded if isinstance(loaded, dict) else {}

    def update_config(self, change: Callable[[dict[str, Any]], None]) -> None:
        self.config = self.read_config()
        change(self.config)
        self.write_config()

    def set_env(self, **values: str) -> None:
        """Entries of ``$HERMES_HOME/.env``, which the gateway loads at start."""
        self.env_file.update(values)
        lines = [f"{key}={value}" for key, value in self.env_file.items()]
        (self.path / ".env").write_text("\n".join(lines) + "\n")

    def herald_on_free_ports(self) -> Path:
        """herald's data directory, with a herald.toml that puts every listener on a free
        port of 127.0.0.1."""
        data = self.path / "herald"
        data.mkdir(parents=True)
        (data / "herald.toml").write_text(
            '[gadget]\nhost = "127.0.0.1"\nport = 0\n\n'
            '[mobile]\nhost = "127.0.0.1"\nport = 0\n\n'
            "[admin]\nport = 0\n"
        )
        return data

    def install_herald(self, binary: Path) -> None:
        """The README's install command with a prebuilt binary, then ``plugins enable``."""
        subprocess.run(
            [str(PLUGIN_ROOT / "install.sh"), "--hermes-home", str(self.path), "--binary", str(binary)],
            env=self.env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.enable_plugin("herald")

    def enable_plugin(self, name: str) -> None:
        """``hermes plugins enable NAME``, or what it writes where it cannot run here.

        The 0.22 fork's ``plugins enable`` first has its package manager fetch a Python
        3.14 runtime, which fails without the network; the plugin is then enabled the
        way that command records it, in config.yaml."""
        line = installed_line(self.venv)
        if line is not None and line.name == "0.22":
            self.update_config(lambda c: c.setdefault("plugins", {}).setdefault("enabled", []).append(name))
        else:
            self.hermes("plugins", "enable", name)

    def hermes(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run one ``hermes`` command in this home."""
        result = subprocess.run(
            [str(self.executable), *args],
            env=self.env,
            cwd=self.path,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise HarnessError(
                f"hermes {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result

    def run_python(self, code: str, *args: str) -> str:
        """Run code in Hermes's interpreter (to read its own files with its own libraries)."""
        result = subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", code, *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return result.stdout


class PipHermesHome(HermesHome):
    """A home of a Hermes environment that got Herald with ``pip install``: the plugin is
    found by its entry point, the binary in the environment's scripts directory.

    Its commands run as a service manager runs the venv's ``hermes``: no ``HERALD_BIN``
    (``run.sh`` exports one for the other tests) and the venv's ``bin`` not on ``PATH``.
    """

    @property
    def env(self) -> dict[str, str]:
        env = super().env
        env.pop("HERALD_BIN", None)
        bin_dir = str(self.venv / "bin")
        env["PATH"] = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if d != bin_dir)
        return env

    def enable_herald(self) -> None:
        """The README's step after ``pip install``: ``hermes plugins enable herald``, with
        nothing copied into the home."""
        self.enable_plugin("herald")


class Gateway:
    """``hermes gateway run`` in a home, with its output kept in a log file."""

    def __init__(self, home: HermesHome, extra_env: Mapping[str, str] | None = None) -> None:
        self.home = home
        self.log_path = home.path / "gateway.out"
        env = home.env
        env.update(extra_env or {})
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [str(home.executable), "gateway", "run", "-v"],
            env=env,
            cwd=home.path,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.leftovers = False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 90) -> None:
        """Wait until start-up is over: earlier messages are queued, not answered."""
        self.wait_for_log("gateway.run: Press Ctrl+C to stop", timeout)

    def wait_for_log(self, needle: str, timeout: float = 60) -> None:
        """Wait until the gateway's output contains ``needle``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log():
                return
            if self.process.poll() is not None:
                raise HarnessError(f"gateway exited {self.process.returncode}:\n{self.log()}")
            time.sleep(0.2)
        raise HarnessError(f"gateway never logged {needle!r}:\n{self.log()}")

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM to the gateway alone (what a service manager sends), SIGKILL if it hangs.

        Whatever the gateway started and left running is killed afterwards and noted in
        :attr:`leftovers`, so a test can tell a clean shutdown from a leaky one.
        """
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self.leftovers = group_alive(self.process.pid)
        if self.leftovers:
            os.killpg(self.process.pid, signal.SIGKILL)
        self._log.close()
        return self.process.returncode


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
