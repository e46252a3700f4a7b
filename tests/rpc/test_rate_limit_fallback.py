"""The shared rate limit's fallback, in process: a shared store that does not answer in time, or fails, sends
the process to its own buckets for a while, then the shared store is asked again."""

from __future__ import annotations

import asyncio

import pytest

from server.protocol.errors import RpcError
from server.rpc import limits
from server.rpc.limits import SharedRateLimiter

pytestmark = pytest.mark.fast


class Store:
    """A shared store that hangs, fails or answers, as the test says."""

    def __init__(self) -> None:
        self.mode = "hang"
        self.calls = 0

    async def take(self, name: str, n: int, rate: float, burst: int) -> int:
        self.calls += 1
        if self.mode == "hang":
            await asyncio.Event().wait()
        if self.mode == "fail":
            raise ConnectionError("refused")
        return 0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_store_that_does_not_answer_in_time_hands_over_to_the_own_buckets(monkeypatch):
    monkeypatch.setattr(limits, "SHARED_TIMEOUT_SECONDS", 0.01)
    store, clock = Store(), Clock()
    limiter = SharedRateLimiter(rate=0.001, burst=2, shared=store, clock=clock)  # type: ignore[arg-type]

    await limiter.admit("alice")  # the store hangs: the own bucket (2) pays
    assert (limiter.fallbacks, store.calls) == (1, 1)
    await limiter.admit("alice")  # within the retry window the store is not asked again
    assert store.calls == 1
    with pytest.raises(RpcError) as refused:
        await limiter.admit("alice")
    assert refused.value.code == "TOO_MANY_REQUESTS"

    # After the retry window the store is asked again; it answers, and the own (empty) bucket is not charged.
    store.mode = "answer"
    clock.now += limits.SHARED_RETRY_SECONDS
    await limiter.admit("alice")
    assert (store.calls, limiter.fallbacks) == (2, 1)


async def test_a_failing_store_falls_back_without_waiting_for_the_timeout(monkeypatch):
    monkeypatch.setattr(limits, "SHARED_TIMEOUT_SECONDS", 3600.0)
    store, clock = Store(), Clock()
    store.mode = "fail"
    limiter = SharedRateLimiter(rate=0.001, burst=1, shared=store, clock=clock)  # type: ignore[arg-type]
    async with asyncio.timeout(60):  # a failure is not waited out: it falls back at once
        await limiter.admit("bob")
    assert limiter.fallbacks == 1
    with pytest.raises(RpcError):
        await limiter.admit("bob")
