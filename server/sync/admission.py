"""Admission for subscribe and resume bursts: what a resume reads, and how many read at once.

When every client reconnects at once (a replica restarted, a load balancer dropped its connections) each one
checks its token, checks it may read the session, and reads the log after its ``lastEventId``. Unbounded,
thousands of those reads ask the connection pool for a connection together: on PostgreSQL the ones past the
pool's size wait ``pool_timeout`` and fail (``SERVICE_UNAVAILABLE``), and writers (the sessions still
streaming) find the pool empty too.

* :func:`resume_read` is a read transaction that first takes a place in a per-database semaphore sized from
  the pool (:func:`read_limit`): a burst queues on the loop, in order, instead of on the pool, and a third of
  the pool is always left to writers and to everything else. Nothing here fails because the burst is large.
* :class:`OwnerCache` remembers which user owns a session. The owner of a session never changes, so an entry
  can only go stale by the session being deleted; a resume that found its session here skips its own read
  and the delivery checks that the session is live in the transaction that reads its log anyway
  (``Delivery(verify_live=True)``), so a deleted session is never subscribable through the cache.
* The token -> principal cache is :class:`server.services.auth.AuthService`'s (revocations evict from it).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..store.db import Database

# At most this many cached owners (a UUID and a user id each, ~200 bytes): far more than the sessions a
# process serves at once; the oldest go first.
OWNER_CACHE_SIZE = 200_000

_gates: weakref.WeakKeyDictionary[Database, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def read_limit(db: Database) -> int:
    """How many resume reads may hold a pooled connection at once: two thirds of the pool's capacity
    (``pool_size + max_overflow``), at least one."""
    pool: Any = db.read_engine.pool
    try:
        capacity = int(pool.size()) + max(0, int(getattr(pool, "_max_overflow", 0)))
    except (AttributeError, TypeError):  # a pool without a size (StaticPool, NullPool): be conservative
        capacity = 6
    return max(1, capacity * 2 // 3)


def gate(db: Database) -> asyncio.Semaphore:
    """The resume-read semaphore of ``db`` (one per Database, made on first use)."""
    sem = _gates.get(db)
    if sem is None:
        sem = _gates[db] = asyncio.Semaphore(read_limit(db))
    return sem


@asynccontextmanager
async def resume_read(db: Database) -> AsyncIterator[Any]:
    """``db.read()`` after waiting for a place among :func:`read_limit` concurrent resume reads."""
    async with gate(db), db.read() as s:
        yield s


class OwnerCache:
    """session id -> owner's user id, for sessions this process has seen subscribed to (bounded, FIFO)."""

    __slots__ = ("_owners", "size")

    def __init__(self, size: int = OWNER_CACHE_SIZE) -> None:
        self._owners: dict[str, str] = {}
        self.size = size

    def get(self, session_id: str) -> str | None:
        return self._owners.get(session_id)

    def put(self, session_id: str, owner_id: str) -> None:
        owners = self._owners
        if session_id not in owners and len(owners) >= self.size:
            del owners[next(iter(owners))]
        owners[session_id] = owner_id

    def forget(self, session_id: str) -> None:
        self._owners.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._owners)
