"""Delivery from processes other than the gateway: ``hermes send``, ``hermes cron run``.

They cannot use the gateway's herald child, so they run ``herald send``, a short-lived
command that finds the running herald through its data directory and posts to its admin
API (``POST /v1/deliver``). The message travels on stdin: no length or quoting limits.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, Optional, Sequence

from .locations import HeraldMissing, herald_argv

SEND_TIMEOUT_S = 60.0

Sender = Callable[..., Awaitable[dict[str, Any]]]


def media_flags(media_files: Optional[Sequence[Any]], force_document: bool) -> list[str]:
    """``--media``/``--voice``/``--document`` for Hermes's ``(path, is_voice)`` pairs."""
    flags: list[str] = []
    for entry in media_files or []:
        path, is_voice = (entry[0], bool(entry[1])) if isinstance(entry, (tuple, list)) else (entry, False)
        flag = "--document" if force_document else "--voice" if is_voice else "--media"
        flags += [flag, str(path)]
    return flags


def standalone_sender(platform: str) -> Sender:
    """The ``standalone_sender_fn`` for one platform."""

    async def send(
        pconfig: Any,
        chat_id: str,
        message: str,
        *,
        thread_id: Optional[str] = None,
        media_files: Optional[Sequence[Any]] = None,
        force_document: bool = False,
    ) -> dict[str, Any]:
        try:
            argv = herald_argv(
                "send", platform, str(chat_id), "--text-stdin", "--json",
                *media_flags(media_files, force_document),
            )
        except HeraldMissing as missing:
            return {"error": str(missing)}
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, errors = await asyncio.wait_for(process.communicate(message.encode()), SEND_TIMEOUT_S)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
            return {"error": f"herald send did not finish in {SEND_TIMEOUT_S:.0f} s"}
        try:
            answer = json.loads(out or b"{}")
        except json.JSONDecodeError:
            answer = {}
        if process.returncode == 0:
            return {"success": True, "message_id": answer.get("message_id")}
        detail = answer.get("error") or errors.decode(errors="replace").strip() or f"exit {process.returncode}"
        return {"error": f"herald send: {detail}"}

    return send
