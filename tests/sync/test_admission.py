"""Resume bursts (``sync.admission``): many clients resuming at once wait for the database instead of failing,
a cached token or session owner never outlives a revocation or a deletion, and one session's slow bus
subscribe does not hold up another's subscribers. Real servers on real sockets."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import connect

from chatsync_client import TrpcClient, TrpcError
from server.services.auth import hash_token
from server.sync import admission

WS_CLOSE_TOKEN_REVOKED = 4503  # a revoked device's token: refused as signed out, not as unknown


def ws_url(live: Any) -> str:
    return live.url.replace("http", "ws") + "/trpc?connectionParams=1"


class RawSubscriber:
    """One socket carrying several ``session.events`` subscriptions; records seqs per subscription id."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.seqs: dict[int, list[int]] = {}
        self.started: set[int] = set()
        self.errors: list[Any] = []
        self.ws: Any = None
        self.reader: asyncio.Task[None] | None = None

    async def open(self, subs: list[tuple[int, str, int]]) -> None:
        self.ws = await connect(self.url, max_queue=None)
        frames = [orjson.dumps({"method": "connectionParams", "data": {"token": self.token}})]
        for rid, sid, after in subs:
            self.seqs[rid] = []
            frames.append(
                orjson.dumps(
                    {
                        "id": rid,
                        "method": "subscription",
                        "params": {"path": "session.events", "input": {"sessionId": sid, "lastEventId": str(after)}},
                    }
                )
            )
        for f in frames:
            await self.ws.send(f.decode())
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            msg = orjson.loads(raw)
            if msg.get("id") is None:
                continue
            if "error" in msg:
                self.errors.append(msg["error"])
                continue
            result = msg["result"]
            if result["type"] == "started":
                self.started.add(msg["id"])
            elif result["type"] == "data":
                self.seqs[msg["id"]].append(int(result["data"]["id"]))

    async def close(self) -> None:
        await self.ws.close()
        if self.reader is not None:
            self.reader.cancel()


async def wait_for(cond: Any, timeout: float = 30, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


# --- a burst of resumes far beyond the pool --------------------------------------------------------------


async def test_a_burst_of_resumes_far_beyond_the_pool_gets_every_event_once(db_url, server_factory):
    # The pool gives up on a waiter after 50 ms: without admission, a burst this size would fail reads.
    live = await server_factory(db_url, users=("alice",), db_pool_timeout_seconds=0.05)
    rng = random.Random(7)
    async with live.client("alice") as c:
        sids = [(await c.mutation("session.create", {"queuePaused": True}))["id"] for _ in range(4)]
        for sid in sids:
            for i in range(30):
                await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"before {i}"})
        ends = {sid: int((await c.query("session.get", {"sessionId": sid}))["lastEventId"]) for sid in sids}

    sockets, per_socket = 200, 10  # 2,000 resumes at once; the pool holds at most 30 connections
    limit = admission.read_limit(live.services.db)
    assert sockets * per_socket > 10 * limit
    subs = [
        [
            (rid, sids[(s + rid) % len(sids)], rng.randrange(0, ends[sids[(s + rid) % len(sids)]] + 1))
            for rid in range(1, per_socket + 1)
        ]
        for s in range(sockets)
    ]
    clients = [RawSubscriber(ws_url(live), live.tokens["alice"]) for _ in range(sockets)]

    async def write_more() -> None:
        async with live.client("alice") as w:
            for i in range(20):
                sid = sids[i % len(sids)]
                await w.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"during {i}"})

    writer = asyncio.create_task(write_more())
    await asyncio.gather(*(cl.open(sub) for cl, sub in zip(clients, subs)))
    await writer
    async with live.client("alice") as c:
        final = {sid: int((await c.query("session.get", {"sessionId": sid}))["lastEventId"]) for sid in sids}
    try:
        await wait_for(
            lambda: all(
                cl.errors
                or (cl.seqs[rid] and cl.seqs[rid][-1] == final[sid])
                or (after == final[sid] and rid in cl.started)
                for cl, sub in zip(clients, subs)
                for rid, sid, after in sub
            ),
            60,
            "every subscriber to reach its session's end",
        )
        for cl, sub in zip(clients, subs):
            assert cl.errors == []
            for rid, sid, after in sub:
                assert cl.seqs[rid] == list(range(after + 1, final[sid] + 1)), (sid, after)
    finally:
        await asyncio.gather(*(cl.close() for cl in clients))


# --- cached tokens and revocation -----------------------------------------------------------------------


async def subscribe_once(live: Any, token: str, sid: str) -> Any:
    """Open a socket with ``token`` and subscribe; returns ``"started"`` or the close code."""
    async with connect(ws_url(live)) as ws:
        await ws.send(orjson.dumps({"method": "connectionParams", "data": {"token": token}}).decode())
        await ws.send(
            orjson.dumps(
                {"id": 1, "method": "subscription", "params": {"path": "session.events", "input": {"sessionId": sid}}}
            ).decode()
        )
        try:
            async for raw in ws:
                msg = orjson.loads(raw)
                if msg.get("id") == 1 and msg.get("result", {}).get("type") == "started":
                    return "started"
        except Exception:
            pass
        return ws.close_code


async def second_device(live: Any) -> tuple[str, str]:
    token = await live.services.auth.create_token("alice", "phone")
    async with TrpcClient(live.url, token) as phone:
        me = await phone.query("auth.me")
    return token, me["deviceId"]


async def test_a_revoked_token_is_refused_on_its_next_subscribe_although_cached(pg_url, server_factory, redis_url):
    a = await server_factory(pg_url, users=("alice",), bus_url=redis_url)
    b = await server_factory(pg_url, users=(), tokens=a.tokens, bus_url=redis_url)
    async with a.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
    token, device = await second_device(a)
    for live in (a, b):
        assert await subscribe_once(live, token, sid) == "started"
        assert hash_token(token) in live.services.auth._cache  # the principal is cached on both replicas

    # Revoked through replica A: refused at once on A, and on B although B had it cached.
    async with a.client("alice") as c:
        await c.mutation("auth.revokeDevice", {"deviceId": device})
    assert await subscribe_once(b, token, sid) == WS_CLOSE_TOKEN_REVOKED
    assert await subscribe_once(a, token, sid) == WS_CLOSE_TOKEN_REVOKED
    with pytest.raises(TrpcError) as err:
        async with TrpcClient(b.url, token, reconnect=False) as phone:
            await phone.query("auth.me")
    assert err.value.code == "UNAUTHORIZED"

    # Revoked by the CLI, a process with no bus: no message reaches the servers, and still refused at once.
    token2, device2 = await second_device(a)
    assert await subscribe_once(b, token2, sid) == "started"
    env = {**os.environ, "CHATSYNC_DATABASE_URL": pg_url}
    out = subprocess.run(
        [sys.executable, "-m", "server.cli", "tokens", "revoke", device2], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert await subscribe_once(b, token2, sid) == WS_CLOSE_TOKEN_REVOKED


async def test_a_deleted_session_is_not_subscribable_through_the_owner_cache(db_url, server_factory):
    live = await server_factory(db_url, users=("alice", "bob"))
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "x"})
        sub = await c.subscribe("session.events", {"sessionId": sid}, last_event_id="0")
        await sub.wait_started()
        await sub.close()
    assert live.services.hub.owners.get(sid) is not None
    # Someone else's session stays unreadable when its owner is cached.
    async with live.client("bob") as bob:
        with pytest.raises(TrpcError) as err:
            sub = await bob.subscribe("session.events", {"sessionId": sid}, last_event_id="0")
            await sub.next(5)
        assert err.value.code == "NOT_FOUND"
    # Deleted behind the cache's back (as another replica would): a resume from its end is refused.
    async with live.services.db.write() as s:
        from server.store.models import ChatSession

        row = await s.get(ChatSession, sid)
        row.deleted_at = row.updated_at
        end = row.last_seq
    async with live.client("alice") as c:
        with pytest.raises(TrpcError) as err:
            sub = await c.subscribe("session.events", {"sessionId": sid}, last_event_id=str(end))
            await sub.next(5)
        assert err.value.code == "NOT_FOUND"
    assert live.services.hub.owners.get(sid) is None


# --- per-session hub locks ------------------------------------------------------------------------------


async def test_a_slow_bus_subscribe_on_one_session_does_not_block_another(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",))
    async with live.client("alice") as c:
        slow = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        fast = (await c.mutation("session.create", {"queuePaused": True}))["id"]
    bus = live.services.hub.bus
    release = asyncio.Event()
    entered = asyncio.Event()
    real_subscribe = bus.subscribe

    async def subscribe(session_id: str) -> None:
        if session_id == slow:
            entered.set()
            await release.wait()  # a Redis round trip that does not come back for now
        await real_subscribe(session_id)

    bus.subscribe = subscribe
    try:
        async with live.client("alice") as c:
            slow_sub = await c.subscribe("session.events", {"sessionId": slow})
            await asyncio.wait_for(entered.wait(), 5)
            # A second subscriber of the slow session waits for its bus subscription ...
            slow_sub2 = await c.subscribe("session.events", {"sessionId": slow})
            # ... but another session attaches, starts and gets its events meanwhile.
            fast_sub = await c.subscribe("session.events", {"sessionId": fast})
            await fast_sub.wait_started(5)
            await c.mutation("message.enqueueMessage", {"sessionId": fast, "content": "hello"})
            _event_id, event = await fast_sub.next(5)
            assert event["type"] == "queue-message-added"
            assert live.services.hub.subscriber_count(slow) == 0
            release.set()
            await slow_sub.wait_started(5)
            await slow_sub2.wait_started(5)
            await c.mutation("message.enqueueMessage", {"sessionId": slow, "content": "late"})
            for sub in (slow_sub, slow_sub2):
                _id, ev = await sub.next(5)
                assert ev["type"] == "queue-message-added"
            assert live.services.hub.subscriber_count(slow) == 2
    finally:
        bus.subscribe = real_subscribe
        release.set()
    await wait_for(lambda: not live.services.hub._locks and live.services.hub.subscriber_count() == 0, 5, "detach")


async def test_a_subscriber_that_leaves_at_once_is_detached_on_several_replicas(pg_url, server_factory, redis_url):
    """Clients that subscribe and leave as soon as the subscription starts (on several replicas, where the
    catch-up reads the stream text from Redis): every subscription ends and leaves the hub, none keeps
    running for a client that is gone. A cancellation that a Redis call swallows (Python 3.11's
    ``asyncio.wait_for`` inside the client returns normally when the cancel lands as the reply arrives) must
    not leave the subscription waiting for ever."""
    live = await server_factory(pg_url, users=("alice",), bus_url=redis_url)
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
    token = live.tokens["alice"]
    for _ in range(8):
        assert await subscribe_once(live, token, sid) == "started"
    deadline = asyncio.get_running_loop().time() + 20
    while live.services.hub.subscriber_count(sid) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    assert live.services.hub.subscriber_count(sid) == 0
