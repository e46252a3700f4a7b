"""The heartbeats of a process's runs, written together (``services.lease.Heartbeats``): one write per tick renews
every lease it names, and each run learns on its own whether its lease is still its own and whether an abort was
asked for."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from sqlalchemy import update

from server.rpc.context import Services
from server.services.lease import Heartbeats, LeaseLost
from server.store.models import ChatSession, User, utcnow

OWNER = "this-process"


async def _running(services: Services, user: User, run_id: str, owner: str, abort: bool = False) -> str:
    """A session whose run ``run_id`` is driven by ``owner``, its lease live for a few seconds more (the sweeper
    leaves it alone)."""
    sid: str = (await services.sessions.create(user, {})).id
    async with services.db.write() as s:
        await s.execute(
            update(ChatSession)
            .where(ChatSession.id == sid)
            .values(
                run_id=run_id,
                status="running",
                lease_owner=owner,
                lease_expires_at=utcnow() + timedelta(seconds=5),
                abort_requested=abort,
            )
        )
    return sid


async def _lease(services: Services, sid: str) -> Any:
    async with services.db.read() as s:
        row = await s.get(ChatSession, sid)
        assert row is not None
        return row.lease_expires_at


async def test_one_write_renews_every_lease_named_and_fences_each_run(services: Services, alice: User) -> None:
    mine = await _running(services, alice, "run-1", OWNER)
    aborted = await _running(services, alice, "run-2", OWNER, abort=True)
    taken = await _running(services, alice, "run-3", "another-process")
    before = {sid: await _lease(services, sid) for sid in (mine, aborted, taken)}
    writes = 0
    write = services.db.write

    def counting(**kwargs: Any) -> Any:
        nonlocal writes
        writes += 1
        return write(**kwargs)

    services.db.write = counting  # type: ignore[method-assign]
    beats = Heartbeats(services.db, OWNER, 30)
    results = await asyncio.gather(
        beats.beat(mine, "run-1", None),
        beats.beat(aborted, "run-2", None),
        beats.beat(taken, "run-3", None),
        beats.beat(mine, "a-run-that-ended", None),
        return_exceptions=True,
    )
    services.db.write = write  # type: ignore[method-assign]

    assert results[0] is False and results[1] is True
    assert isinstance(results[2], LeaseLost) and isinstance(results[3], LeaseLost)
    assert writes == 1
    assert await _lease(services, mine) > before[mine] and await _lease(services, aborted) > before[aborted]
    assert await _lease(services, taken) == before[taken]  # someone else's lease is left alone


async def test_a_loop_that_stops_waiting_does_not_hold_up_the_others(services: Services, alice: User) -> None:
    first = await _running(services, alice, "run-1", OWNER)
    second = await _running(services, alice, "run-2", OWNER)
    lease_before = await _lease(services, second)
    beats = Heartbeats(services.db, OWNER, 30)
    stopped = asyncio.create_task(beats.beat(first, "run-1", None))
    waiting = asyncio.create_task(beats.beat(second, "run-2", None))
    await asyncio.sleep(0)  # both handed in their beat
    stopped.cancel()
    assert await waiting is False
    assert await _lease(services, second) > lease_before
