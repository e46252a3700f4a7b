"""Per-user rate limit on mutations (a token bucket per user); connection slots.

Every mutation (each call of a batch counts one) takes a token; a user whose bucket is empty gets
``TOO_MANY_REQUESTS`` with ``data.retryAfterMs``, and nothing changes. The bucket refills at ``rate`` tokens a
second up to ``burst``, so short bursts (a paste of many queued messages) pass and only a sustained flood is
refused.

Where the buckets live: with a bus shared by replicas (Redis), in Redis (:class:`SharedRateLimiter`), so a
user's mutations over every replica together stay within the rate and burst. Otherwise, and while Redis cannot
be reached, in each process (:class:`RateLimiter`; during an outage a user spread over ``n`` replicas may send
``n`` times the rate). A process's buckets are forgotten when full again, so its table holds only users who
sent recently.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

from ..protocol.errors import RpcError
from ..pubsub.buckets import RateBuckets

log = logging.getLogger(__name__)

MAX_TRACKED_USERS = 100_000
# How long a request waits for the shared bucket before this process uses its own, and how long it then keeps
# to its own before asking Redis again (so an unreachable Redis costs each request nothing after the first).
SHARED_TIMEOUT_SECONDS = 1.0
SHARED_RETRY_SECONDS = 2.0


def too_many(wait_ms: int) -> RpcError:
    return RpcError("TOO_MANY_REQUESTS", f"Too many requests; retry in {wait_ms} ms", retry_after_ms=wait_ms)


class RateLimiter:
    """The per-user token bucket on mutations of this process (``rate`` tokens a second, up to ``burst``); off
    when ``rate`` is 0."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # user -> (tokens, at)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    async def admit(self, user_id: str, n: int = 1) -> None:
        """Take ``n`` tokens for ``user_id`` or raise ``TOO_MANY_REQUESTS`` (taking none): what callers use."""
        self.take(user_id, n)

    def take(self, user_id: str, n: int = 1) -> None:
        """Take ``n`` tokens from this process's bucket for ``user_id`` or raise ``TOO_MANY_REQUESTS``."""
        if self.rate <= 0:
            return
        now = self.clock()
        tokens, at = self._buckets.get(user_id, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens < n:
            wait_ms = math.ceil((n - tokens) / self.rate * 1000)
            self._buckets[user_id] = (tokens, now)
            raise too_many(wait_ms)
        tokens -= n
        if len(self._buckets) >= MAX_TRACKED_USERS:
            # Full buckets carry no information: drop them (they would refill to the same state anyway).
            self._buckets = {u: (t, a) for u, (t, a) in self._buckets.items() if t + (now - a) * self.rate < self.burst}
        self._buckets[user_id] = (tokens, now)


class SharedRateLimiter(RateLimiter):
    """The rate limit kept in buckets every replica shares (``pubsub.buckets``, from ``Bus.rate_buckets``), with
    this process's own buckets (:class:`RateLimiter`) as the fallback while the shared ones cannot be reached.

    A failed or slow call to the shared store sends this process to its own buckets for
    ``SHARED_RETRY_SECONDS``; then the next request tries the shared store again. The own buckets are charged
    only while they stand in, so they start each outage as the process last left them (full for users who did
    not send during earlier ones)."""

    def __init__(
        self, rate: float, burst: int, shared: RateBuckets, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(rate, burst, clock)
        self.shared = shared
        self._local_until = 0.0  # clock time until which this process keeps to its own buckets
        self.fallbacks = 0  # times the shared store failed (for tests and logs)
        self._shared_ok = True

    async def admit(self, user_id: str, n: int = 1) -> None:
        if self.rate <= 0:
            return
        if self.clock() >= self._local_until:
            try:
                async with asyncio.timeout(SHARED_TIMEOUT_SECONDS):
                    wait_ms = await self.shared.take(user_id, n, self.rate, self.burst)
            except Exception as exc:  # whatever the client raises when Redis is away (see pubsub.redis)
                self.fallbacks += 1
                self._local_until = self.clock() + SHARED_RETRY_SECONDS
                if self._shared_ok:
                    log.warning("shared rate limit unavailable (%r); each process limits on its own for now", exc)
                self._shared_ok = False
            else:
                if not self._shared_ok:
                    log.info("shared rate limit available again")
                    self._shared_ok = True
                if wait_ms:
                    raise too_many(wait_ms)
                return
        self.take(user_id, n)


class ConnectionSlots:
    """How many WebSockets and SSE streams one process holds open, at most ``limit``.

    A connection takes a slot before it does anything else and gives it back when it ends; past the limit it
    is refused cleanly (WebSocket closed with ``close_codes.SERVER_FULL``, SSE answered 503 with Retry-After)
    instead of the process running out of memory or file descriptors for everyone.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self) -> bool:
        if self.used >= self.limit:
            return False
        self.used += 1
        return True

    def release(self) -> None:
        self.used -= 1
