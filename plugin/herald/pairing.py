"""Who may talk to the agent: herald's questions answered from Hermes's own rules.

herald asks the plugin whether a user is authorized, for a pairing code to show on a
device, and (from its console) to approve, list or revoke pairings. The answers come from
Hermes: its allow-all flags and allowlists, and its pairing store, the one ``hermes
pairing approve`` writes. Changes made by that command are polled and passed to herald.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Optional

from . import compat
from .bridge import BridgeError
from .wire import Answer, HermesUser, IssuedCode, Question

if TYPE_CHECKING:
    from .adapter import HeraldAdapter

APPROVAL_POLL_S = 1.0


class Pairing:
    """One platform's access decisions, and the watch on Hermes's pairing store."""

    def __init__(self, adapter: HeraldAdapter, claim_home: Callable[[str], None]) -> None:
        self._adapter = adapter
        self._platform = adapter.platform_name
        # auto_home, for a gadget approved outside the gateway.
        self._claim_home = claim_home
        self._watcher: Optional[asyncio.Task[None]] = None

    async def answer(self, question: Question) -> Answer:
        if question["op"] == "is_authorized":
            return {"authorized": self.is_authorized(question["args"]["user_id"])}
        if question["op"] == "revoke_pairing":
            return {"revoked": self.revoke(question["args"]["user_id"])}
        if question["op"] == "pairing_code":
            args = question["args"]
            return self.code(args["user_id"], args.get("user_name", ""))
        if question["op"] == "pairings":
            return {"approved": self.store().list_approved(self._platform)}
        return {"approved": self.approve(question["args"]["code"])}

    def store(self) -> Any:
        store = compat.pairing_store(self._adapter.gateway_runner)
        if store is None:
            raise BridgeError("unavailable", "Hermes is not ready")
        return store

    def is_authorized(self, user_id: str) -> bool:
        """Hermes's own decision: allow-all flags, allowlists, its pairing store."""
        runner = self._adapter.gateway_runner
        if runner is None or not user_id:
            return False
        source = self._adapter.build_source(chat_id=user_id, chat_type="dm", user_id=user_id)
        return compat.is_user_authorized(runner, source)

    def code(self, user_id: str, user_name: str) -> IssuedCode:
        """A code from Hermes's pairing flow, for ``hermes pairing approve``."""
        runner = self._adapter.gateway_runner
        if runner is None:
            raise BridgeError("unavailable", "Hermes is not ready")
        if compat.unauthorized_dm_behavior(runner, self._adapter.platform) != "pair":
            raise BridgeError("denied", f"pairing is off for {self._platform}")
        code = self.store().generate_code(self._platform, user_id, user_name)
        if not code:
            raise BridgeError("unavailable", "Too many pairing requests right now; try again later.")
        return {
            "code": code,
            "command": f"hermes pairing approve {self._platform} {code}",
            "ttl_s": compat.pairing_code_ttl_s(),
        }

    def approve(self, code: str) -> Optional[HermesUser]:
        """The console's approve: ``hermes pairing approve`` with a code herald showed."""
        store = self.store()
        approved: Optional[HermesUser] = store.approve_code(self._platform, code)
        if approved is None and compat.pairing_locked_out(store, self._platform):
            raise BridgeError(
                "unavailable",
                f"Hermes refuses {self._platform} approvals for now, after too many wrong codes",
            )
        return approved

    def revoke(self, user_id: str) -> bool:
        """The console's deny or revoke: the user's waiting code and approval both go."""
        store = self.store()
        waited = compat.drop_pending(store, self._platform, user_id)
        return store.revoke(self._platform, user_id) or waited

    def watch(self) -> None:
        self._watcher = asyncio.create_task(self._watch_approvals())

    def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None

    async def _watch_approvals(self) -> None:
        """Tell herald when ``hermes pairing approve|revoke`` changed someone's access.

        Those commands run in their own process and only write the pairing store, so
        polling it is the one way to hear about them. The files are read on a worker
        thread: a slow disk must not hold up the event loop every device's turn runs on.
        """
        store = compat.pairing_store(self._adapter.gateway_runner)
        if store is None:
            return
        known = await asyncio.to_thread(approved_users, store, self._platform)
        while True:
            await asyncio.sleep(APPROVAL_POLL_S)
            current = await asyncio.to_thread(approved_users, store, self._platform)
            for user_id in sorted(current ^ known):
                authorized = self.is_authorized(user_id)
                await self._adapter.bridge.request_quietly(
                    {
                        "op": "set_authorized",
                        "args": {"platform": self._platform, "user_id": user_id, "authorized": authorized},
                    }
                )
                # A gadget's user id is its chat; a phone's is its owner, so a phone
                # becomes home when it first talks.
                if self._platform == "gadget" and user_id in current:
                    self._claim_home(user_id)
            known = current


def approved_users(store: Any, platform: str) -> set[str]:
    return {str(entry.get("user_id", "")) for entry in store.list_approved(platform)}
