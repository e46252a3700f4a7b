"""Redis pub/sub backend: several processes share one session's events.

One PubSub connection per process carries every session channel this process subscribed to; one listener
task reads it and hands each message to the hub. The listener is supervised: on a Redis error it logs,
reconnects with backoff, re-subscribes every channel, and, once Redis has registered those subscriptions (not
merely been sent them), tells the hub that messages may have been lost, so every local subscriber catches up
from the event log. Whatever else may have lost messages counts the same
(:class:`BusPubSub`): a reconnection redis-py made by itself inside a call, a (un)subscribe that failed, was
cut short or was not confirmed in time, and a Redis that stopped answering the health check.

No call waits long on a Redis that went away: no command is retried inside the client, every connect and
reply is bounded (``NODE_TIMEOUT``), and a subscribe or unsubscribe has a deadline (``SUBSCRIBE_TIMEOUT``).

Publishing never raises: a batch that could not be published (Redis down) is kept and retried in the
background. Subscribers drop repeats by seq, so a late or repeated publish is harmless.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .. import metrics
from ..domain.events import EventEnvelope
from .base import Bus
from .keys import (
    DEFAULT_PREFIX,
    control_channel,
    session_channel,
    session_from_channel,
    session_streams_key,
    stream_text_key,
)
from .redis_buckets import RedisRateBuckets
from .redis_presence import RedisPresence
from .streams import SharedStreamTexts

log = logging.getLogger(__name__)

SUBSCRIBE_TIMEOUT = 5.0
# The longest a connect, or the reply to one command, may take before its Redis counts as unreachable. Set
# on every client here rather than left to the client's default: a Redis that stops answering without closing
# its connections (frozen, or cut off by the network) must fail a call, not hold it.
NODE_TIMEOUT = 5.0
# The longest closing the bus waits for its background tasks, and for one client's close, before it moves on.
CLOSE_TIMEOUT = 5.0
HEALTH_CHECK_INTERVAL = 10  # an idle pub/sub connection PINGs its Redis this often (seconds)
# What a listener PINGs its connection with after (re)subscribing every channel (:meth:`BusPubSub.resubscribed`).
RESUBSCRIBED = b"chatsync-resubscribed"
MAX_BACKOFF = 5.0
MAX_UNSENT_BATCHES = 10_000
STREAM_TTL_SECONDS = 24 * 3600  # a crashed replica's partial texts do not stay forever
# What Redis being unreachable looks like to a caller. Every Redis call here is best-effort (a publish is
# retried, a shared text falls back to the database, a lost subscription to a catch-up from the log), and
# the client does not keep to ``RedisError``: the cluster client raises its own ``RedisClusterException``
# (no node serves the slot), and a command racing the close of a failed node's connection surfaces
# ``AttributeError`` or uvloop's ``RuntimeError`` from inside redis-py. So any exception counts.
UNAVAILABLE: tuple[type[Exception], ...] = (Exception,)


def encode(events: Sequence[EventEnvelope]) -> bytes:
    """One line per event: ``seq|type|json`` (seq empty for ephemeral events; JSON has no raw newline), after a
    header line ``#<published at>[ <traceparent>]`` when the first event carries them (``server.tracing``)."""
    body = "\n".join(("" if env.seq is None else str(env.seq)) + "|" + env.type + "|" + env.json for env in events)
    first = events[0]
    if first.published_at:
        header = (
            f"#{first.published_at!r}"
            if first.trace_parent is None
            else f"#{first.published_at!r} {first.trace_parent}"
        )
        body = header + "\n" + body
    return body.encode()


def decode(session_id: str, data: bytes) -> list[EventEnvelope]:
    out = []
    lines = data.decode().split("\n")
    header = lines.pop(0)[1:].split(" ", 1) if lines[0].startswith("#") else None
    for line in lines:
        seq, type_, json = line.split("|", 2)
        env = EventEnvelope(session_id, int(seq) if seq else None, type_, json)
        if env.seq is None:
            # Ephemeral events need their stream position for snapshot filtering; parsed once per process.
            fields = orjson.loads(json)
            env.message_id, env.offset = fields.get("messageId"), fields.get("offset")
        out.append(env)
    if header is not None and out:
        out[0].published_at = float(header[0])
        out[0].trace_parent = header[1] if len(header) > 1 else None
    return out


async def stop_tasks(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Cancel background tasks and wait until they end, for at most ``CLOSE_TIMEOUT``: a task's cleanup can
    wait on a Redis that no longer answers, and closing the bus must not. The caller closes the connections
    itself afterwards, which ends a task still waiting on one."""
    for task in tasks:
        task.cancel()
    if tasks:
        _done, pending = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
        if pending:
            log.warning("%d bus task(s) still closing; closing their connections", len(pending))


async def close_quietly(closeable: Any) -> None:
    """``aclose()`` a Redis client or pub/sub connection, for at most ``CLOSE_TIMEOUT``, whatever it raises."""
    if closeable is not None:
        with suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await closeable.aclose()


class BusPubSub(PubSub):
    """A bus's pub/sub connection, which its listener counts as lost (it reconnects, re-subscribes every
    channel and has every subscriber catch up from the log) once ``lost`` says why.

    redis-py reconnects a pub/sub connection by itself inside a call that finds it broken (a command's failure
    handler, a read that finds it closed) and re-subscribes its channels without a word: whatever was published
    in between is gone, and nothing would tell the subscribers to catch up. Such a reconnection marks it lost,
    and so does a (un)subscribe that failed, was cut short or was not confirmed in time (the connection's state
    is then unknown: a command half sent, a reconnection half made).
    """

    lost: str | None = None

    async def on_connect(self, connection: Connection) -> None:
        # Called on reconnections only: the pool makes the first connection before the pub/sub registers this.
        self.mark_lost("redis-py reconnected it inside a call")
        await super().on_connect(connection)

    async def control(self, reply: Any) -> dict[str, Any] | None:
        """A reply other than a published message (a (un)subscribe's confirmation, a PING's answer) as the
        client's message dict, through the client's own handling, which keeps its record of subscriptions."""
        msg: dict[str, Any] | None = await self.handle_message(reply)  # type: ignore[no-untyped-call]
        return msg

    async def resubscribed(self) -> None:
        """Ask Redis to say when it has registered every (un)subscribe sent so far: it answers one
        connection's commands in order, so the answer to this PING comes after their confirmations, and
        :meth:`RedisBus.listen_to` then calls its ``resubscribed``. A subscriber that caught up from the log any
        earlier could miss what was published between its read and Redis registering the subscription."""
        await self.ping(RESUBSCRIBED)

    def mark_lost(self, why: str) -> None:
        if self.lost is None:
            self.lost = why

    async def join(self, channel: str, confirm: dict[str, asyncio.Future[None]], *, sharded: bool = False) -> None:
        """(S)SUBSCRIBE ``channel`` and wait until Redis confirms it (the listener resolves its future in
        ``confirm``), within ``SUBSCRIBE_TIMEOUT``: a publish accepted before Redis registered the subscription
        would not reach us, and the subscriber reads the log right after this returns. One that fails, is not
        confirmed in time or is cut short before it was sent marks the connection lost: its listener
        reconnects, re-subscribes every channel and has every subscriber catch up from the log."""
        fut = asyncio.get_running_loop().create_future()
        confirm[channel] = fut
        sent = False
        try:
            # (Not ``asyncio.wait_for``: on Python 3.11 it returns the result instead of raising when the caller
            # is cancelled just as the confirmation arrives, and a subscription whose client had gone would then
            # run on for ever.)
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT):
                await (self.ssubscribe(channel) if sharded else self.subscribe(channel))
                sent = True
                await fut
        except UNAVAILABLE as exc:
            self.mark_lost(f"a subscribe failed or was not confirmed in time ({type(exc).__name__})")
            log.warning("subscribe to %s not confirmed; reconnecting, subscribers catch up from the log", channel)
        except BaseException:
            if not sent:
                self.mark_lost("a subscribe was cut short")
            raise
        finally:
            confirm.pop(channel, None)

    async def leave(self, channel: str, *, sharded: bool = False) -> None:
        """(S)UNSUBSCRIBE ``channel`` within ``SUBSCRIBE_TIMEOUT``. One that fails or is cut short marks the
        connection lost: its listener reconnects (without the channel)."""
        done = False
        try:
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT):
                await (self.sunsubscribe(channel) if sharded else self.unsubscribe(channel))
            done = True
        except UNAVAILABLE as exc:
            log.warning("unsubscribe from %s failed (%s); reconnecting", channel, type(exc).__name__)
        finally:
            if not done:
                self.mark_lost("an unsubscribe failed or was cut short")


def open_pubsub(client: aioredis.Redis) -> BusPubSub:
    """A :class:`BusPubSub` on ``client``'s connection pool (not yet connected)."""
    return BusPubSub(client.connection_pool)


def check_listening(pubsub: BusPubSub) -> None:
    """Raise (a listener then reconnects) when ``pubsub`` is marked lost, or its Redis has not answered the
    health check PING for ``NODE_TIMEOUT``.

    A Redis that stops answering without closing the connection (frozen, cut off by the network) sends nothing
    more: :func:`watch_connection` sends the PING when the connection has been idle for
    ``HEALTH_CHECK_INTERVAL``, and every reply read moves ``next_health_check`` on.
    """
    if pubsub.lost is not None:
        raise ConnectionError(f"pub/sub connection lost: {pubsub.lost}")
    conn = pubsub.connection
    if conn is None or conn.next_health_check <= 0:  # not read from yet
        return
    if asyncio.get_running_loop().time() > conn.next_health_check + NODE_TIMEOUT:
        raise ConnectionError(f"no reply to the health check within {NODE_TIMEOUT:.0f} s")


async def read_replies(pubsub: BusPubSub, handle: Callable[[Any], Awaitable[None] | None]) -> None:
    """Hand every reply that arrives on ``pubsub``'s connection to ``handle``, until the connection fails or
    counts as lost (:func:`check_listening`); the caller then reconnects and has its subscribers catch up.

    Each reply is read straight off the connection as it comes: no timeout per read, and none of the client's
    per-message wrapping (its retry wrapper, observability hooks, a dict per message), which cost several times
    what parsing the reply does. :func:`watch_connection` looks after the connection meanwhile. ``handle``
    returns None, or an awaitable for a reply that needs one.
    """
    watchdog = asyncio.create_task(watch_connection(pubsub), name="redis-pubsub-watchdog")
    try:
        while True:
            conn = pubsub.connection
            assert conn is not None
            reply = await conn.read_response(timeout=math.inf, push_request=True)
            pending = handle(reply)
            if pending is not None:
                await pending
            check_listening(pubsub)
    finally:
        watchdog.cancel()


async def watch_connection(pubsub: BusPubSub) -> None:
    """Every second, while :func:`read_replies` waits for a reply: send the health check PING when it is due,
    and close the connection once it counts as lost (:func:`check_listening`: marked lost, or the PING left
    unanswered), which ends the waiting read with an error."""
    while True:
        await asyncio.sleep(1.0)
        try:
            check_listening(pubsub)
            await pubsub.check_health()  # type: ignore[no-untyped-call]  # the PING, when due
        except UNAVAILABLE as exc:
            log.warning("redis pub/sub connection: %s; closing it", exc)
            conn = pubsub.connection
            if conn is not None:
                await conn.disconnect(nowait=True)
            return


def _text(value: bytes | str) -> str:
    """A reply as text (the client is made without ``decode_responses``, so replies are bytes)."""
    return value.decode() if isinstance(value, bytes) else value


class RedisBus(Bus):
    """The bus over one Redis server (``redis://``): PUBLISH/SUBSCRIBE per session channel, with a listener that
    reconnects (subscribers then catch up from the log) and publishes that Redis refused retried in order."""

    def __init__(self, url: str, prefix: str = DEFAULT_PREFIX) -> None:
        super().__init__()
        self.url = url
        self.prefix = prefix
        self._session_channels = session_channel(prefix, "")[: -len("{}")]  # what every session channel starts with
        # Redis Cluster's backend (``redis_cluster``) keeps its cluster client here.
        self._redis: aioredis.Redis | RedisCluster | None = None
        self._pubsub: BusPubSub | None = None
        self._channels: set[str] = set()
        self._confirm: dict[str, asyncio.Future[None]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._unsent: deque[tuple[str, bytes]] = deque(maxlen=MAX_UNSENT_BATCHES)
        self._retrier: asyncio.Task[None] | None = None
        self._closing = False  # disconnect() began: start no more background work
        self.reconnects = 0  # listener reconnections after an error (for tests and metrics)
        self._catch_up_owed = False  # reconnected: the subscribers catch up once Redis confirms the subscribes
        self._sending: set[asyncio.Task[None]] = set()  # pipelines of stream deltas on their way (send_soon)

    @property
    def client(self) -> aioredis.Redis | RedisCluster:
        """The bus's Redis client (one connection pool per process), shared by the stores made by this bus
        (:meth:`shared_stream_texts`, :meth:`rate_buckets`, :meth:`presence`). Only once connected."""
        if self._redis is None:
            raise ConnectionError("the bus is not connected to Redis")
        return self._redis

    def publish_command(self, target: Any, channel: str, payload: bytes) -> Any:
        """PUBLISH on a client or pipeline (Redis Cluster's sharded backend sends SPUBLISH instead)."""
        return target.publish(channel, payload)

    def send_soon(self, coro: Any) -> None:
        """Run ``coro`` (a pipeline of stream deltas: :class:`RedisStreamTexts`) as a task of its own, which
        closing the bus stops."""
        task = asyncio.create_task(coro)
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    # --- lifecycle ------------------------------------------------------------------------------------

    async def connect(self) -> None:
        # No retries inside the client: a command fails at the first error (publishes are retried in order by
        # ``_retry_unsent``, the pub/sub connection is reconnected by its listener, with backoff).
        self._redis = aioredis.Redis.from_url(
            self.url,
            health_check_interval=HEALTH_CHECK_INTERVAL,
            socket_connect_timeout=NODE_TIMEOUT,
            socket_timeout=NODE_TIMEOUT,
            retry=Retry(NoBackoff(), retries=0),
        )
        await self._open_pubsub()
        self._listener = asyncio.create_task(self._listen_forever(), name="redis-bus-listener")

    async def disconnect(self) -> None:
        self._closing = True
        await stop_tasks([task for task in (self._listener, self._retrier, *self._sending) if task is not None])
        await close_quietly(self._pubsub)
        await close_quietly(self._redis)

    async def _open_pubsub(self) -> None:
        assert isinstance(self._redis, aioredis.Redis)
        pubsub = open_pubsub(self._redis)
        wanted = set(self._channels)
        try:
            # The control channel keeps the connection subscribed (and readable) even with no sessions.
            await pubsub.subscribe(control_channel(self.prefix), *[session_channel(self.prefix, s) for s in wanted])
            # Sessions subscribed or unsubscribed while this waited for Redis (they only changed ``_channels``):
            # the connection follows them before it counts as connected.
            while wanted != self._channels:
                added, gone, wanted = self._channels - wanted, wanted - self._channels, set(self._channels)
                if added:
                    await pubsub.subscribe(*[session_channel(self.prefix, s) for s in added])
                if gone:
                    await pubsub.unsubscribe(*[session_channel(self.prefix, s) for s in gone])
            await pubsub.resubscribed()
        except BaseException:
            await close_quietly(pubsub)
            raise
        self._pubsub = pubsub
        self._connected.set()

    # --- subscriptions --------------------------------------------------------------------------------

    async def subscribe(self, session_id: str) -> None:
        self._channels.add(session_id)
        pubsub = self._pubsub
        if not self._connected.is_set() or pubsub is None or pubsub.lost is not None:
            # Redis is away: the listener's reconnect subscribes every channel in ``_channels`` and then
            # has every subscriber catch up from the log. Waiting here would hold the caller (and the hub)
            # for as long as the outage lasts.
            return
        await pubsub.join(session_channel(self.prefix, session_id), self._confirm)

    async def unsubscribe(self, session_id: str) -> None:
        self._channels.discard(session_id)
        pubsub = self._pubsub
        if pubsub is not None and pubsub.lost is None and self._connected.is_set():
            await pubsub.leave(session_channel(self.prefix, session_id))

    # --- publishing -----------------------------------------------------------------------------------

    async def publish(self, session_id: str, events: Sequence[EventEnvelope]) -> None:
        if not events:
            return
        payload = encode(events)
        channel = session_channel(self.prefix, session_id)
        try:
            assert self._redis is not None
            await self.publish_command(self._redis, channel, payload)
        except UNAVAILABLE as exc:
            log.warning("publish to %s failed (%s); will retry", session_id, exc)
            self._unsent.append((channel, payload))
            if not self._closing and (self._retrier is None or self._retrier.done()):
                self._retrier = asyncio.create_task(self._retry_unsent())

    async def _retry_unsent(self) -> None:
        delay = 0.1
        while self._unsent:
            channel, payload = self._unsent[0]
            try:
                assert self._redis is not None
                await self.publish_command(self._redis, channel, payload)
                self._unsent.popleft()
                delay = 0.1
            except UNAVAILABLE:
                await asyncio.sleep(delay)
                delay = min(MAX_BACKOFF, delay * 2)

    async def ping(self) -> None:
        if not self._connected.is_set():
            raise ConnectionError("the bus lost Redis and is reconnecting")
        assert self._redis is not None
        await self._redis.ping()

    def shared_stream_texts(self) -> RedisStreamTexts:
        return RedisStreamTexts(self)

    def rate_buckets(self) -> RedisRateBuckets:
        return RedisRateBuckets(self)

    def presence(self) -> RedisPresence:
        return RedisPresence(self)

    # --- the listener ---------------------------------------------------------------------------------

    async def _listen_forever(self) -> None:
        attempt = 0
        while True:
            try:
                await self._listen()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._connected.clear()
                log.warning("redis bus listener failed (%s); reconnecting", exc)
                await close_quietly(self._pubsub)
                while True:
                    attempt += 1
                    await asyncio.sleep(min(MAX_BACKOFF, 0.05 * 2**attempt) * (0.5 + random.random() / 2))
                    try:
                        await self._open_pubsub()
                        break
                    except UNAVAILABLE as again:
                        log.warning("redis bus reconnect attempt %d failed: %s", attempt, again)
                attempt = 0
                self.reconnects += 1
                metrics.BUS_RECONNECTS.inc()
                log.info("redis bus reconnected; subscribers catch up from the event log once it is subscribed")
                self._catch_up_owed = True

    async def _listen(self) -> None:
        assert self._pubsub is not None
        await self.listen_to(self._pubsub, self._confirm, self._resubscribed)

    def _resubscribed(self) -> None:
        if self._catch_up_owed:
            self._catch_up_owed = False
            self._on_reconnect()

    async def listen_to(
        self,
        pubsub: BusPubSub,
        confirm: dict[str, asyncio.Future[None]],
        resubscribed: Callable[[], None],
        unsubscribed: Callable[[Any], bool] | None = None,
    ) -> None:
        """Hand what arrives on ``pubsub`` to the hub, and resolve the futures of confirmed subscriptions,
        until the connection fails or counts as lost (:func:`read_replies`). ``resubscribed`` is called when
        Redis has registered every subscribe sent before :meth:`BusPubSub.resubscribed`. ``unsubscribed``, given
        an unsubscribe's channel, says whether it dealt with it (Redis Cluster: a shard channel whose slot moved).
        """

        async def other(reply: Any) -> None:
            msg = await pubsub.control(reply)
            if msg is None:
                return
            if msg["type"] == "pong" and msg["data"] == RESUBSCRIBED:
                resubscribed()
                return
            if unsubscribed is not None and msg["type"] == "sunsubscribe" and unsubscribed(msg["channel"]):
                return
            self.handle_message(msg, confirm)

        def handle(reply: Any) -> Awaitable[None] | None:
            return None if self.handle_published(reply) else other(reply)

        await read_replies(pubsub, handle)

    def handle_published(self, reply: Any) -> bool:
        """Hand a published message (``[b"message" or b"smessage", channel, data]``, as read off the connection)
        to the hub; False for any other reply (a subscription's confirmation, a PING's answer)."""
        # (A list: hiredis gives a push message as its list subclass.)
        if not isinstance(reply, list) or len(reply) != 3 or reply[0] not in (b"message", b"smessage"):
            return False
        self._deliver(reply[1].decode(), reply[2])
        return True

    def handle_message(self, msg: dict[str, Any], confirm: dict[str, asyncio.Future[None]]) -> None:
        """Hand a session message to the hub; resolve the future of a confirmed subscription (``msg`` as the
        client's ``handle_message`` makes it)."""
        kind = msg["type"]
        channel = msg["channel"].decode() if isinstance(msg["channel"], bytes) else msg["channel"]
        if kind in ("message", "smessage"):
            self._deliver(channel, msg["data"])
        elif kind in ("subscribe", "ssubscribe"):
            fut = confirm.get(channel)
            if fut is not None and not fut.done():
                fut.set_result(None)

    def _deliver(self, channel: str, data: bytes) -> None:
        if channel.startswith(self._session_channels):
            session_id = session_from_channel(self.prefix, channel)
            try:
                events = decode(session_id, data)
            except Exception:
                log.exception("undecodable bus message on %s", channel)
                return
            self._on_message(session_id, events)


class RedisStreamTexts(SharedStreamTexts):
    """Each streaming message's text is an APPENDed Redis string (with a TTL, so a crashed replica's
    texts do not stay), and each session's streaming messages a set; both in the session's hash slot.

    APPEND and PUBLISH of a delta go in one pipeline, on one connection, in that order: Redis applies the
    APPEND first, so a snapshot read either contains a delta or was taken before the delta was published
    (and the reader, subscribed before it read, receives the delta). Offsets then line up exactly.

    The deltas appended in one turn of the event loop, whatever their sessions, share that pipeline: it is
    sent once the turn's other tasks have run, and each ``append`` returns when Redis has answered it. A
    session's next delta is appended only after its previous one returned, so each session's deltas reach
    Redis in order. The TTL is set once, when the stream starts (``APPEND`` keeps a key's TTL).
    """

    def __init__(self, bus: RedisBus) -> None:
        self.bus = bus
        # The deltas of this turn of the event loop: (text key, delta, channel, payload), in call order.
        self._batch: list[tuple[str, str, str, bytes]] = []
        self._sent: asyncio.Future[None] | None = None  # resolved when the batch's pipeline is answered

    async def started(self, session_id: str, message_id: str, initial: str = "") -> None:
        redis, prefix = self.bus.client, self.bus.prefix
        key = stream_text_key(prefix, session_id, message_id)
        members = session_streams_key(prefix, session_id)
        try:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.set(key, initial, ex=STREAM_TTL_SECONDS)
                pipe.sadd(members, message_id)
                pipe.expire(members, STREAM_TTL_SECONDS)
                await pipe.execute()
        except UNAVAILABLE as exc:
            log.warning("stream start for %s not recorded in Redis: %s", message_id, exc)

    async def append(self, session_id: str, env: EventEnvelope, message_id: str, delta: str) -> None:
        prefix = self.bus.prefix
        key = stream_text_key(prefix, session_id, message_id)
        self._batch.append((key, delta, session_channel(prefix, session_id), encode((env,))))
        sent = self._sent
        if sent is None:
            loop = asyncio.get_running_loop()
            sent = self._sent = loop.create_future()
            loop.call_soon(self._send_batch)  # after the tasks ready in this turn have appended theirs
        # Shielded: a caller cancelled meanwhile (an abort) must not cancel the other callers' wait.
        await asyncio.shield(sent)

    def _send_batch(self) -> None:
        batch, sent = self._batch, self._sent
        self._batch, self._sent = [], None
        assert sent is not None
        self.bus.send_soon(self._send(batch, sent))

    async def _send(self, batch: list[tuple[str, str, str, bytes]], sent: asyncio.Future[None]) -> None:
        try:
            async with self.bus.client.pipeline(transaction=False) as pipe:
                for key, delta, channel, payload in batch:
                    pipe.append(key, delta)
                    self.bus.publish_command(pipe, channel, payload)
                await pipe.execute()
        except UNAVAILABLE as exc:
            # Deltas are not retried: the final text arrives with message-completed, and reconnecting
            # clients get a snapshot.
            log.debug("%d delta(s) not published: %s", len(batch), exc)
        finally:
            if not sent.done():
                sent.set_result(None)

    async def ended(self, session_id: str, message_id: str) -> None:
        redis, prefix = self.bus.client, self.bus.prefix
        try:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.srem(session_streams_key(prefix, session_id), message_id)
                pipe.delete(stream_text_key(prefix, session_id, message_id))
                await pipe.execute()
        except UNAVAILABLE as exc:
            log.warning("stream end for %s not recorded in Redis: %s", message_id, exc)

    async def snapshot(self, session_id: str) -> list[dict[str, object]] | None:
        redis, prefix = self.bus.client, self.bus.prefix
        try:
            ids = sorted(_text(m) for m in await redis.smembers(session_streams_key(prefix, session_id)))
            if not ids:
                return []
            texts = await redis.mget([stream_text_key(prefix, session_id, m) for m in ids])
        except UNAVAILABLE as exc:
            log.warning("stream snapshot of %s unavailable: %s", session_id, exc)
            return None
        out: list[dict[str, object]] = []
        for mid, raw in zip(ids, texts):
            text = _text(raw) if raw is not None else ""
            out.append({"messageId": mid, "offset": len(text), "text": text})
        return out
