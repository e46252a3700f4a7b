"""Redis Cluster specifics: a session's traffic stays on the shard that owns its slot, and the bus rides
out the restart of one node. Also: the tests' own cluster (``testkit.PrivateRedisCluster``) leaves no node
running when it fails to form, and a node whose port someone took meanwhile starts on another."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot
from scenario_kit import session_log
from test_bus_contract import Recorder, ev, open_bus
from test_redis_faults import until
from testkit import PrivateRedis, PrivateRedisCluster, collect, open_sockets_to

from server.pubsub import create_bus
from server.pubsub.keys import DEFAULT_PREFIX, session_channel, session_streams_key, stream_text_key
from server.sync.revocation import CHANNEL as REVOCATIONS


def test_a_sessions_names_share_its_slot():
    prefix = "p:"
    slots = {
        key_slot(name.encode())
        for name in (
            session_channel(prefix, "abc"),
            session_streams_key(prefix, "abc"),
            stream_text_key(prefix, "abc", "m1"),
        )
    }
    assert len(slots) == 1


async def test_sessions_are_subscribed_only_on_their_owning_shard(redis_cluster, redis_cluster_url):
    prefix = redis_cluster_url.rsplit("prefix=", 1)[1]
    bus, rec = await open_bus(redis_cluster_url)
    sids = [f"s{i}" for i in range(12)]
    try:
        for sid in sids:
            await bus.subscribe(sid)
        expected: dict[int, set[str]] = {n.port: set() for n in redis_cluster.nodes}
        for sid in sids:
            channel = session_channel(prefix, sid)
            expected[redis_cluster.owner_of(channel).port].add(channel)
        assert sum(1 for chans in expected.values() if chans) > 1  # the sessions do spread over shards
        for node in redis_cluster.nodes:
            r = aioredis.Redis(port=node.port)
            try:
                got = {c.decode() for c in await r.execute_command("PUBSUB", "SHARDCHANNELS", prefix + "*")}
            finally:
                await r.aclose()
            assert got == expected[node.port]
        for i, sid in enumerate(sids):
            await bus.publish(sid, [ev(sid, i + 1)])
        await rec.wait_for(len(sids))
        assert sorted(s for s, _q, _j in rec.got) == sorted(sids)
    finally:
        await bus.disconnect()


def test_a_cluster_that_does_not_form_leaves_no_node_running(tmp_path, monkeypatch):
    cluster = PrivateRedisCluster(str(tmp_path))

    def never_ok(timeout: float = 30) -> None:
        raise RuntimeError("redis cluster did not become ok")

    monkeypatch.setattr(cluster, "wait_ok", never_ok)
    with pytest.raises(RuntimeError):
        cluster.start()
    assert all(node.proc is not None and node.proc.poll() is not None for node in cluster.nodes)


def test_a_node_whose_ports_were_taken_meanwhile_starts_on_others(tmp_path):
    node = PrivateRedis(cluster_bus=True, args=("--cluster-enabled", "yes"), cwd=str(tmp_path))
    taken, bus_taken = node.port, node.bus_port
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))  # as an outgoing connection's local port holds it: bound, not listening
        node.start()
        try:
            assert node.port != taken and node.bus_port != bus_taken
            with socket.create_connection(("127.0.0.1", node.port), 5) as conn:
                conn.sendall(b"PING\r\n")
                assert conn.recv(64) == b"+PONG\r\n"
            # Started once, it keeps its ports: a node restarts where the cluster knows it.
            node.kill()
            port = node.port
            node.start()
            assert node.port == port
        finally:
            node.kill()


@pytest.fixture
def private_cluster(tmp_path):
    cluster = PrivateRedisCluster(str(tmp_path))
    cluster.start()
    yield cluster
    cluster.stop()


async def test_bus_survives_the_restart_of_a_node(private_cluster):
    bus = create_bus(private_cluster.url)
    rec = Recorder()
    bus.set_handlers(rec.on_message, rec.on_reconnect)
    await bus.connect()
    try:
        sids = [f"s{i}" for i in range(12)]
        for sid in sids:
            await bus.subscribe(sid)
        victim = private_cluster.owner_of(session_channel(DEFAULT_PREFIX, "s0"))
        await bus.publish("s0", [ev("s0", 1)])
        await rec.wait_for(1)

        victim.kill()
        await bus.publish("s0", [ev("s0", 2)])  # its shard is down: must not raise, must not be forgotten
        # The other shards carry on meanwhile.
        others = [s for s in sids if private_cluster.owner_of(session_channel(DEFAULT_PREFIX, s)) is not victim]
        await bus.publish(others[0], [ev(others[0], 1)])
        await rec.wait_for(2)
        victim.start()

        async def reconnected():
            while rec.reconnects == 0:
                rec.changed.clear()
                await rec.changed.wait()

        await asyncio.wait_for(reconnected(), 30)
        deadline = asyncio.get_running_loop().time() + 30
        while bus._unsent and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert not bus._unsent
        await bus.publish("s0", [ev("s0", 3)])

        async def got_three():
            while ("s0", 3) not in [(s, q) for s, q, _j in rec.got]:
                rec.changed.clear()
                await rec.changed.wait()

        await asyncio.wait_for(got_three(), 30)
        s0 = [q for s, q, _j in rec.got if s == "s0"]
        assert s0[0] == 1 and s0[-1] == 3 and set(s0) <= {1, 2, 3}
        assert bus.reconnects >= 1
    finally:
        await bus.disconnect()


async def test_a_node_that_stops_answering_holds_no_call_and_is_reported(private_cluster):
    """A node that keeps its connections open and answers nothing (it hangs, or the network cuts it off; here
    it is stopped): every call on a session it serves returns, the bus reports the shard lost (readiness fails
    instead of saying all is well while the shard's subscribers hear nothing), and closing the bus closes every
    socket it had, the stopped node's included."""
    victim = private_cluster.owner_of(session_channel(DEFAULT_PREFIX, "s"))
    nodes = {node.port for node in private_cluster.nodes}
    bus, _rec = await open_bus(private_cluster.url)
    closed = False
    try:
        texts = bus.shared_stream_texts()
        await bus.subscribe("s")
        await texts.started("s", "m1")
        victim.freeze()
        await bus.publish("s", [ev("s", 1)])
        assert await texts.snapshot("s") is None
        await bus.unsubscribe("s")
        await bus.subscribe("s")

        async def reported() -> None:
            while True:
                try:
                    await bus.ping()
                except Exception as exc:  # also a timeout, while the cluster client itself tries the node
                    if f"lost 127.0.0.1:{victim.port}" in str(exc):
                        return
                await asyncio.sleep(0.1)

        await asyncio.wait_for(reported(), 60)  # the node's health check goes unanswered
        await bus.disconnect()
        closed = True
        await asyncio.sleep(0)  # the transports' last callbacks close their sockets
        assert open_sockets_to(nodes) == []
    finally:
        victim.thaw()
        if not closed:
            await bus.disconnect()


async def test_a_disconnected_bus_starts_nothing_that_would_outlive_it(redis_cluster_url):
    """A follow or subscribe that arrives while (or after) the bus disconnects must not open a shard: its
    listener task and connection would outlive the bus, never closed."""
    bus, _rec = await open_bus(redis_cluster_url)
    await bus.subscribe("before")
    await bus.disconnect()
    running = asyncio.all_tasks()
    await bus.subscribe("after")
    bus._spawn(bus._follow("before"))
    assert asyncio.all_tasks() == running


def sessions_in_the_slot_of(sid: str, n: int) -> list[str]:
    """``n`` other session ids whose channels hash to the slot of ``sid``'s."""
    slot = key_slot(session_channel(DEFAULT_PREFIX, sid).encode())
    found: list[str] = []
    i = 0
    while len(found) < n:
        i += 1
        if key_slot(session_channel(DEFAULT_PREFIX, f"other-{i}").encode()) == slot:
            found.append(f"other-{i}")
    return found


async def test_a_message_published_while_a_shard_connection_was_cut_reaches_the_subscriber(
    private_cluster, server_factory, sqlite_url
):
    """A shard's pub/sub connection is cut (CLIENT KILL on its node) and redis-py reconnects it by itself inside
    a call of the bus (here an unsubscribe from another session on that node), re-subscribing its channels
    without a word: a session event published in between went to no one. The bus counts that as a lost shard
    connection, so the subscriber catches up from the log and gets every event exactly once."""
    live = await server_factory(sqlite_url, users=("alice",), bus_url=private_cluster.url)
    bus = live.services.bus
    # The session's node serves no other channel of the server's (device changes): redis-py re-subscribes a
    # connection's shard channels with one SSUBSCRIBE, which Redis refuses for channels of several slots (an
    # error the listener would read and report). The helpers' sessions share the session's slot.
    devices = private_cluster.owner_of(session_channel(DEFAULT_PREFIX, REVOCATIONS))
    async with live.client("alice") as c:
        while True:
            sid = (await c.mutation("session.create", {}))["id"]
            node = private_cluster.owner_of(session_channel(DEFAULT_PREFIX, sid))
            if node is not devices:
                break
        sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        await sub.wait_started()
        others = sessions_in_the_slot_of(sid, 8)
        for other in others:
            await bus.subscribe(other)
        shard = bus._where[sid]
        admin = aioredis.Redis(port=node.port)

        async def pubsub_clients() -> bool:
            return any("P" in client["flags"] for client in await admin.client_list())

        try:
            # Hold the shard's listener before its next read: the reconnection is then made inside the
            # unsubscribe (a read of the listener's own would see the cut and report it).
            conn = shard.pubsub.connection
            read, gate, held = conn.read_response, asyncio.Event(), asyncio.Event()

            async def held_read(*args: Any, **kwargs: Any) -> Any:
                if asyncio.current_task() is shard.task:
                    held.set()
                    await gate.wait()
                return await read(*args, **kwargs)

            conn.read_response = held_read
            await shard.pubsub.ping()  # its answer ends the listener's read under way; the next one waits
            await asyncio.wait_for(held.wait(), 10)
            try:
                assert await admin.client_kill_filter(_type="pubsub") >= 1
                await c.mutation("session.setTitle", {"sessionId": sid, "title": "during the gap"})

                async def reconnected() -> bool:
                    if await pubsub_clients():
                        return True
                    # The first write to the cut connection may still be taken by the kernel.
                    await bus.unsubscribe(others.pop())
                    return False

                await until(reconnected, "redis-py did not reconnect the shard connection inside a call")
            finally:
                gate.set()
            log, snap = await session_log(live.url, live.tokens["alice"], sid)
            assert "during the gap" in str(log[-1][1])
            assert await collect(sub, int(snap["lastEventId"]), timeout=15) == log
        finally:
            await admin.aclose()
