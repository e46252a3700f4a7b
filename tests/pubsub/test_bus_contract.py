"""The bus contract, run against every backend: memory://, redis:// (real Redis, own key prefix) and
redis+cluster:// (a real 3-master Redis Cluster, own key prefix)."""

from __future__ import annotations

import asyncio

import pytest

from server.domain.events import EventEnvelope
from server.pubsub import create_bus
from server.pubsub.redis import decode, encode


def ev(sid: str, seq: int | None, type_: str = "queue-cleared", **fields) -> EventEnvelope:
    return EventEnvelope.build(sid, seq, type_, fields)


class Recorder:
    def __init__(self) -> None:
        self.got: list[tuple[str, int | None, str]] = []
        self.reconnects = 0
        self.changed = asyncio.Event()

    def on_message(self, sid, events) -> None:
        self.got.extend((sid, e.seq, e.json) for e in events)
        self.changed.set()

    def on_reconnect(self) -> None:
        self.reconnects += 1
        self.changed.set()

    async def wait_for(self, n: int, timeout: float = 5) -> None:
        async def loop():
            while len(self.got) < n:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), timeout)


@pytest.fixture(params=["memory", "redis", "redis-cluster"])
def bus_url(request):
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue("redis_url" if request.param == "redis" else "redis_cluster_url")


@pytest.fixture(params=["redis", "redis-cluster"])
def shared_bus_url(request):
    """The backends that reach other processes."""
    return request.getfixturevalue("redis_url" if request.param == "redis" else "redis_cluster_url")


async def open_bus(url):
    bus = create_bus(url)
    rec = Recorder()
    bus.set_handlers(rec.on_message, rec.on_reconnect)
    await bus.connect()
    return bus, rec


async def test_delivers_published_batches_in_order(bus_url):
    bus, rec = await open_bus(bus_url)
    try:
        await bus.subscribe("s1")
        await bus.publish("s1", [ev("s1", 1), ev("s1", 2)])
        await bus.publish("s1", [ev("s1", 3)])
        await rec.wait_for(3)
        assert [seq for _s, seq, _j in rec.got] == [1, 2, 3]
        assert {s for s, _q, _j in rec.got} == {"s1"}
    finally:
        await bus.disconnect()


async def test_only_subscribed_channels_are_delivered(bus_url):
    bus, rec = await open_bus(bus_url)
    try:
        await bus.subscribe("a")
        await bus.publish("b", [ev("b", 1)])
        await bus.publish("a", [ev("a", 1)])
        await rec.wait_for(1)
        await bus.unsubscribe("a")
        await bus.publish("a", [ev("a", 2)])
        await bus.subscribe("c")
        await bus.publish("c", [ev("c", 1)])
        await rec.wait_for(2)
        assert [(s, q) for s, q, _j in rec.got] == [("a", 1), ("c", 1)]
    finally:
        await bus.disconnect()


async def test_events_survive_the_trip_unchanged(bus_url):
    bus, rec = await open_bus(bus_url)
    try:
        await bus.subscribe("s")
        tricky = ev("s", None, "text-delta", messageId="m1", offset=7, delta="a|b\nc ✓")
        durable = ev("s", 9, "title-changed", title="x|y", source="user")
        await bus.publish("s", [tricky, durable])
        await rec.wait_for(2)
        assert rec.got == [("s", None, tricky.json), ("s", 9, durable.json)]
    finally:
        await bus.disconnect()


async def test_redis_subscription_is_active_when_subscribe_returns(shared_bus_url):
    """Across processes: a publish right after subscribe() returns must arrive (the log read follows)."""
    url = shared_bus_url
    sub_bus, rec = await open_bus(url)
    pub_bus, _ = await open_bus(url)
    try:
        for i in range(20):
            sid = f"race-{i}"
            await sub_bus.subscribe(sid)
            await pub_bus.publish(sid, [ev(sid, 1)])  # immediately: must not be lost
        await rec.wait_for(20)
    finally:
        await sub_bus.disconnect()
        await pub_bus.disconnect()


TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize("published_at,trace_parent", [(0.0, None), (1764133923.25, None), (1764133923.5, TRACE)])
def test_wire_encoding_round_trip(published_at, trace_parent):
    """Events, and the header line with the first event's publish time and trace context when it has them."""
    events = [ev("s", 3, "queue-cleared"), ev("s", None, "text-delta", messageId="m|x", offset=0, delta="|||")]
    events[0].published_at, events[0].trace_parent = published_at, trace_parent
    wire = encode(events)
    assert wire.startswith(b"#") == bool(published_at)
    back = decode("s", wire)
    assert [(e.seq, e.type, e.json, e.message_id, e.offset) for e in back] == [
        (e.seq, e.type, e.json, e.message_id, e.offset) for e in events
    ]
    assert (back[0].published_at, back[0].trace_parent) == (published_at, trace_parent)
    assert (back[1].published_at, back[1].trace_parent) == (0.0, None)  # a batch's time is its first event's


async def test_partial_texts_are_shared_between_processes(shared_bus_url):
    """What one process appended to a streaming message, another reads in its snapshot, offsets exact."""
    writer, _ = await open_bus(shared_bus_url)
    reader, rec = await open_bus(shared_bus_url)
    try:
        await reader.subscribe("s")
        texts, seen = writer.shared_stream_texts(), reader.shared_stream_texts()
        await texts.started("s", "m1")
        for offset, delta in ((0, "hel"), (3, "lo ✓")):
            await texts.append(
                "s", ev("s", None, "text-delta", messageId="m1", offset=offset, delta=delta), "m1", delta
            )
        await rec.wait_for(2)
        assert await seen.snapshot("s") == [{"messageId": "m1", "offset": 7, "text": "hello ✓"}]
        assert await seen.snapshot("other") == []
        await texts.ended("s", "m1")
        assert await seen.snapshot("s") == []
    finally:
        await writer.disconnect()
        await reader.disconnect()


async def test_deltas_appended_at_once_by_many_streams_all_arrive_in_order(shared_bus_url):
    """Deltas of many sessions appended in the same turns of the event loop (they share Redis pipelines) all
    reach the shared text and the subscribers, each session's in order; every text key keeps the TTL its
    stream started with; and an appender cancelled while it waits (an abort) does not cancel the others."""
    from server.pubsub.keys import stream_text_key

    writer, _ = await open_bus(shared_bus_url)
    reader, rec = await open_bus(shared_bus_url)
    sessions = [f"s{i}" for i in range(12)]
    try:
        for sid in sessions:
            await reader.subscribe(sid)
        texts, seen = writer.shared_stream_texts(), reader.shared_stream_texts()
        for sid in sessions:
            await texts.started(sid, "m")

        async def stream(sid: str) -> None:
            offset = 0
            for n in range(5):
                delta = f"{sid}-{n};"
                await texts.append(
                    sid, ev(sid, None, "text-delta", messageId="m", offset=offset, delta=delta), "m", delta
                )
                offset += len(delta)

        await asyncio.gather(*(stream(sid) for sid in sessions))
        # One more round, in which one appender is cancelled while it waits for Redis's answer.
        doomed = asyncio.create_task(
            texts.append("s0", ev("s0", None, "text-delta", messageId="m", offset=0, delta="x"), "m", "x")
        )
        others = [
            asyncio.create_task(
                texts.append(sid, ev(sid, None, "text-delta", messageId="m", offset=0, delta="!"), "m", "!")
            )
            for sid in sessions[1:]
        ]
        await asyncio.sleep(0)  # every append has joined the batch and waits
        doomed.cancel()
        await asyncio.gather(*others)  # none of them is cancelled with it
        await rec.wait_for(len(sessions) * 5 + len(sessions) - 1)
        for sid in sessions:
            expected = "".join(f"{sid}-{n};" for n in range(5))
            deltas = [json for got_sid, _seq, json in rec.got if got_sid == sid]
            assert all(f'"{sid}-{n};"' in deltas[n] for n in range(5)), f"{sid}'s deltas out of order: {deltas}"
            snap = await seen.snapshot(sid)
            assert snap is not None and snap[0]["text"].startswith(expected)
            if sid != "s0":
                assert snap[0]["text"] == expected + "!"
            ttl = await writer.client.ttl(stream_text_key(writer.prefix, sid, "m"))
            assert ttl > 0, f"{sid}'s text has no TTL ({ttl})"
    finally:
        await writer.disconnect()
        await reader.disconnect()


@pytest.fixture(params=["redis", "redis-cluster"])
def killable_bus(request, tmp_path):
    """A bus of the test's own and a function that kills the Redis (node) serving session ``s``."""
    from testkit import PrivateRedis, PrivateRedisCluster

    from server.pubsub.keys import DEFAULT_PREFIX, session_channel

    if request.param == "redis":
        redis = PrivateRedis()
        redis.start()
        yield redis.url, redis.kill
        redis.kill()
    else:
        cluster = PrivateRedisCluster(str(tmp_path / "cluster"))
        cluster.start()
        yield cluster.url, cluster.owner_of(session_channel(DEFAULT_PREFIX, "s")).kill
        cluster.stop()


async def test_every_operation_survives_its_redis_going_away(killable_bus):
    """With the Redis (or the cluster node) serving a session gone, no bus or stream-buffer call raises:
    publishes are kept for a retry, shared texts are skipped, and the snapshot says "unavailable" (None)
    so the caller falls back to the database."""
    url, kill = killable_bus
    bus, _ = await open_bus(url)
    try:
        texts = bus.shared_stream_texts()
        await bus.subscribe("s")
        await texts.started("s", "m1")
        kill()
        for _ in range(3):  # the first call may find a dead socket, the next ones a refused connection
            await bus.publish("s", [ev("s", 1)])
            await texts.started("s", "m2")
            await texts.append("s", ev("s", None, "text-delta", messageId="m1", offset=0, delta="x"), "m1", "x")
            assert await texts.snapshot("s") is None
            await texts.ended("s", "m1")
            await bus.unsubscribe("s")
            await bus.subscribe("s")
    finally:
        await bus.disconnect()
