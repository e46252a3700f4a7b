"""The abort polls of a process's runs, read together (``engine.abort_poll.AbortPolls``): the polls of one tick
cost one read, and each run learns whether an abort of its own session was asked for."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import update

from server.engine.abort_poll import AbortPolls
from server.rpc.context import Services
from server.store.models import ChatSession, User

pytestmark = pytest.mark.fast


async def _session(services: Services, user: User, abort: bool) -> str:
    sid: str = (await services.sessions.create(user, {})).id
    if abort:
        async with services.db.write() as s:
            await s.execute(update(ChatSession).where(ChatSession.id == sid).values(abort_requested=True))
    return sid


async def test_the_polls_of_one_tick_are_one_read(services: Services, alice: User) -> None:
    calm = [await _session(services, alice, abort=False) for _ in range(3)]
    asked = await _session(services, alice, abort=True)
    polls = AbortPolls(services.db)
    answers = await asyncio.gather(*(polls.asked(sid) for sid in [*calm, asked, asked]))
    assert answers == [False, False, False, True, True]
    assert polls.reads == 1
    # A later tick reads again and sees what changed since.
    async with services.db.write() as s:
        await s.execute(update(ChatSession).where(ChatSession.id == asked).values(abort_requested=False))
    assert await polls.asked(asked) is False and polls.reads == 2


async def test_a_cancelled_poll_leaves_the_others_answered(services: Services, alice: User) -> None:
    asked = await _session(services, alice, abort=True)
    other = await _session(services, alice, abort=False)
    polls = AbortPolls(services.db)
    gone = asyncio.ensure_future(polls.asked(other))
    kept = asyncio.ensure_future(polls.asked(asked))
    await asyncio.sleep(0)  # both are pending on the same read
    gone.cancel()
    assert await kept is True
    assert gone.cancelled() and polls.reads == 1
