"""Who has a session open right now: the shared, short-lived presence entries of every replica.

Presence is never in a log. Each entry is one client's view of one session (``visible``, ``focused``,
``typing``, the device's id and name) with the time it expires (``expiresAt``, ms since the epoch): a client
refreshes it while it has the session open, and an entry nobody refreshed is gone once that time has passed,
whoever wrote it and whether or not its process still lives. Readers drop expired entries themselves.

Every write returns the session's whole set and a version that grows with each write, so a process that
hears of sets out of order keeps the newest (``services.presence``). The in-process store suits one process;
a Redis bus gives one every replica shares (``redis_presence.py``).
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from typing import Any


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class PresenceSet:
    """A session's live entries (key: the client's presence key) at ``version``."""

    version: int
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)


def live(entries: dict[str, dict[str, Any]], at_ms: int) -> dict[str, dict[str, Any]]:
    return {k: e for k, e in entries.items() if int(e.get("expiresAt", 0)) > at_ms}


class PresenceStore(abc.ABC):
    """Where every replica's presence entries meet; keyed by session (or any channel-like name)."""

    @abc.abstractmethod
    async def put(self, session_id: str, key: str, entry: dict[str, Any], ttl_seconds: float) -> PresenceSet:
        """Write ``key``'s entry (its ``expiresAt`` set from ``ttl_seconds``) and return the new set of live
        entries."""

    @abc.abstractmethod
    async def remove(self, session_id: str, key: str) -> PresenceSet | None:
        """Drop ``key``'s entry; the new set, or None when there was no such entry."""

    @abc.abstractmethod
    async def read(self, session_id: str) -> PresenceSet:
        """The session's set now."""


class MemoryPresence(PresenceStore):
    """One process's presence (``memory://``)."""

    def __init__(self) -> None:
        self._sets: dict[str, dict[str, dict[str, Any]]] = {}
        self._versions: dict[str, int] = {}

    def _bump(self, session_id: str) -> int:
        version = self._versions[session_id] = max(time.time_ns() // 1000, self._versions.get(session_id, 0) + 1)
        return version

    def _live(self, session_id: str) -> tuple[dict[str, dict[str, Any]], bool]:
        stored = self._sets.get(session_id, {})
        entries = live(stored, now_ms())
        if entries:
            self._sets[session_id] = entries
        else:
            self._sets.pop(session_id, None)
            self._versions.pop(session_id, None)  # versions follow the clock: a new one is past every old one
        return entries, len(entries) != len(stored)

    def _changed(self, session_id: str, entries: dict[str, dict[str, Any]]) -> PresenceSet:
        version = self._bump(session_id)
        if entries:
            self._sets[session_id] = entries
        return PresenceSet(version, dict(entries))

    async def put(self, session_id: str, key: str, entry: dict[str, Any], ttl_seconds: float) -> PresenceSet:
        entries, _ = self._live(session_id)
        entries[key] = {**entry, "expiresAt": now_ms() + int(ttl_seconds * 1000)}
        return self._changed(session_id, entries)

    async def remove(self, session_id: str, key: str) -> PresenceSet | None:
        entries, _ = self._live(session_id)
        if entries.pop(key, None) is None:
            return None
        return self._changed(session_id, entries)

    async def read(self, session_id: str) -> PresenceSet:
        entries, pruned = self._live(session_id)
        if pruned:
            return self._changed(session_id, entries)
        return PresenceSet(self._versions.get(session_id, 0), dict(entries))
