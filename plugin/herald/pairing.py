"""Steps on Hermes's pairing store that it has no public method for.

Hermes keeps only a salted hash of each waiting code, so a waiting request can be found
by its user but not by its code. These helpers take the store's own lock and its own
file helpers (``PairingStore._lock``, ``._pending_path``, ``._load_json``,
``._save_json``, ``._approve_user`` in Hermes 0.19.0), as its public methods do.
"""

from __future__ import annotations

from typing import Any


def drop_pending(store: Any, platform: str, user_id: str) -> bool:
    """Remove ``user_id``'s waiting requests; whether there were any. Takes the lock."""
    with store._lock:
        return _drop_pending(store, platform, user_id)


def approve_user(store: Any, platform: str, entry: dict[str, Any]) -> None:
    """Approve a waiting user without its code, as ``approve_code`` does with one."""
    user_id = str(entry["user_id"])
    with store._lock:
        _drop_pending(store, platform, user_id)
        store._approve_user(platform, user_id, str(entry.get("user_name") or ""))


def _drop_pending(store: Any, platform: str, user_id: str) -> bool:
    path = store._pending_path(platform)
    requests = store._load_json(path)
    waiting = [k for k, v in requests.items() if isinstance(v, dict) and v.get("user_id") == user_id]
    for key in waiting:
        del requests[key]
    if waiting:
        store._save_json(path, requests)
    return bool(waiting)
