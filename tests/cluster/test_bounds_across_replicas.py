"""Per-user bounds hold over two replicas sharing PostgreSQL: they are checked in the database, under the user's
lock, in the transaction that commits the change, whichever replica runs it."""

from __future__ import annotations

from concurrent_calls import all_at_once, codes

LONG = " ".join(f"w{i}" for i in range(4000))  # an echo answer of minutes (CHATSYNC_ECHO_DELAY 0.05)


async def test_sessions_and_runs_in_progress_stop_at_their_bounds_over_two_replicas(cluster_factory):
    cluster = await cluster_factory(
        2,
        CHATSYNC_MAX_SESSIONS_PER_USER="8",
        CHATSYNC_MAX_ACTIVE_RUNS_PER_USER="3",
        CHATSYNC_ECHO_DELAY="0.05",
        CHATSYNC_DB_POOL_TIMEOUT_SECONDS="60",
    )
    token, urls = cluster.tokens["alice"], cluster.urls
    created = await all_at_once([(urls[i % 2], token, "session.create", {}) for i in range(50)])
    assert codes(created) == {None: 8, "PRECONDITION_FAILED": 42}
    sids = [a.data["id"] for a in created if a.ok]
    sends = [(urls[i % 2], token, "message.send", {"sessionId": sid, "content": LONG}) for i, sid in enumerate(sids)]
    sent = await all_at_once(sends)
    assert codes(sent) == {None: 3, "TOO_MANY_REQUESTS": 5}
    aborts = [(urls[0], token, "run.abort", {"sessionId": sid}) for sid, a in zip(sids, sent) if a.ok]
    assert all(a.ok and a.data["aborted"] for a in await all_at_once(aborts))
