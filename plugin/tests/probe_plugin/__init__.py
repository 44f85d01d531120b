"""A throwaway Hermes platform for the harness's own smoke test.

It proves the harness can load a plugin platform into a real ``hermes gateway run`` and
drive a message through it, independently of Herald. The adapter listens on a loopback
port (written to ``$HERMES_HOME/probe.port``); each line a client sends is a JSON
message ``{"chat": ..., "user": ..., "text": ...}`` handed to Hermes, and every adapter
call Hermes makes is written back to the client as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, Optional

from gateway.config import Platform, PlatformConfig
from gateway.platforms.base import BasePlatformAdapter, MessageEvent, MessageType, SendResult


class ProbeAdapter(BasePlatformAdapter):
    def __init__(self, config: PlatformConfig) -> None:
        super().__init__(config, Platform("probe"))
        self._server: Optional[asyncio.base_events.Server] = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._next_id = 0

    async def connect(self, *, is_reconnect: bool = False) -> bool:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        home = Path(os.environ["HERMES_HOME"])
        (home / "probe.port").write_text(str(port))
        self._mark_connected()
        return True

    async def disconnect(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._mark_disconnected()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while line := await reader.readline():
                msg = json.loads(line)
                source = self.build_source(
                    chat_id=msg["chat"], chat_type="dm", user_id=msg["user"], user_name=msg["user"]
                )
                self._next_id += 1
                event = MessageEvent(
                    text=msg["text"],
                    message_type=MessageType.TEXT,
                    source=source,
                    message_id=f"in-{self._next_id}",
                )
                await self.handle_message(event)
        finally:
            self._writers.discard(writer)

    def _emit(self, call: str, **fields: Any) -> None:
        line = json.dumps({"call": call, **fields}, default=str) + "\n"
        for writer in list(self._writers):
            writer.write(line.encode())

    async def send(
        self,
        chat_id: str,
        content: str,
        reply_to: Optional[str] = None,
        metadata: Optional[dict[str, Any]] = None,
    ) -> SendResult:
        self._next_id += 1
        message_id = f"out-{self._next_id}"
        self._emit("send", chat_id=chat_id, content=content, metadata=metadata, message_id=message_id)
        return SendResult(success=True, message_id=message_id)

    async def edit_message(
        self, chat_id: str, message_id: str, content: str, *, finalize: bool = False
    ) -> SendResult:
        self._emit("edit", chat_id=chat_id, message_id=message_id, content=content, finalize=finalize)
        return SendResult(success=True, message_id=message_id)

    async def on_processing_start(self, event: MessageEvent) -> None:
        self._emit("processing_start", chat_id=event.source.chat_id)

    async def on_processing_complete(self, event: MessageEvent, outcome: Any) -> None:
        self._emit("processing_complete", chat_id=event.source.chat_id, outcome=outcome.value)

    async def get_chat_info(self, chat_id: str) -> dict[str, Any]:
        return {"name": chat_id, "type": "dm"}


def register(ctx: Any) -> None:
    ctx.register_platform(
        name="probe",
        label="Probe",
        adapter_factory=ProbeAdapter,
        check_fn=lambda: True,
        is_connected=lambda cfg: True,
        allow_all_env="PROBE_ALLOW_ALL_USERS",
        allowed_users_env="PROBE_ALLOWED_USERS",
        cron_deliver_env_var="PROBE_HOME_CHANNEL",
    )
