"""Calls the services tests share: waiting for an observable condition, and what a session's event log holds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from server.rpc.context import Services
from server.store import eventlog
from server.store.models import User

T = TypeVar("T")


async def until(check: Callable[[], Awaitable[T | None]], timeout: float = 10) -> T:
    """Polls ``check`` until it returns something other than None or False (an observable condition)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await check()
        if got is not None and got is not False:
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{check.__qualname__} did not hold within {timeout} s")
        await asyncio.sleep(0.005)


async def event_types(services: Services, session_id: str, after: int = 0) -> list[str]:
    """The types of the session's logged events after seq ``after``, in order."""
    async with services.db.read() as s:
        rows = await eventlog.events_after(s, session_id, after, 10_000)
    return [row.type for row in rows]


async def last_seq(services: Services, session_id: str) -> int:
    async with services.db.read() as s:
        rows = await eventlog.events_after(s, session_id, 0, 100_000)
    return rows[-1].seq if rows else 0


def idle(services: Services, user: User, session_id: str) -> Callable[[], Awaitable[Any]]:
    """A check for :func:`until`: the session's snapshot once no run is in progress."""

    async def check() -> Any:
        snap = await services.sessions.snapshot(user, session_id)
        return snap if snap.run is None else None

    return check
