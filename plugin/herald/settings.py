"""herald's settings under Hermes: ``platforms.gadget.extra`` and ``platforms.mobile.extra``
in config.yaml, over ``$HERMES_HOME/herald/herald.toml``, over herald's defaults.

Hermes platforms keep their settings in ``config.yaml`` (``platforms.NAME.extra``), so
that is where an owner sets a gadget's port or certificate. herald itself reads one TOML
file, so the plugin merges the two and writes the result to a private file it passes
with ``--config``. Secrets stay in the environment (``GADGET_ACCESS_TOKEN``,
``MOBILE_TOKEN``, ...), which herald reads as always; nothing secret is written here.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

Table = dict[str, Any]

# The herald.toml keys each platform's extra may set, beside the shared TLS pair.
SECTION_KEYS = {
    "gadget": frozenset(
        {
            "host",
            "port",
            "path",
            "heartbeat_s",
            "max_utterance_s",
            "cue_after_s",
            "cue_every_s",
            "turn_timeout_s",
            "ota_ready_timeout_s",
            "ota_ack_timeout_s",
            "ota_done_timeout_s",
        }
    ),
    "mobile": frozenset(
        {"host", "port", "path", "max_message_chars", "turn_timeout_s", "allowed_devices", "avatar_url"}
    ),
}
# `hermes config set` may store numbers as strings; herald wants integers.
INTEGER_KEYS = frozenset(
    {
        "port",
        "heartbeat_s",
        "max_utterance_s",
        "cue_after_s",
        "cue_every_s",
        "turn_timeout_s",
        "max_message_chars",
        "ota_ready_timeout_s",
        "ota_ack_timeout_s",
        "ota_done_timeout_s",
    }
)
FALSE_WORDS = frozenset({"false", "no", "off", "0"})
# One herald serves both platforms, so a certificate set on either applies to both.
TOP_KEYS = frozenset({"tls_cert", "tls_key"})
GENERATED = "herald.generated.toml"


class SettingsError(ValueError):
    """The owner's herald.toml cannot be read; the message says where and why."""


def platform_extra(platform: str) -> Table:
    """``platforms.PLATFORM.extra`` from Hermes's config.yaml (empty when unset)."""
    from hermes_cli.config import load_config

    platforms = load_config().get("platforms") or {}
    entry = platforms.get(platform) or {}
    extra = entry.get("extra") if isinstance(entry, dict) else None
    return dict(extra) if isinstance(extra, dict) else {}


def merge(base: Table, extras: dict[str, Table]) -> Table:
    """herald.toml's tables with each platform's extra laid over them."""
    merged: Table = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for platform, extra in extras.items():
        section: Table = merged.setdefault(platform, {})
        for key, value in extra.items():
            if value is None:
                continue
            if key in TOP_KEYS:
                merged[key] = str(value)
            elif key in SECTION_KEYS.get(platform, ()):
                section[key] = int(value) if key in INTEGER_KEYS and isinstance(value, str) and value.isdigit() else value
    return merged


def to_toml(table: Table) -> str:
    """TOML for herald's settings: scalars, string lists and one level of tables.

    A JSON string, number, boolean or array of them is also a TOML value, so
    ``json.dumps`` writes each value.
    """
    scalars = [f"{key} = {json.dumps(value)}" for key, value in table.items() if not isinstance(value, dict)]
    lines = scalars + [""]
    for name, section in table.items():
        if isinstance(section, dict):
            lines.append(f"[{name}]")
            lines += [f"{key} = {json.dumps(value)}" for key, value in section.items()]
            lines.append("")
    return "\n".join(lines)


def flag(extra: Table, name: str, default: bool) -> bool:
    """A yes/no setting of a platform's extra, as YAML or `hermes config set` left it."""
    value = extra.get(name, default)
    if isinstance(value, str):
        return value.strip().lower() not in FALSE_WORDS
    return bool(value)


def read_toml(path: Path) -> Table:
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise SettingsError(f"{path}: {err}") from None


def write_config(data_dir: Path) -> Path | None:
    """Write the merged settings (0600) and return their path; None when nothing is set."""
    base = read_toml(data_dir / "herald.toml")
    merged = merge(base, {name: platform_extra(name) for name in SECTION_KEYS})
    if not merged or all(value == {} for value in merged.values()):
        return None
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / GENERATED
    staging = path.with_suffix(".tmp")
    descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(to_toml(merged))
    os.replace(staging, path)
    return path
