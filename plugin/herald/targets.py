"""``hermes send --to gadget:ID`` and ``--to mobile:ID``: what a device id looks like.

From 0.20 Hermes asks a platform to read the part after the colon
(``parse_target_ref_fn``) and to vouch for the chat id it ends with
(``validate_target_ref_fn``); without them only numeric ids pass. A gadget's id is
``hg-`` and 16 hex digits (derived from its key); a phone's is whatever its app chose,
within the mobile protocol's limits.
"""

from __future__ import annotations

import re
from typing import Callable, Optional, Union

GADGET_ID = re.compile(r"hg-[0-9a-f]{16}")
# The mobile protocol's longest id.
MAX_PHONE_ID_BYTES = 256

Parse = Callable[[str], Optional[tuple[str, Optional[str]]]]
Validate = Callable[[str], Union[bool, str]]


def problem(platform: str, chat_id: str) -> Optional[str]:
    """Why ``chat_id`` cannot be a device of ``platform``, or None."""
    if platform == "gadget":
        if GADGET_ID.fullmatch(chat_id):
            return None
        return f"{chat_id!r} is not a gadget id (hg- and 16 hex digits; `hermes gadget devices` lists them)"
    if not chat_id or len(chat_id.encode()) > MAX_PHONE_ID_BYTES:
        return f"a phone's device id has 1 to {MAX_PHONE_ID_BYTES} bytes"
    if any(c.isspace() or not c.isprintable() for c in chat_id):
        return f"{chat_id!r} is not a phone's device id (no spaces or control characters)"
    return None


def parse_target(platform: str) -> Parse:
    """A device id names that device, no thread; anything else is left to Hermes (its
    channel directory, the home channel)."""

    def parse(target_ref: str) -> Optional[tuple[str, Optional[str]]]:
        ref = target_ref.strip()
        return (ref, None) if problem(platform, ref) is None else None

    return parse


def valid_target(platform: str) -> Validate:
    def validate(chat_id: str) -> Union[bool, str]:
        return problem(platform, str(chat_id)) or True

    return validate
