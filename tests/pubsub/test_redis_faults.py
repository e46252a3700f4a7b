"""Redis goes away and comes back: the bus reconnects, re-subscribes, retries what it could not publish,
and tells subscribers to catch up from the log."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from test_bus_contract import Recorder, ev
from testkit import PrivateRedis, PrivateRedisCluster

import server.pubsub.redis as redis_bus
from server.pubsub import create_bus
from server.pubsub.keys import DEFAULT_PREFIX, session_channel


@pytest.fixture
def private_redis():
    r = PrivateRedis()
    r.start()
    yield r
    if r.proc and r.proc.poll() is None:
        r.kill()


async def test_bus_survives_a_redis_restart(private_redis):
    bus = create_bus(private_redis.url)
    rec = Recorder()
    bus.set_handlers(rec.on_message, rec.on_reconnect)
    await bus.connect()
    try:
        await bus.subscribe("s")
        await bus.publish("s", [ev("s", 1)])
        await rec.wait_for(1)

        private_redis.kill()
        await bus.publish("s", [ev("s", 2)])  # Redis is down: must not raise, must not be forgotten
        assert bus._unsent
        private_redis.start()

        async def reconnected():
            while rec.reconnects == 0:
                rec.changed.clear()
                await rec.changed.wait()

        await asyncio.wait_for(reconnected(), 15)
        # The publish made during the outage is retried until Redis takes it. (Whether this process
        # hears it depends on whether its listener re-subscribed first: pub/sub keeps nothing, which is
        # why subscribers are told to catch up from the event log on reconnect.)
        deadline = asyncio.get_running_loop().time() + 15
        while bus._unsent and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert not bus._unsent
        await bus.publish("s", [ev("s", 3)])
        await rec.wait_for(2, timeout=10)
        seqs = [seq for _s, seq, _j in rec.got]
        assert seqs[0] == 1 and seqs[-1] == 3 and set(seqs) <= {1, 2, 3}
        assert bus.reconnects >= 1 and rec.reconnects >= 1
    finally:
        await bus.disconnect()


async def test_a_subscribe_cancelled_as_redis_confirms_it_stays_cancelled(redis_url):
    """A subscriber that goes away (its task cancelled) in the same turn of the loop as Redis confirms its
    subscription: the cancellation reaches the subscriber. Swallowed, the subscription's task would carry on
    as if its client were still there, attached to the hub, and hold the server's shutdown."""
    bus = create_bus(redis_url)
    rec = Recorder()
    bus.set_handlers(rec.on_message, rec.on_reconnect)
    await bus.connect()
    held: list[tuple[dict, dict]] = []
    handle = bus.handle_message

    def hold_confirmations(msg, confirm):  # the listener's confirmations, kept back
        channel = msg["channel"].decode() if isinstance(msg["channel"], bytes) else msg["channel"]
        if msg["type"] == "subscribe" and channel.endswith("{gone}"):
            held.append((msg, confirm))
        else:
            handle(msg, confirm)

    bus.handle_message = hold_confirmations
    try:
        task = asyncio.create_task(bus.subscribe("gone"))
        deadline = asyncio.get_running_loop().time() + 10
        while not held and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert held, "Redis never confirmed the subscription"
        handle(*held[0])  # the confirmation arrives...
        task.cancel()  # ...and the client goes, before the subscriber's task runs again
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await bus.disconnect()


async def until(condition: Any, what: str, timeout: float = 30) -> None:
    """Wait (polling) until ``await condition()`` is true; fail after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.05)


async def test_a_message_published_while_the_pubsub_connection_was_cut_reaches_the_subscriber(
    private_redis, server_factory, sqlite_url
):
    """The bus's pub/sub connection is cut (CLIENT KILL) and redis-py reconnects it by itself inside a call of
    the bus (here an unsubscribe's), re-subscribing its channels without a word: a session event published in
    between went to no one. The bus counts that as a lost connection, so the subscriber catches up from the log
    and gets it; before, it never did."""
    live = await server_factory(sqlite_url, users=("alice",), bus_url=private_redis.url)
    bus = live.services.bus
    admin = aioredis.Redis.from_url(private_redis.url)

    async def pubsub_clients() -> bool:
        return any("P" in client["flags"] for client in await admin.client_list())

    try:
        async with live.client("alice") as c:
            sid = (await c.mutation("session.create", {}))["id"]
            sub = await c.subscribe("session.events", {"sessionId": sid})
            await sub.wait_started()
            # Hold the bus's listener between two reads: the reconnection is then made inside the unsubscribe
            # (a read of the listener's own would see the cut and report it).
            pubsub = bus._pubsub
            control, gate, held = pubsub.control, asyncio.Event(), asyncio.Event()

            async def held_control(reply: Any) -> Any:
                held.set()
                await gate.wait()
                return await control(reply)

            pubsub.control = held_control
            await pubsub.ping()  # its answer reaches the listener, which then waits at the gate
            await asyncio.wait_for(held.wait(), 10)
            try:
                assert await admin.client_kill_filter(_type="pubsub") >= 1
                await c.mutation("session.setTitle", {"sessionId": sid, "title": "during the gap"})
                calls = 0

                async def reconnected() -> bool:
                    nonlocal calls
                    if await pubsub_clients():
                        return True
                    calls += 1  # the first write to the cut connection may still be taken by the kernel
                    await bus.unsubscribe(f"elsewhere-{calls}")
                    return False

                await until(reconnected, "redis-py did not reconnect the pub/sub connection inside a call")
            finally:
                gate.set()
            while True:
                _event_id, item = await sub.next(timeout=30)
                if "during the gap" in orjson.dumps(item).decode():
                    break
    finally:
        await admin.aclose()


async def open_recorded_bus(url: str) -> tuple[Any, Recorder]:
    """A connected bus on ``url`` whose messages and reconnections a :class:`Recorder` keeps."""
    bus = create_bus(url)
    rec = Recorder()
    bus.set_handlers(rec.on_message, rec.on_reconnect)
    await bus.connect()
    return bus, rec


async def reports_redis_lost(bus: Any) -> bool:
    """Whether the bus's readiness check says it lost Redis (a ping that merely times out does not: Redis is
    silent, but the bus has not noticed yet)."""
    try:
        await bus.ping()
    except ConnectionError as exc:
        return "lost Redis" in str(exc)
    except Exception:
        return False
    return False


async def test_a_redis_that_stops_answering_counts_as_lost(private_redis):
    """A Redis that keeps its connections open and answers nothing (it hangs, or the network cuts it off; here
    it is stopped): a subscribe that Redis does not confirm in time makes the bus count its connection as lost
    (readiness says so, later calls return at once instead of each waiting out its deadline), and once Redis
    answers again the bus reconnects and has every subscriber catch up from the log. Before, the bus went on
    listening to the silent connection, and nothing told the subscribers that messages may have been lost."""
    bus, rec = await open_recorded_bus(private_redis.url)

    async def reports_lost() -> bool:
        return await reports_redis_lost(bus)

    try:
        await bus.subscribe("s")
        private_redis.freeze()
        try:
            await bus.subscribe("t")  # not confirmed within SUBSCRIBE_TIMEOUT
            await until(reports_lost, "the bus still listens to a Redis that answers nothing")
            await bus.unsubscribe("s")
            await bus.subscribe("u")
        finally:
            private_redis.thaw()

        async def caught_up() -> bool:
            return rec.reconnects >= 1

        await until(caught_up, "the subscribers were not told to catch up")
        await bus.publish("u", [ev("u", 1)])
        await rec.wait_for(1, timeout=10)
        assert [(sid, seq) for sid, seq, _json in rec.got] == [("u", 1)]
    finally:
        await bus.disconnect()


async def test_an_idle_listener_notices_a_redis_that_stops_answering(private_redis, monkeypatch):
    """With nothing published and no call made, a Redis that stops answering is still found: the listener's
    health check PING goes unanswered, the bus reports Redis lost, and once Redis answers again the listener
    reconnects and tells its subscribers to catch up. (The listener waits for replies without a timeout: its
    watchdog sends the PING and closes the silent connection.)"""
    monkeypatch.setattr(redis_bus, "HEALTH_CHECK_INTERVAL", 1)
    monkeypatch.setattr(redis_bus, "NODE_TIMEOUT", 1.0)
    bus, rec = await open_recorded_bus(private_redis.url)

    async def reports_lost() -> bool:
        return await reports_redis_lost(bus)

    async def caught_up() -> bool:
        return rec.reconnects >= 1

    try:
        await bus.subscribe("s")
        await bus.publish("s", [ev("s", 1)])
        await rec.wait_for(1)
        private_redis.freeze()
        try:
            await until(reports_lost, "the bus still listens to a Redis that answers nothing")
        finally:
            private_redis.thaw()
        await until(caught_up, "the subscribers were not told to catch up")
        await bus.publish("s", [ev("s", 2)])
        await rec.wait_for(2, timeout=10)
        assert [seq for _s, seq, _j in rec.got][-1] == 2
    finally:
        await bus.disconnect()


class LaggingPubSubs:
    """Once ``enabled``: pub/sub connections whose commands reach Redis late, in the order they were sent: each
    call returns as if its command were on its way, and Redis gets them once ``arrive`` is set (a slow network
    between the bus and Redis: a command written to the socket is not yet one Redis has run)."""

    def __init__(self) -> None:
        self.enabled = False
        self.sent = asyncio.Event()
        self.arrive = asyncio.Event()
        self._last: asyncio.Task[None] | None = None

    def open(self, client: Any) -> Any:
        if not self.enabled:
            return redis_bus.BusPubSub(client.connection_pool)
        lag = self

        class LaggingPubSub(redis_bus.BusPubSub):
            async def execute_command(self, *args: Any) -> None:
                await self.connect()
                previous = lag._last

                async def arrives() -> None:
                    await lag.arrive.wait()
                    if previous is not None:
                        await previous
                    await redis_bus.BusPubSub.execute_command(self, *args)

                lag._last = asyncio.create_task(arrives())
                lag.sent.set()

        return LaggingPubSub(client.connection_pool)


@pytest.fixture(params=["redis", "redis-cluster"])
def lagging_bus(request, tmp_path, monkeypatch):
    """A bus URL of the test's own; the Redis node that serves session ``s``; and the :class:`LaggingPubSubs`
    that makes the bus's pub/sub connections."""
    import server.pubsub.redis_cluster as cluster_bus

    lag = LaggingPubSubs()
    if request.param == "redis":
        redis = PrivateRedis()
        redis.start()
        monkeypatch.setattr(redis_bus, "open_pubsub", lag.open)
        yield redis.url, redis, lag
        redis.kill()
    else:
        cluster = PrivateRedisCluster(str(tmp_path / "redis-cluster"))
        cluster.start()
        monkeypatch.setattr(cluster_bus, "open_pubsub", lag.open)
        yield cluster.url, cluster.owner_of(session_channel(DEFAULT_PREFIX, "s")), lag
        cluster.stop()


async def test_subscribers_catch_up_only_once_redis_has_taken_the_resubscribe(lagging_bus):
    """The bus reconnects its pub/sub connection and re-subscribes, and the subscribers are told to catch up
    from the log only once Redis has registered the subscriptions: an event published after a subscriber's
    log read and before Redis took the subscription would reach it neither way. Before, the catch-up began as
    soon as the subscribes had been written to the connection."""
    url, node, lag = lagging_bus
    bus, rec = await open_recorded_bus(url)
    admin = aioredis.Redis(port=node.port)
    try:
        await bus.subscribe("s")
        lag.enabled = True
        assert await admin.client_kill_filter(_type="pubsub") >= 1
        await asyncio.wait_for(lag.sent.wait(), 30)  # the reconnection's subscribes are on their way
        caught_up = rec.reconnects
        await bus.publish("s", [ev("s", 1)])  # Redis has not taken the subscription yet: no one gets this
        lag.arrive.set()

        async def got_it() -> bool:  # from the log, in a catch-up that began after the publish
            return rec.reconnects > caught_up or ("s", 1) in [(sid, seq) for sid, seq, _json in rec.got]

        await until(got_it, "an event published before Redis took the subscription was missed", timeout=10)
    finally:
        await admin.aclose()
        await bus.disconnect()
