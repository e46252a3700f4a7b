"""Per-subscriber delivery: every durable event after ``after_seq`` exactly once, in order.

Invariant (docs/sync.md; the invariants of docs/architecture.md): the subscriber receives seq ``after_seq+1,
after_seq+2, ...`` with no gap and no repeat. Live events come from the bus and may arrive out of order (two replicas
publish concurrently) or not at all (Redis restarted). Both are repaired from the event log:

* seq < next           -> already delivered: dropped (a duplicate).
* seq == next          -> delivered at once, then any buffered successors.
* seq > next           -> buffered, and a catch-up reads ``next..`` from the log.

Seq N+1 is assigned only after the transaction holding seq N committed (writers to a session are
serialised on its row), so when N+1 is seen, N is already readable: a log read always fills the gap.
When the log no longer holds ``next`` (trimmed by retention) the client is told ``resync-required``.

Ephemeral stream events (token deltas) carry ``(messageId, offset)`` instead of a seq (invariant 4).
They are held while catching up; once caught up, the subscriber gets one ``stream-snapshot`` per
message still streaming (from the :data:`SnapshotSource`), then the held and live deltas at or past that
offset. Because the subscriber is attached before the snapshot is read and every delta is in the shared
text before it is published, each character arrives exactly once: in the snapshot or as a delta. The
snapshot is read before the log read that ends the catch-up: a message streams only once its
``message-created`` (or ``message-continued``) is committed, so that read delivers it ahead of the snapshot
of its text, however long the snapshot took to read (a round trip to the shared stream buffer). Once a
subscriber got a message's ``message-completed`` (its final text), no snapshot or delta of that message
reaches it: not the deltas held while the read that delivered the completion was in flight, nor one a bus
delivers late.
They are sent *tracked* with the id of the last durable event delivered, because ``@trpc/client``
forgets its resume position on an untracked item; resuming from that id is exactly right.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from .. import metrics
from ..domain.events import EventEnvelope, stream_snapshot
from ..protocol.errors import RpcError
from ..store import repo
from ..store.db import Database
from ..store.eventlog import SESSION_LOG, LogReader
from .admission import gate
from .writer import SubscriptionWriter

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from .hub import Hub

log = logging.getLogger(__name__)

SendItem = Callable[[str | None, EventEnvelope | dict[str, Any]], None]
"""Sends one item to the subscriber: ``(tracked id or None, event envelope or control dict)``; must not block."""

SnapshotSource = Callable[[str], Awaitable[list[dict[str, Any]]]]
"""Returns ``[{messageId, offset, text}]`` for the session's messages that are streaming right now."""

# Events per log read while catching up. Each read runs on the loop (SQLite) and its page is decoded in one go,
# so the page stays small enough that large events (up to max_content_chars each) cannot stall everyone else.
CATCH_UP_PAGE = 100
MAX_HELD_EPHEMERAL = 10_000
# Durable events a delivery looks into (``_deliver``); fan-out's batch path leaves them to it.
_MARKING_TYPES = frozenset({"message-completed", "message-continued", "session-deleted"})
# In ``Delivery._stream_offsets``: the subscriber has this message's final text, so every delta of it is stale.
COMPLETED = sys.maxsize
# Completed messages a delivery remembers so (the newest). A session streams one answer at a time, so one or
# two complete during a catch-up's read; a few ids per subscriber, not one per answer of a long chat.
MAX_COMPLETED_MARKS = 4


class ResyncRequired(Exception):
    """The requested position is no longer in the retained log (or never was)."""


class Delivery:
    """A live view of one session for one subscriber; run with :meth:`run`."""

    # Fan-out touches one of these per subscriber per event: no per-instance dict to chase.
    __slots__ = (
        "_catch_up_task",
        "_catching_up",
        "_done",
        "_finished",
        "_held",
        "_log",
        "_pending",
        "_send_item",
        "_snapshots",
        "_stream_offsets",
        "_verify_live",
        "_writer",
        "client",
        "db",
        "hub",
        "next_seq",
        "session_id",
    )

    def __init__(
        self,
        db: Database,
        hub: Hub,
        session_id: str,
        after_seq: int,
        send_item: SendItem,
        snapshots: SnapshotSource | None = None,
        writer: SubscriptionWriter | None = None,
        client: dict[str, Any] | None = None,
        log: LogReader = SESSION_LOG,
        verify_live: bool = False,
    ) -> None:
        """``writer``, when given, takes durable events instead of ``send_item`` (a transport's fast path: the
        tracked id is the event's own, and ``fan_out`` batches its writes with other subscribers'). ``client``
        describes the subscriber for admins (who, over what, since when). ``log`` is the event log read to catch
        up (``store.eventlog``: a session's, or a user's feed, whose channel is then ``session_id``).
        ``verify_live``: the caller did not read the session (its owner came from
        :class:`~server.sync.admission.OwnerCache`), so the first log read also checks that the session is live,
        and the delivery fails with ``NOT_FOUND`` if it is not."""
        self.db = db
        self.hub = hub
        self.session_id = session_id
        self.next_seq = after_seq + 1
        self._send_item = send_item
        self._writer = writer
        self._finished = False  # no more deliveries (session deleted, resync sent, or failed)
        self._snapshots = snapshots
        self._pending: dict[int, EventEnvelope] = {}
        # messageId -> offset the subscriber has text up to (from a snapshot), or COMPLETED
        self._stream_offsets: dict[str, int] = {}
        self._held: list[EventEnvelope] = []  # ephemeral events that arrived while catching up
        self._catching_up = True
        self._catch_up_task: asyncio.Task[None] | None = None
        self._done: asyncio.Future[None] | None = None
        self.client = client
        self._log = log
        self._verify_live = verify_live

    async def run(self) -> None:
        """Deliver until the session is deleted, the position is lost, or the task is cancelled."""
        self._done = asyncio.get_running_loop().create_future()
        # Attach before reading the log, so nothing published during the read is missed.
        await self.hub.attach(self)
        try:
            started, first = time.perf_counter(), self.next_seq
            await self._catch_up()
            metrics.caught_up(self.next_seq - first, time.perf_counter() - started)
            _raise_if_cancelled()
            await self._done  # raises what failed the first catch-up (a read, NOT_FOUND), if anything did
        finally:
            self._finished = True
            await self.hub.detach(self)
            if self._catch_up_task is not None:
                self._catch_up_task.cancel()

    # --- called by the hub (synchronously, on the loop; see also ``fan_out``) ---------------------------

    def on_event(self, env: EventEnvelope) -> None:
        # Called once per event per subscriber: the common case (the next seq, live) is kept short.
        seq = env.seq
        if seq == self.next_seq and not self._catching_up and not self._finished:
            self._deliver(env)
            if self._pending:
                self._drain_pending()
            return
        if seq is None:
            if not self._catching_up:
                self._deliver_ephemeral(env)
            elif len(self._held) < MAX_HELD_EPHEMERAL:
                # Kept until the snapshot is known: those it covers are dropped, the rest delivered.
                self._held.append(env)
            return
        if seq < self.next_seq or self._done is None or self._done.done():
            return
        self._pending[seq] = env
        if not self._catching_up:
            self.request_catch_up()

    def batch_writer(self, first_seq: int | None) -> SubscriptionWriter | None:
        """Where ``fan_out`` may write this subscriber's next events itself, batched with other subscribers': its
        :class:`SubscriptionWriter` when it has one and is live (caught up, not finished) and, for durable events
        starting at ``first_seq``, waits for exactly that seq with nothing buffered. None: use ``on_event``."""
        writer = self._writer
        if type(writer) is not SubscriptionWriter or self._catching_up or self._finished:
            return None
        if first_seq is not None and (self.next_seq != first_seq or self._pending):
            return None
        return writer

    def covers(self, env: EventEnvelope) -> bool:
        """True when this subscriber already has what this delta carries: the stream-snapshot it got contains it,
        or it got the message's final text."""
        if not self._stream_offsets:
            return False
        mid = env.message_id
        known = None if mid is None else self._stream_offsets.get(mid)
        if known is None:
            return False
        if known == COMPLETED:
            return True
        # Only text deltas are positioned in the message text the snapshot covered; a tool-call delta's
        # offset is a position in that call's arguments.
        offset = env.offset
        return env.type == "text-delta" and offset is not None and offset < known

    def request_catch_up(self) -> None:
        """Read the log from ``next_seq`` (after a gap or a bus reconnect)."""
        if self._catching_up or self._done is None or self._done.done():
            return
        self._catching_up = True
        self._catch_up_task = asyncio.get_running_loop().create_task(self._catch_up())

    # --- internals -------------------------------------------------------------------------------------

    def _deliver(self, env: EventEnvelope) -> None:
        if self._writer is not None:
            self._writer(env)
        else:
            self._send_item(env.event_id, env)
        self.next_seq = env.seq + 1  # type: ignore[operator]  # only durable events come here: seq is set
        if env.type in _MARKING_TYPES:
            if env.type == "message-completed":
                message_id = _message_id(env)
                if message_id is not None:
                    self._mark_completed(message_id)
            elif env.type == "message-continued":
                message_id = _message_id(env)
                if message_id is not None:
                    self._stream_offsets.pop(message_id, None)  # it streams again, from its partial text
            elif env.type in self._log.ending_types and self._done is not None and not self._done.done():
                self._finished = True
                self._done.set_result(None)

    def _mark_completed(self, message_id: str) -> None:
        offsets = self._stream_offsets
        offsets.pop(message_id, None)
        offsets[message_id] = COMPLETED  # the newest mark: insertion order is age
        if len(offsets) > MAX_COMPLETED_MARKS:
            oldest = next((mid for mid, offset in offsets.items() if offset == COMPLETED), None)
            if oldest is not None:
                del offsets[oldest]

    def _deliver_ephemeral(self, env: EventEnvelope) -> None:
        if not self.covers(env):
            self._send_item(str(self.next_seq - 1), env)

    def _drain_pending(self) -> None:
        pending = self._pending
        while pending and self._done is not None and not self._done.done():
            env = pending.pop(self.next_seq, None)
            if env is None:
                # Drop stale entries; stop at the first hole.
                for seq in [s for s in pending if s < self.next_seq]:
                    del pending[seq]
                return
            self._deliver(env)

    async def _catch_up(self) -> None:
        first = self.next_seq - 1
        try:
            while True:
                async with gate(self.db):  # a place among the resume reads (``sync.admission``)
                    # The snapshot before the log: a message streams only once its creation is committed, so the
                    # read below delivers that ahead of the snapshot of its text, however long this one took.
                    snapshots = await self._read_snapshots()
                    async with self.db.read() as s:
                        if self._verify_live:
                            if await repo.get_session(s, self.session_id) is None:
                                self.hub.owners.forget(self.session_id)
                                raise RpcError("NOT_FOUND", "Session not found")
                            self._verify_live = False
                        rows = await self._log.events_after(s, self.session_id, self.next_seq - 1, CATCH_UP_PAGE)
                        if (not rows or rows[0].seq != self.next_seq) and await self._position_lost(s):
                            raise ResyncRequired
                for row in rows:
                    if self._done is None or self._done.done():
                        return
                    if row.seq == self.next_seq:
                        self._deliver(EventEnvelope(self.session_id, row.seq, row.type, row.payload))
                self._drain_pending()
                if len(rows) < CATCH_UP_PAGE and (not self._pending or min(self._pending) <= self.next_seq):
                    break
                if not rows:
                    # A hole the log cannot fill yet (our read raced the writer's commit): retry shortly.
                    await asyncio.sleep(0.01)
            self._send_snapshots(snapshots)
            self._catching_up = False
            held, self._held = self._held, []
            for env in held:
                self._deliver_ephemeral(env)
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "session %s subscriber %s: caught up from seq %d to %d, then %d stream events held while "
                    "reading (%d covered by a snapshot)",
                    self.session_id,
                    self._who(),
                    first,
                    self.next_seq - 1,
                    len(held),
                    sum(1 for env in held if self.covers(env)),
                )
            # Events that arrived while the last read was in flight.
            self._drain_pending()
            if self._pending:
                self.request_catch_up()
        except ResyncRequired:
            self._resync()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failed read must not leave the subscriber silently stuck
            if self._done is not None and not self._done.done():
                self._finished = True
                self._done.set_exception(exc)

    async def _read_snapshots(self) -> list[dict[str, Any]]:
        if self._snapshots is None:
            return []
        return await self._snapshots(self.session_id)

    def _send_snapshots(self, snapshots: list[dict[str, Any]]) -> None:
        """Deltas were dropped while catching up: give the partial text of every live stream instead."""
        if self._done is None or self._done.done():
            return
        for snap in snapshots:
            mid, offset = snap["messageId"], int(snap["offset"])
            known = self._stream_offsets.get(mid)
            if known == offset or known == COMPLETED:
                continue  # nothing new since the snapshot this subscriber already has, or its final text came
            self._stream_offsets[mid] = offset
            self._send_item(str(self.next_seq - 1), stream_snapshot(self.session_id, mid, offset, snap["text"]))
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "session %s subscriber %s: stream-snapshot of message %s to offset %d at seq %d",
                    self.session_id,
                    self._who(),
                    mid,
                    offset,
                    self.next_seq - 1,
                )

    def _who(self) -> str:
        """This subscriber in a log line: the delivery's own id (the same in all its lines) and its client."""
        client = self.client or {}
        return f"{id(self):x} ({client.get('userName', '?')} over {client.get('transport', '?')})"

    async def _position_lost(self, s: AsyncSession) -> bool:
        """True when ``next_seq`` can never be read: trimmed from the log, or beyond the session's end."""
        last_seq = await self._log.last_seq(s, self.session_id)
        if last_seq is None:
            return True
        if self.next_seq > last_seq + 1:
            return True  # a lastEventId from the future: another session's, or a restored database
        if self.next_seq == last_seq + 1:
            return False  # up to date; nothing to read yet
        oldest = await self._log.oldest_seq(s, self.session_id)
        return oldest is None or oldest > self.next_seq

    def _resync(self) -> None:
        if self._done is None or self._done.done():
            return
        self._send_item(None, self._log.resync_body(self.session_id, self.next_seq - 1))
        self._finished = True
        self._done.set_result(None)


def fan_out(deliveries: tuple[Delivery, ...], events: Sequence[EventEnvelope]) -> None:
    """Hand ``events`` to every delivery of one session, in order.

    The common cases — durable events with consecutive seqs that every subscriber is waiting for next, or
    one stream delta for subscribers that are live — are decided here for all deliveries first, then
    written in one batch (a connection writer's ``send_event_many``, ``writer.py``: with a thousand subscribers,
    a delivery's own Python is small beside its system call, and keeping the two apart is a measurable share of
    the whole, see ``docs/performance.md``; events committed together go to each connection in one write). A
    delivery in any other state (catching up, holding a gap, finished, or without a
    :class:`SubscriptionWriter`: see :meth:`Delivery.batch_writer`) goes through ``on_event``, which holds the
    full rules; deliveries are independent, so the order between them does not matter.
    """
    first = events[0].seq
    if first is None:
        if len(events) == 1:
            _fan_out_ephemeral(deliveries, events[0])
            return
    elif all(env.seq == first + i and env.type not in _MARKING_TYPES for i, env in enumerate(events)):
        after = first + len(events)
        writers: list[SubscriptionWriter] = []
        for d in deliveries:
            writer = d.batch_writer(first)
            if writer is not None:
                writers.append(writer)
                d.next_seq = after
            else:
                for env in events:
                    d.on_event(env)
        if writers:
            writers[0].connection.send_event_many(writers, events)
        return
    for d in deliveries:
        for env in events:
            d.on_event(env)


def _fan_out_ephemeral(deliveries: tuple[Delivery, ...], env: EventEnvelope) -> None:
    targets: list[tuple[SubscriptionWriter, str]] = []
    ids: dict[int, str] = {}
    for d in deliveries:
        writer = d.batch_writer(None)
        if writer is None:
            d.on_event(env)
            continue
        if d.covers(env):
            continue
        last = d.next_seq - 1
        event_id = ids.get(last)
        if event_id is None:
            event_id = ids[last] = str(last)
        targets.append((writer, event_id))
    if targets:
        targets[0][0].connection.send_tracked_many(targets, env)


def _message_id(env: EventEnvelope) -> str | None:
    try:
        message_id: str | None = orjson.loads(env.json).get("message", {}).get("id")
        return message_id
    except Exception:
        return None


def _raise_if_cancelled() -> None:
    """Raise the cancellation of the current task when a call it awaited swallowed it. On Python 3.11,
    ``asyncio.wait_for`` returns normally when the cancel lands just as the awaited work completes, and
    redis-py wraps every command it sends in one when a socket timeout is set: a subscriber whose client left
    during its catch-up's Redis read would otherwise wait for its session's end for ever. The task still
    counts the request (``Task.cancelling``), and nothing in a delivery takes one back."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
