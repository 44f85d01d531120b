"""How config.yaml's platform extras and herald.toml combine (no gateway needed)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from herald.settings import flag, merge, to_toml

pytestmark = pytest.mark.any_line


def test_extra_wins_over_herald_toml_which_keeps_the_rest() -> None:
    base: dict[str, Any] = {
        "data_dir": "/srv/herald",
        "gadget": {"host": "127.0.0.1", "port": 8765, "heartbeat_s": 30},
        "admin": {"port": 0},
    }
    extras: dict[str, dict[str, Any]] = {
        "gadget": {"port": "9100", "tls_cert": "/c.pem", "tls_key": "/k.pem", "speak_replies": False},
        "mobile": {"max_message_chars": 2000, "channel_prompts": {"x": "y"}},
    }
    merged = merge(base, extras)
    assert merged["gadget"] == {"host": "127.0.0.1", "port": 9100, "heartbeat_s": 30}
    assert merged["mobile"] == {"max_message_chars": 2000}
    assert (merged["tls_cert"], merged["tls_key"]) == ("/c.pem", "/k.pem")
    assert merged["admin"] == {"port": 0} and merged["data_dir"] == "/srv/herald"
    # The owner's herald.toml table is not changed in place.
    assert base["gadget"]["port"] == 8765


def test_the_written_file_is_toml_herald_can_read() -> None:
    table: dict[str, Any] = {
        "tls_cert": 'C:\\certs\\"odd".pem',
        "gadget": {"port": 9100, "path": "/gadget", "allowed_users": ["hg-1", "hg-2"]},
        "mobile": {"avatar_url": "https://example.org/a?b=1&c=ü"},
    }
    assert tomllib.loads(to_toml(merge(table, {}))) == table


def test_unset_values_are_left_out() -> None:
    assert merge({}, {"gadget": {"port": None}}) == {"gadget": {}}


def test_flags_read_as_yaml_or_hermes_config_set_left_them() -> None:
    assert flag({}, "auto_home", True) is True
    assert flag({"auto_home": False}, "auto_home", True) is False
    assert flag({"auto_home": "false"}, "auto_home", True) is False
    assert flag({"auto_home": "Off"}, "auto_home", True) is False
    assert flag({"auto_home": "yes"}, "auto_home", False) is True
