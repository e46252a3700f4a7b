"""Token buckets shared by every process on the bus: the per-user request rate limit across replicas.

A bucket holds up to ``burst`` tokens and refills at ``rate`` tokens a second; a request takes tokens or, when
too few are left, takes none and learns how long to wait. A backend keeps each bucket in one place that every
replica reaches, and takes tokens atomically there, so a user's requests over all replicas together stay
within ``burst + rate * t``. A bus made for one process has none (``Bus.rate_buckets`` is None): the caller's
own per-process bucket is the limit then. ``take`` raises when the shared store cannot be reached; the caller
falls back to its per-process bucket.
"""

from __future__ import annotations

import abc


class RateBuckets(abc.ABC):
    """Shared token buckets, one per name."""

    @abc.abstractmethod
    async def take(self, name: str, n: int, rate: float, burst: int) -> int:
        """Take ``n`` tokens from bucket ``name``: 0 when taken, else the milliseconds until ``n`` tokens would be
        there (and none are taken). Raises when the shared store is unreachable."""
