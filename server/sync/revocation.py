"""Closing what a revoked token opened, on every replica.

Each process keeps which of its live connections (WebSockets, SSE streams) signed in with which device. A
revocation commits ``revoked_at`` (or deletes the user), then publishes the device ids on the bus's
:data:`CHANNEL`, which every process subscribes to at start; each closes its own connections of those
devices at once: a WebSocket with close code 4503 (``TOKEN_REVOKED``: do not reconnect as is), an SSE
stream with an ``UNAUTHORIZED`` error.

The bus does not reach every revoker (``chatsync tokens revoke`` runs in a process of its own, maybe with
no networked bus) and is best effort (a Redis outage can drop the message). So each process also reads the
tokens revoked recently every :data:`POLL_SECONDS` (one indexed query, whatever the number of connections),
and every :data:`FULL_CHECK_SECONDS` asks which of its connected devices are no longer live at all (a
deleted user's tokens are gone, not marked): a revocation takes effect within a second, and one that slipped
past both within half a minute, never not at all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import select

from ..domain.events import EventEnvelope, dumps
from ..pubsub.base import Bus
from ..store.db import Database
from ..store.models import ApiToken, utcnow

log = logging.getLogger(__name__)

CHANNEL = "@devices"  # a bus channel no session id can be (those are UUIDs)
POLL_SECONDS = 1.0
FULL_CHECK_SECONDS = 30.0
# Revocations are looked for this far back from the previous poll (clocks of replicas differ a little;
# closing a device twice is harmless).
POLL_OVERLAP = timedelta(seconds=10)
_CHECK_CHUNK = 500

Closer = Callable[[], None]
"""Ends one connection because its device was revoked; must not block."""


class DeviceConnections:
    """This process's connections by device, and the closing of revoked ones."""

    def __init__(self, db: Database, bus: Bus, poll_seconds: float = POLL_SECONDS) -> None:
        self.db = db
        self.bus = bus
        self.poll_seconds = poll_seconds
        self._by_device: dict[str, set[Closer]] = {}
        self._task: asyncio.Task[None] | None = None
        # Told every device id found revoked (by the bus or a poll), connected here or not: the token cache
        # (``AuthService.forget_devices``) evicts them.
        self.listeners: list[Callable[[list[str]], None]] = []
        # Woken when a user's devices or pending links change (``auth.watchDevices``), by user id.
        self._watchers: dict[str, set[Callable[[], None]]] = {}

    # --- connections register themselves ------------------------------------------------------------

    def add(self, device_id: str, closer: Closer) -> None:
        self._by_device.setdefault(device_id, set()).add(closer)

    def discard(self, device_id: str, closer: Closer) -> None:
        closers = self._by_device.get(device_id)
        if closers is not None:
            closers.discard(closer)
            if not closers:
                del self._by_device[device_id]

    def close_local(self, device_ids: list[str]) -> int:
        """Close this process's connections of ``device_ids``; returns how many."""
        for listener in self.listeners if device_ids else ():
            try:
                listener(device_ids)
            except Exception:
                log.warning("a revocation listener failed", exc_info=True)
        closed = 0
        for device_id in device_ids:
            for closer in list(self._by_device.pop(device_id, ())):
                try:
                    closer()
                    closed += 1
                except Exception:
                    log.warning("closing a connection of revoked device %s failed", device_id, exc_info=True)
        return closed

    # --- revocations ------------------------------------------------------------------------------------

    async def revoked(self, device_ids: list[str]) -> None:
        """Called after the revoking transaction committed: close here at once, then tell the others."""
        self.close_local(device_ids)
        env = EventEnvelope(CHANNEL, None, "devices-revoked", dumps({"deviceIds": device_ids}))
        try:
            await self.bus.publish(CHANNEL, (env,))
        except Exception:  # the periodic check closes them on the other replicas
            log.warning(
                "publishing a revocation failed; other replicas close within %.0f s", self.poll_seconds, exc_info=True
            )

    def on_bus(self, events: Any) -> None:
        for env in events:
            try:
                body = orjson.loads(env.json)
            except Exception:
                continue
            if env.type == "devices-changed":
                self._wake(str(body.get("userId")))
            else:
                self.close_local([str(i) for i in body.get("deviceIds") or []])

    # --- watching a user's devices ------------------------------------------------------------------------

    def watch(self, user_id: str, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` whenever ``user_id``'s devices or links change, on any replica; returns the unwatch."""
        self._watchers.setdefault(user_id, set()).add(wake)

        def unwatch() -> None:
            watchers = self._watchers.get(user_id)
            if watchers is not None:
                watchers.discard(wake)
                if not watchers:
                    del self._watchers[user_id]

        return unwatch

    def _wake(self, user_id: str) -> None:
        for wake in tuple(self._watchers.get(user_id, ())):
            try:
                wake()
            except Exception:
                log.warning("a device watcher could not be woken", exc_info=True)

    async def changed(self, user_id: str) -> None:
        """Called after a change to ``user_id``'s devices or links committed (a device signed in, renamed or
        revoked; a link made, spent or revoked): wakes the watchers here at once, then those of the others."""
        self._wake(user_id)
        env = EventEnvelope(CHANNEL, None, "devices-changed", dumps({"userId": user_id}))
        try:
            await self.bus.publish(CHANNEL, (env,))
        except Exception:  # best effort: a watcher on another replica sees it at its next change
            log.warning("publishing a device change failed", exc_info=True)

    async def start(self) -> None:
        await self.bus.subscribe(CHANNEL)
        self._task = asyncio.create_task(self._check_forever(), name="device-check")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def poll_once(self, since: datetime) -> int:
        """Close connections of devices revoked at or after ``since``; returns how many."""
        if not self._by_device and not self.listeners:
            return 0
        async with self.db.read() as s:
            ids = list((await s.execute(select(ApiToken.id).where(ApiToken.revoked_at >= since))).scalars())
        if ids:
            for listener in self.listeners:
                listener(ids)
        return self.close_local([i for i in ids if i in self._by_device]) if self._by_device else 0

    async def check_once(self) -> int:
        """Close connections whose device is no longer live in the database; returns how many."""
        connected = list(self._by_device)
        gone: list[str] = []
        for i in range(0, len(connected), _CHECK_CHUNK):
            chunk = connected[i : i + _CHECK_CHUNK]
            async with self.db.read() as s:
                live = set(
                    (
                        await s.execute(
                            select(ApiToken.id).where(ApiToken.id.in_(chunk), ApiToken.revoked_at.is_(None))
                        )
                    ).scalars()
                )
            gone += [d for d in chunk if d not in live]
        return self.close_local(gone) if gone else 0

    async def _check_forever(self) -> None:
        since = utcnow() - POLL_OVERLAP
        next_full = time.monotonic() + FULL_CHECK_SECONDS
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                now = utcnow()
                await self.poll_once(since)
                since = now - POLL_OVERLAP
                if time.monotonic() >= next_full:
                    next_full = time.monotonic() + FULL_CHECK_SECONDS
                    await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("checking connected devices failed", exc_info=True)
