"""Per-user rate limit on mutations (a token bucket per user, in each process); connection slots.

Every mutation (each call of a batch counts one) takes a token; a user whose bucket is empty gets
``TOO_MANY_REQUESTS`` with ``data.retryAfterMs``, and nothing changes. The bucket refills at ``rate`` tokens a
second up to ``burst``, so short bursts (a paste of many queued messages) pass and only a sustained flood is
refused. Buckets live per process (a user spread over ``n`` replicas may send ``n`` times the rate); they are
forgotten when full again, so the table holds only users who sent recently.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..protocol.errors import RpcError

MAX_TRACKED_USERS = 100_000


class RateLimiter:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # user -> (tokens, at)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, user_id: str, n: int = 1) -> None:
        """Take ``n`` tokens for ``user_id`` or raise ``TOO_MANY_REQUESTS`` (taking none)."""
        if self.rate <= 0:
            return
        now = self.clock()
        tokens, at = self._buckets.get(user_id, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens < n:
            wait_ms = math.ceil((n - tokens) / self.rate * 1000)
            self._buckets[user_id] = (tokens, now)
            raise RpcError("TOO_MANY_REQUESTS", f"Too many requests; retry in {wait_ms} ms", retry_after_ms=wait_ms)
        tokens -= n
        if len(self._buckets) >= MAX_TRACKED_USERS:
            # Full buckets carry no information: drop them (they would refill to the same state anyway).
            self._buckets = {u: (t, a) for u, (t, a) in self._buckets.items() if t + (now - a) * self.rate < self.burst}
        self._buckets[user_id] = (tokens, now)


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
