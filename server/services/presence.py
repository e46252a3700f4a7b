"""Presence: which of the user's devices have a session open, whether it is in view, and whether its composer is
being typed in. Ephemeral: never in a log, never in the database.

**Entries.** A client reports its state with ``presence.update {sessionId, visible, focused, typing}``; each
client is one entry, keyed by its WebSocket connection (over HTTP: by its device). An entry lives
``CHATSYNC_PRESENCE_TTL_SECONDS`` from its last update, so a client refreshes it every third of that (the
reply says when) while it has the session open. It goes at once when the client says so (``presence.leave``)
or its WebSocket closes, and at the latest when it expires: a device that vanishes without a word (its network
gone, its replica killed) drops out within the TTL plus one refresh of the watchers (``REFRESH_SECONDS`` at
most), 25 s with the defaults. The entries live in the bus's presence store (``pubsub.presence``), which every
replica shares.

**Watching.** ``presence.watch {sessionId}`` gives the session's current set at once and then every change, on
whichever replica it happened: each change is published on the session's presence channel of the bus
(:func:`channel`) with the whole set and its version, and a set older than one already given is dropped. Each
process with watchers also reads the sets it watches every :data:`REFRESH_SECONDS` (or half the TTL), which is
how expired entries and changes a bus outage dropped reach them. Draft changes (``services.drafts``) travel on
the same channel.

**Bounded cost.** A client's changes are published at most once per :data:`PUBLISH_INTERVAL_SECONDS` per
session; a change inside that interval is published at its end, with whatever is newest then. A refresh that
changes nothing is not published at all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..domain import outputs
from ..domain.events import EventEnvelope, dumps
from ..protocol.errors import RpcError
from ..pubsub.base import Bus
from ..pubsub.presence import PresenceSet, PresenceStore
from ..store import repo
from ..store.db import Database
from ..store.models import User
from ..sync.hub import Hub
from .unread import UnreadService

log = logging.getLogger(__name__)

PUBLISH_INTERVAL_SECONDS = 1.0
REFRESH_SECONDS = 5.0

SendItem = Callable[[str | None, Any], None]


def channel(session_id: str) -> str:
    """The bus channel of a session's presence and draft changes (session ids are UUIDs: names never meet)."""
    return f"@presence:{session_id}"


@dataclass(eq=False)
class _Watcher:
    send_item: SendItem
    own_key: str
    version: int = -1


@dataclass
class _Mine:
    """A client entry written through this process: what it last said, and its publishing schedule."""

    state: tuple[Any, ...] = ()
    published: float = float("-inf")  # monotonic time of its last publish
    timer: asyncio.TimerHandle | None = None
    updated: float = field(default_factory=time.monotonic)


class PresenceService:
    """Which devices of the user have a session open, in view, or typing; and the watchers told of every
    change (module docstring)."""

    def __init__(
        self,
        db: Database,
        bus: Bus,
        hub: Hub,
        store: PresenceStore,
        unread: UnreadService,
        ttl_seconds: float,
    ) -> None:
        self.db = db
        self.bus = bus
        self.hub = hub
        self.store = store
        self.unread = unread
        self.ttl = ttl_seconds
        self.refresh_seconds = min(REFRESH_SECONDS, ttl_seconds / 2)
        self._mine: dict[tuple[str, str], _Mine] = {}
        self._sessions_of: dict[str, set[str]] = {}  # client key -> sessions it has entries in
        self._closing: set[str] = set()  # connections that will tell :meth:`forget` when they close
        self._watchers: dict[str, set[_Watcher]] = {}
        self._versions: dict[str, int] = {}  # newest set version seen per watched session
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._refresher: asyncio.Task[None] | None = None

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._refresher = asyncio.create_task(self._refresh_forever(), name="presence-refresh")

    async def stop(self) -> None:
        for task in [self._refresher, *self._tasks]:
            if task is not None:
                task.cancel()
        for task in [self._refresher, *self._tasks]:
            if task is not None:
                with suppress(BaseException):  # stopping: whatever it ended with is moot
                    await task
        for mine in self._mine.values():
            if mine.timer is not None:
                mine.timer.cancel()

    # --- what clients say ---------------------------------------------------------------------------------

    async def owned(self, user: User, session_id: str) -> None:
        """``NOT_FOUND`` unless the session is the user's and live (presence is among the owner's devices)."""
        owner = self.hub.owners.get(session_id)
        if owner is None:
            async with self.db.read() as s:
                row = await repo.get_session(s, session_id)
            if row is None:
                raise RpcError("NOT_FOUND", "Session not found")
            owner = row.owner_id
            self.hub.owners.put(session_id, owner)
        if owner != user.id:
            raise RpcError("NOT_FOUND", "Session not found")

    async def update(
        self,
        user: User,
        session_id: str,
        key: str,
        device: tuple[str | None, str | None],
        visible: bool,
        focused: bool,
        typing: bool,
    ) -> outputs.PresenceTimes:
        """Write the client's entry; publish it if it changed (at most once a second); a session coming into
        view is read (``services.unread``)."""
        await self.owned(user, session_id)
        device_id, device_name = device
        entry = {
            "deviceId": device_id,
            "deviceName": device_name or "",
            "visible": visible,
            "focused": focused and visible,
            "typing": typing,
        }
        current = await self.store.put(session_id, key, entry, self.ttl)
        mine = self._mine.get((session_id, key))
        came_into_view = visible and (mine is None or not mine.state or not mine.state[0])
        if mine is None:
            mine = self._mine[(session_id, key)] = _Mine()
            self._sessions_of.setdefault(key, set()).add(session_id)
        mine.updated = time.monotonic()
        state = (visible, entry["focused"], typing, entry["deviceName"])
        if state != mine.state:
            mine.state = state
            await self._changed(session_id, mine, current)
        if came_into_view:
            try:
                await self.unread.mark_read(user, session_id)
            except Exception:
                log.warning("marking %s read failed", session_id, exc_info=True)
        return {"ttlSeconds": self.ttl, "heartbeatSeconds": round(self.ttl / 3, 3)}

    async def leave(self, session_id: str, key: str) -> None:
        """The client closed the session (or its connection): its entry goes now, and watchers hear of it."""
        mine = self._mine.pop((session_id, key), None)
        if mine is not None and mine.timer is not None:
            mine.timer.cancel()
        sessions = self._sessions_of.get(key)
        if sessions is not None:
            sessions.discard(session_id)
            if not sessions:
                del self._sessions_of[key]
        current = await self.store.remove(session_id, key)
        if current is not None:
            await self._publish_set(session_id, current)

    def closes_with(self, key: str) -> bool:
        """True the first time for a connection's key: the caller then has the connection call :meth:`forget`
        when it closes."""
        if key in self._closing:
            return False
        self._closing.add(key)
        return True

    async def forget(self, key: str) -> None:
        """A connection closed: every entry it wrote goes."""
        self._closing.discard(key)
        for session_id in list(self._sessions_of.get(key, ())):
            try:
                await self.leave(session_id, key)
            except Exception:  # the store unreachable: the entries expire by themselves
                log.warning("dropping presence of a closed connection failed", exc_info=True)

    async def visible(self, owner_id: str, session_id: str) -> bool:
        """Whether any device (of the owner: only the owner's devices write here) has the session in view."""
        current = await self.store.read(session_id)
        return any(e.get("visible") for e in current.entries.values())

    # --- publishing ---------------------------------------------------------------------------------------

    async def _changed(self, session_id: str, mine: _Mine, current: PresenceSet) -> None:
        wait = mine.published + PUBLISH_INTERVAL_SECONDS - time.monotonic()
        if mine.timer is not None:
            return  # a publish is due already; it will carry this change
        if wait <= 0:
            mine.published = time.monotonic()
            await self._publish_set(session_id, current)
            return

        def due() -> None:
            mine.timer = None
            mine.published = time.monotonic()
            self._spawn(self._publish_now(session_id))

        mine.timer = asyncio.get_running_loop().call_later(wait, due)

    async def _publish_now(self, session_id: str) -> None:
        await self._publish_set(session_id, await self.store.read(session_id))

    async def _publish_set(self, session_id: str, current: PresenceSet) -> None:
        body = dumps({"version": current.version, "entries": current.entries})
        await self.publish(session_id, "presence", body)

    async def publish(self, session_id: str, kind: str, body: str) -> None:
        """Send one item to every replica's watchers of the session (best effort: the refresh repairs it)."""
        name = channel(session_id)
        try:
            await self.bus.publish(name, (EventEnvelope(name, None, kind, body),))
        except Exception:
            log.warning("publishing presence of %s failed", session_id, exc_info=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- watching -----------------------------------------------------------------------------------------

    def watch(self, session_id: str, own_key: str, first: list[dict[str, Any]]) -> PresenceWatch:
        return PresenceWatch(self, session_id, own_key, first)

    async def serve_watch(
        self, session_id: str, own_key: str, first: list[dict[str, Any]], send_item: SendItem
    ) -> None:
        """One watcher, until cancelled (the subscription is stopped): the items in ``first``, the session's set
        now, then every change (a set is given once, and never one older than the watcher has)."""
        watcher = _Watcher(send_item, own_key)
        await self._attach(session_id, watcher)
        try:
            for item in first:
                send_item(None, item)
            current = await self.store.read(session_id)
            self._give(session_id, watcher, current)
            self._offer(session_id, current)
            await asyncio.get_running_loop().create_future()  # until the subscription is stopped
        finally:
            await self._detach(session_id, watcher)

    async def _attach(self, session_id: str, watcher: _Watcher) -> None:
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            watchers = self._watchers.get(session_id)
            if watchers is None:
                name = channel(session_id)
                self.hub.channel_handlers[name] = lambda events: self._on_bus(session_id, events)
                await self.bus.subscribe(name)
                watchers = self._watchers[session_id] = set()
            watchers.add(watcher)

    async def _detach(self, session_id: str, watcher: _Watcher) -> None:
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            watchers = self._watchers.get(session_id)
            if watchers is None:
                return
            watchers.discard(watcher)
            if not watchers:
                del self._watchers[session_id]
                self._versions.pop(session_id, None)
                name = channel(session_id)
                self.hub.channel_handlers.pop(name, None)
                try:
                    await self.bus.unsubscribe(name)
                except Exception:
                    log.warning("unsubscribing presence of %s failed", session_id, exc_info=True)
        if not lock.locked() and session_id not in self._watchers:
            self._locks.pop(session_id, None)

    def _on_bus(self, session_id: str, events: Any) -> None:
        for env in events:
            try:
                body = orjson.loads(env.json)
            except Exception:
                continue
            if env.type == "presence":
                self._offer(session_id, PresenceSet(int(body.get("version", 0)), body.get("entries") or {}))
            elif env.type == "draft":
                for watcher in tuple(self._watchers.get(session_id, ())):
                    _safe_send(watcher, {"type": "draft", "sessionId": session_id, "draft": body})

    def _offer(self, session_id: str, current: PresenceSet) -> None:
        """Give watchers ``current`` unless they have a newer set already."""
        if current.version <= self._versions.get(session_id, -1):
            return
        self._versions[session_id] = current.version
        for watcher in tuple(self._watchers.get(session_id, ())):
            self._give(session_id, watcher, current)

    def _give(self, session_id: str, watcher: _Watcher, current: PresenceSet) -> None:
        if current.version <= watcher.version:
            return
        watcher.version = current.version
        _safe_send(watcher, render(session_id, current, watcher.own_key))

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_seconds)
            try:
                await self.refresh_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("refreshing presence failed", exc_info=True)

    async def refresh_once(self) -> None:
        """Read every watched session's set (expired entries drop out here) and forget stale bookkeeping."""
        for session_id in list(self._watchers):
            self._offer(session_id, await self.store.read(session_id))
        stale = time.monotonic() - self.ttl
        for (session_id, key), mine in list(self._mine.items()):
            if mine.updated < stale and mine.timer is None:
                self._mine.pop((session_id, key), None)
                sessions = self._sessions_of.get(key)
                if sessions is not None:
                    sessions.discard(session_id)
                    if not sessions:
                        del self._sessions_of[key]


class PresenceWatch:
    """``presence.watch``: the items in ``first`` (the draft), the session's set now, then every change."""

    def __init__(self, service: PresenceService, session_id: str, own_key: str, first: list[dict[str, Any]]) -> None:
        self.service = service
        self.session_id = session_id
        self.own_key = own_key
        self.first = first

    async def run(self, send_item: SendItem, writer: Any = None) -> None:
        await self.service.serve_watch(self.session_id, self.own_key, self.first, send_item)


def render(session_id: str, current: PresenceSet, own_key: str) -> dict[str, Any]:
    """A set as a watcher gets it: ``current`` marks the watcher's own entry."""
    devices = [
        {
            "deviceId": entry.get("deviceId"),
            "deviceName": entry.get("deviceName", ""),
            "visible": bool(entry.get("visible")),
            "focused": bool(entry.get("focused")),
            "typing": bool(entry.get("typing")),
            "current": key == own_key,
        }
        for key, entry in sorted(current.entries.items())
    ]
    return {"type": "presence", "sessionId": session_id, "devices": devices}


def _safe_send(watcher: _Watcher, item: dict[str, Any]) -> None:
    try:
        watcher.send_item(None, item)
    except Exception:
        log.warning("a presence watcher could not be told", exc_info=True)
