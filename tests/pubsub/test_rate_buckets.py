"""The token buckets a bus shares between processes (``Bus.rate_buckets``): one Redis, and Redis Cluster."""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio as aioredis

from server.pubsub import create_bus
from server.pubsub.keys import rate_key


@pytest.fixture(params=["redis", "redis-cluster"])
def shared_bus_url(request):
    return request.getfixturevalue("redis_url" if request.param == "redis" else "redis_cluster_url")


async def test_a_bus_of_one_process_shares_no_buckets():
    bus = create_bus("memory://")
    await bus.connect()
    try:
        assert bus.rate_buckets() is None
    finally:
        await bus.disconnect()


async def test_two_processes_take_from_one_bucket(shared_bus_url):
    """Two buses (as two replicas would hold) take from the same bucket; past the burst both are refused with the
    wait until enough tokens are back; another name has a bucket of its own."""
    first, second = create_bus(shared_bus_url), create_bus(shared_bus_url)
    await first.connect()
    await second.connect()
    try:
        a, b = first.rate_buckets(), second.rate_buckets()
        assert a is not None and b is not None
        user = f"user-{uuid.uuid4().hex}"
        rate, burst = 0.5, 5  # two seconds a token: none comes back during the test
        assert await a.take(user, 2, rate, burst) == 0
        assert await b.take(user, 3, rate, burst) == 0
        wait = await a.take(user, 1, rate, burst)
        assert 0 < wait <= 2000
        wait_for_two = await b.take(user, 2, rate, burst)
        assert wait < wait_for_two <= 4000  # nothing was taken by the refusals
        assert await b.take(f"other-{user}", burst, rate, burst) == 0
        assert await a.take(f"other-{user}", 1, rate, burst) > 0
    finally:
        await first.disconnect()
        await second.disconnect()


async def test_a_bucket_expires_when_it_would_be_full_again(redis_url):
    bus = create_bus(redis_url)
    await bus.connect()
    try:
        buckets = bus.rate_buckets()
        assert buckets is not None
        user = f"user-{uuid.uuid4().hex}"
        assert await buckets.take(user, 1, 100.0, 10) == 0  # full again after 10 ms
        key = rate_key(bus.prefix, user)  # type: ignore[attr-defined]
        client = aioredis.Redis.from_url(redis_url.split("?")[0])
        try:
            ttl = await client.pttl(key)
            assert 0 < ttl <= 1010
        finally:
            await client.aclose()
    finally:
        await bus.disconnect()
