"""Redis Cluster backend with sharded pub/sub: a session's traffic goes only to the shard that owns it.

Every per-session name carries the session id as a hash tag (``keys.py``), so a session's channel and its
stream-text keys live in one slot. Publishing is ``SPUBLISH``, which Redis delivers inside the owning shard
only (plain ``PUBLISH`` in a cluster is broadcast to every node); a process subscribes with ``SSUBSCRIBE`` on
one pub/sub connection per shard it needs, opened on the first session that hashes there.

Each shard connection has its own supervised listener: when a node goes away (restart, failover) only that
listener reconnects, with backoff, after refreshing the slot map. It re-subscribes its sessions on whichever
node now owns them and tells the hub that messages may have been lost, so subscribers catch up from the
event log. A shard connection counts as lost the way the single-Redis bus's does (``redis.BusPubSub``, read by
``RedisBus.listen_to``): a reconnection redis-py makes by itself inside a call (it re-subscribes without a word,
and whatever was published in between is gone), a shard (un)subscribe that fails, is cut short or is not
confirmed in time, and a node that stops answering the health check. Publishing, the retry of unsent batches
and the shared partial texts are the single-Redis backend's, sent through the cluster client (which routes
by slot and follows MOVED).

A node that goes away holds no call for long: every connect and every reply is bounded (``NODE_TIMEOUT``), a
shard's connection retries no command (its listener reconnects, with backoff), a shard (un)subscribe has a
deadline, and closing the bus closes every connection even while a node is down.
"""

from __future__ import annotations

import asyncio
import logging
import random
from contextlib import suppress
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .. import metrics
from .keys import DEFAULT_PREFIX, control_channel, session_channel
from .redis import (
    CLOSE_TIMEOUT,
    HEALTH_CHECK_INTERVAL,
    MAX_BACKOFF,
    NODE_TIMEOUT,
    SUBSCRIBE_TIMEOUT,
    UNAVAILABLE,
    BusPubSub,
    RedisBus,
    close_quietly,
    open_pubsub,
    stop_tasks,
)

log = logging.getLogger(__name__)


def parse_nodes(netloc: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` (the seed nodes of ``redis+cluster://``)."""
    nodes = []
    for part in netloc.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"cluster node {part!r} is not host:port")
        nodes.append((host, int(port)))
    return nodes


class _Shard:
    """One node's sharded pub/sub connection, the sessions subscribed on it, and its listener."""

    def __init__(self, bus: RedisClusterBus, host: str, port: int) -> None:
        self.bus, self.host, self.port = bus, host, port
        self.sessions: set[str] = set()
        self.confirm: dict[str, asyncio.Future[None]] = {}
        self.connected = asyncio.Event()
        self.lost = False  # the node went away and the listener is reconnecting
        self.catch_up_owed = False  # reconnected: the subscribers catch up once the node confirms the subscribes
        self.pubsub: BusPubSub | None = None
        self.client: aioredis.Redis | None = None
        self.task = asyncio.create_task(self._run(), name=f"redis-cluster-shard-{host}:{port}")

    async def _open(self) -> None:
        # No retries inside the client: with the default ones, one SUNSUBSCRIBE on the connection of a node that
        # went away reconnects some thirty times (three nested retry loops), each attempt up to the connect
        # timeout. Here a command fails at the first error and the listener reconnects, with backoff.
        self.client = aioredis.Redis(
            host=self.host,
            port=self.port,
            socket_connect_timeout=NODE_TIMEOUT,
            socket_timeout=NODE_TIMEOUT,
            health_check_interval=HEALTH_CHECK_INTERVAL,
            retry=Retry(NoBackoff(), retries=0),
        )
        pubsub = open_pubsub(self.client)
        # The control channel keeps the connection subscribed (and readable) before it has a session.
        await pubsub.subscribe(control_channel(self.bus.prefix))
        for sid in self.sessions:  # one SSUBSCRIBE per channel: several slots in one would be CROSSSLOT
            await pubsub.ssubscribe(session_channel(self.bus.prefix, sid))
        await pubsub.resubscribed()
        self.pubsub = pubsub
        self.connected.set()

    async def close(self) -> None:
        """Close the shard's connection (each step bounded); the listener, if still running, reconnects."""
        self.connected.clear()
        pubsub, client, self.pubsub, self.client = self.pubsub, self.client, None, None
        await close_quietly(pubsub)
        await close_quietly(client)

    async def _run(self) -> None:
        attempt = 0
        while True:
            try:
                if self.pubsub is None:
                    await self._open()
                    if self.lost:
                        self.lost = False
                        attempt = 0
                        self.bus.reconnects += 1
                        metrics.BUS_RECONNECTS.inc()
                        log.info(
                            "redis cluster shard %s:%d reconnected; subscribers catch up from the log",
                            self.host,
                            self.port,
                        )
                        self.catch_up_owed = True
                assert self.pubsub is not None
                await self.bus.listen_to(self.pubsub, self.confirm, self._resubscribed, self._moved_away)
            except asyncio.CancelledError:
                await self.close()
                raise
            except Exception as exc:
                if not self.lost:
                    log.warning("redis cluster shard %s:%d failed (%s); reconnecting", self.host, self.port, exc)
                self.lost = True
                await self.close()
                attempt += 1
                await asyncio.sleep(min(MAX_BACKOFF, 0.05 * 2**attempt) * (0.5 + random.random() / 2))
                await self.bus.rehome(self)

    def _resubscribed(self) -> None:
        if self.catch_up_owed:
            self.catch_up_owed = False
            self.bus.shard_reconnected()

    def _moved_away(self, channel: bytes | str) -> bool:
        """Redis unsubscribes a shard channel whose slot moved to another node: follow it there."""
        name = channel.decode() if isinstance(channel, bytes) else channel
        sid = name[len(self.bus.prefix) + len("session:{") : -1]
        if sid not in self.sessions:
            return False  # our own SUNSUBSCRIBE
        self.sessions.discard(sid)
        self.bus.follow_soon(sid)
        return True


class RedisClusterBus(RedisBus):
    """The bus over Redis Cluster: sharded pub/sub (SPUBLISH/SSUBSCRIBE), one connection per node that holds
    subscribed sessions, following a session's slot when it moves."""

    def __init__(self, nodes: list[tuple[str, int]], prefix: str = DEFAULT_PREFIX) -> None:
        super().__init__(",".join(f"{h}:{p}" for h, p in nodes), prefix=prefix)
        self.nodes = nodes
        self._shards: dict[tuple[str, int], _Shard] = {}
        self._where: dict[str, _Shard] = {}
        self._homeless: set[str] = set()  # subscribed while no node was known to serve their slot
        self._background: set[asyncio.Task[None]] = set()
        self._cluster: RedisCluster | None = None  # the same client as ``client``, with its cluster type

    def publish_command(self, target: Any, channel: str, payload: bytes) -> Any:
        return target.spublish(channel, payload)

    async def connect(self) -> None:
        # One retry (after refreshing the slot map, which follows a failover) and no backoff: a publish
        # to a shard that is down fails at once and joins the unsent batches, instead of holding up the
        # change that made it for the client's default of several backed-off attempts.
        self._redis = self._cluster = RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in self.nodes],
            retry=Retry(NoBackoff(), retries=1),
            socket_connect_timeout=NODE_TIMEOUT,
            socket_timeout=NODE_TIMEOUT,
            health_check_interval=HEALTH_CHECK_INTERVAL,
        )
        await self._cluster.initialize()

    async def disconnect(self) -> None:
        self._closing = True  # no new shard or background task from here on (see _shard, _spawn)
        shards = list(self._shards.values())
        tasks = [s.task for s in shards] + list(self._background) + list(self._sending)
        if self._retrier is not None:
            tasks.append(self._retrier)
        await stop_tasks(tasks)
        # Each shard's own cleanup closes its connection; closed here too in case a task did not end in time.
        await asyncio.gather(*(shard.close() for shard in shards))
        self._shards.clear()
        self._where.clear()
        if self._cluster is not None:
            await close_quietly(self._cluster)
            # The client's close closes nothing while the client is due to refresh its slot map (as it is after
            # a node failed a command), and it waits for its lock, which a refresh holds while it asks the nodes:
            # close the nodes' connections directly too.
            for nodes in ("nodes_cache", "startup_nodes"):
                with suppress(Exception):
                    async with asyncio.timeout(CLOSE_TIMEOUT):
                        await self._cluster.nodes_manager.aclose(nodes)

    async def ping(self) -> None:
        lost = sorted(f"{shard.host}:{shard.port}" for shard in self._shards.values() if shard.lost)
        if lost:
            raise ConnectionError(f"the bus lost {', '.join(lost)} and is reconnecting")
        assert self._cluster is not None
        await self._cluster.ping()

    def _spawn(self, coro: Any) -> None:
        if self._closing:
            coro.close()
            return
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _owner(self, session_id: str) -> tuple[str, int]:
        assert self._cluster is not None
        node = self._cluster.get_node_from_key(session_channel(self.prefix, session_id))
        assert node is not None  # None only when asked for a replica
        return node.host, int(node.port)

    def _shard(self, address: tuple[str, int]) -> _Shard:
        shard = self._shards.get(address)
        if shard is None:
            if self._closing:  # a shard started now would outlive the bus, its connection never closed
                raise ConnectionError("the bus is disconnecting")
            shard = self._shards[address] = _Shard(self, *address)
        return shard

    async def subscribe(self, session_id: str) -> None:
        if self._closing:
            return  # the bus is going away (a background follow may still ask)
        channel = session_channel(self.prefix, session_id)
        try:
            address = self._owner(session_id)
        except UNAVAILABLE:
            # No node is known to serve the slot now: subscribe once one is, then catch up from the log.
            self._homeless.add(session_id)
            self._spawn(self._find_home(session_id))
            return
        shard = self._shard(address)
        shard.sessions.add(session_id)
        self._where[session_id] = shard
        if shard.lost:
            return  # the shard's reconnect subscribes it and has every subscriber catch up; no wait here
        try:
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT):
                await shard.connected.wait()
        except TimeoutError:
            # The node has not answered the shard's first connect: once it does, the listener subscribes the
            # session there and has every subscriber catch up from the log.
            shard.lost = True
            log.warning("shard %s:%d not connected; %s subscribes once it is", shard.host, shard.port, session_id)
            return
        pubsub = shard.pubsub
        if pubsub is not None and pubsub.lost is None:
            await pubsub.join(channel, shard.confirm, sharded=True)

    async def unsubscribe(self, session_id: str) -> None:
        self._homeless.discard(session_id)
        shard = self._where.pop(session_id, None)
        if shard is None:
            return
        shard.sessions.discard(session_id)
        pubsub = shard.pubsub
        if pubsub is not None and pubsub.lost is None and shard.connected.is_set():
            await pubsub.leave(session_channel(self.prefix, session_id), sharded=True)

    async def _refresh_slots(self) -> None:
        """Ask the nodes who serves which slot now (best effort: a refresh that fails keeps the old map).

        Bounded by the client's timeouts (each node asked in turn, each within NODE_TIMEOUT), not cut short:
        a refresh cancelled while it opens a connection leaves that connection open, in no node's pool."""
        assert self._cluster is not None
        with suppress(*UNAVAILABLE):
            await self._cluster.nodes_manager.initialize()

    async def rehome(self, shard: _Shard) -> None:
        """Before a shard reconnects: refresh the slot map and move sessions whose slot has a new owner."""
        await self._refresh_slots()
        for sid in list(shard.sessions):
            with suppress(*UNAVAILABLE):  # no known owner now: stay, retry next time
                owner = self._owner(sid)
                if owner != (shard.host, shard.port):
                    shard.sessions.discard(sid)
                    self._spawn(self._follow(sid))

    def shard_reconnected(self) -> None:
        """A shard's connection came back: every subscriber catches up from the log."""
        self._on_reconnect()

    def follow_soon(self, session_id: str) -> None:
        """The session's slot moved to another node: subscribe it there, in the background."""
        self._spawn(self._follow(session_id))

    async def _follow(self, session_id: str) -> None:
        """Subscribe a session again on its current owner, then have its subscribers catch up."""
        if self._where.pop(session_id, None) is None:
            return  # unsubscribed meanwhile
        await self._refresh_slots()
        await self.subscribe(session_id)
        self._on_reconnect()

    async def _find_home(self, session_id: str) -> None:
        """Until a node serves the session's slot again (or it is unsubscribed): then subscribe there."""
        attempt = 0
        while session_id in self._homeless:
            attempt += 1
            await asyncio.sleep(min(MAX_BACKOFF, 0.05 * 2**attempt) * (0.5 + random.random() / 2))
            await self._refresh_slots()
            try:
                self._owner(session_id)
            except UNAVAILABLE:
                continue
            if session_id in self._homeless:
                self._homeless.discard(session_id)
                await self.subscribe(session_id)
                self._on_reconnect()
