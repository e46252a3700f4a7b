"""The rate limit on a Redis bus: one bucket per user for every replica while Redis answers; each process's own
bucket while it does not (never an error of the server's); the shared bucket again once Redis is back."""

from __future__ import annotations

import asyncio

import pytest
from concurrent_calls import Answer, all_at_once, codes
from testkit import PrivateRedis

from server.rpc import limits

BURST = 5
RATE = 0.001  # no token comes back during the test


@pytest.fixture
def private_redis():
    r = PrivateRedis()
    r.start()
    yield r
    r.kill()


async def test_replicas_fall_back_to_their_own_buckets_while_redis_is_away(
    pg_url, server_factory, private_redis, monkeypatch
):
    # What is tested here is an unreachable Redis (refused at once), not a slow one: on a busy host the first
    # takes (a dozen new connections at once) can outlast the product's one-second wait and fall back early.
    monkeypatch.setattr(limits, "SHARED_TIMEOUT_SECONDS", 30.0)
    settings = {"bus_url": private_redis.url, "rate_limit_per_second": RATE, "rate_limit_burst": BURST}
    first = await server_factory(pg_url, users=("alice",), **settings)
    second = await server_factory(pg_url, users=("alice",), tokens=first.tokens, **settings)
    token = first.tokens["alice"]

    def creates(urls: list[str], n: int) -> list[tuple[str, str, str, dict[str, str]]]:
        return [(urls[i % len(urls)], token, "session.create", {}) for i in range(n)]

    # Redis answers: the two processes share one bucket of BURST.
    answers = await all_at_once(creates([first.url, second.url], 12))
    assert codes(answers) == {None: BURST, "TOO_MANY_REQUESTS": 12 - BURST}

    # Redis is away: each process limits on its own, from its own full bucket.
    private_redis.kill()
    for live in (first, second):
        answers = await all_at_once(creates([live.url], 8))
        assert codes(answers) == {None: BURST, "TOO_MANY_REQUESTS": 8 - BURST}
        assert live.services.limiter.fallbacks >= 1

    # Redis is back (empty): the processes' own buckets are spent, so what passes now came from the shared one.
    private_redis.start()
    async with asyncio.timeout(30):
        while not (await all_at_once(creates([first.url], 1)))[0].ok:
            await asyncio.sleep(0.1)
    later: list[Answer] = await all_at_once(creates([first.url, second.url], 10))
    assert codes(later)[None] == BURST - 1
    assert set(codes(later)) == {None, "TOO_MANY_REQUESTS"}
