"""The per-user rate limit holds over every replica when they share Redis: one bucket per user, in Redis."""

from __future__ import annotations

import time

from concurrent_calls import all_at_once, codes

from chatsync_client import TrpcClient

RATE, BURST = 0.5, 20


async def test_one_users_mutations_over_two_replicas_stay_within_rate_and_burst(cluster_factory):
    """80 mutations of one user at once, half to each replica: together they get the burst and what the rate
    added while they ran, not a burst from each replica (a bucket per process would have let about 40 through)."""
    cluster = await cluster_factory(2, CHATSYNC_RATE_LIMIT_PER_SECOND=str(RATE), CHATSYNC_RATE_LIMIT_BURST=str(BURST))
    token = cluster.tokens["alice"]
    calls = [(cluster.urls[i % 2], token, "session.create", {"title": f"s{i}"}) for i in range(80)]
    began = time.monotonic()
    answers = await all_at_once(calls)
    elapsed = time.monotonic() - began
    counted = codes(answers)
    assert set(counted) <= {None, "TOO_MANY_REQUESTS"}
    accepted = counted[None]
    assert BURST <= accepted <= BURST + RATE * elapsed + 1
    async with TrpcClient(cluster.urls[0], cluster.tokens["alice"]) as c:
        assert len((await c.query("session.list", {}))["items"]) == accepted  # the refused ones made nothing
    async with TrpcClient(cluster.urls[1], cluster.tokens["bob"]) as bob:
        await bob.mutation("session.create", {})  # another user's bucket is full
