"""The per-session message queue: messages typed while the model answers.

This module holds the queue's rules, and every path that changes a queue goes through them: the queue
procedures (:class:`QueueService`), ``message.send`` on a busy session and "send now" (``services.runs``),
and the auto-send when a run ends (``services.transitions``).

* Adding (:class:`Appender`; :meth:`QueueService.append` for one message): at the end, up to the length
  limit; each item links the files it carries to the session and is announced by ``queue-message-added``.
* Removing (:func:`take`, :func:`empty`): ``queue-message-removed`` with the reason (``sent``, ``dequeued``,
  ``removed``), or one ``queue-cleared``; a removed item's files are released unless it was sent (its message
  carries them on).
* Ordering (:func:`reorder`): positions order the queue; they are not dense (a dequeue does not shift every
  row), and a move rewrites them as 0..n-1 and says so with ``queue-reordered``.
* Holding (:func:`set_paused`): a paused queue sends nothing automatically.

Every operation runs with the session row locked, so concurrent edits from several clients apply one after
the other and each produces exactly one event describing what it did.
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import insert
from typing_extensions import TypedDict

from .. import metrics
from ..domain import events
from ..domain import models as wire
from ..domain.events import QueueRemovalReason
from ..files import refs as file_refs
from ..protocol.errors import RpcError
from ..store import repo, run_rows
from ..store.models import QueuedMessage, User
from ..store.run_rows import QueuedRow
from .requests import MISSING, Expand, Receipt, RequestKey
from .uow import SessionTx, UnitOfWork, can_read

_INSERT_QUEUED = insert(QueuedMessage.__table__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class QueuedReceipt(TypedDict):
    """What an exactly-once record keeps of a queued message (``services.requests``): its id and time."""

    id: str
    enqueuedAt: int


ENQUEUED: Receipt[QueuedReceipt, wire.QueuedMessage] = Receipt(
    TypeAdapter(QueuedReceipt), TypeAdapter(wire.QueuedMessage)
)
"""``message.enqueueMessage``'s record: the queued message's id and time."""


def queued_receipt(item: wire.QueuedMessage) -> QueuedReceipt:
    return {"id": item.id, "enqueuedAt": item.enqueued_at}


def queued_again(
    receipt: QueuedReceipt, content: str, attachments: list[dict[str, Any]], client_request_id: str | None
) -> wire.QueuedMessage:
    """The queued message a repeated write first made, from its receipt and the repeat's own input."""
    return wire.QueuedMessage(
        id=receipt["id"],
        content=content,
        attachments=attachments,
        enqueued_at=receipt["enqueuedAt"],
        client_request_id=client_request_id,
    )


# --- the rules, inside a locked session's transaction ---------------------------------------------------------


class Appender:
    """Adds messages to the end of one locked session's queue, in order: the one place a queued message is
    made. Open it with :meth:`open`, :meth:`add` each message, then :meth:`flush` writes the rows (plain
    INSERTs: enqueue is the busiest write there is, and nothing here needs ORM objects)."""

    def __init__(self, tx: SessionTx, max_length: int, length: int, last_position: int) -> None:
        self.tx = tx
        self.max_length = max_length
        self.length = length  # the queue's length with what was added so far
        self._last_position = last_position
        self._rows: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, tx: SessionTx, max_length: int) -> Appender:
        # Read after the row lock is held: on PostgreSQL a statement that waited for the lock still
        # sees the queue as it was when the statement began.
        length, last_position = await repo.queue_stats(await tx.plain(), tx.row.id)
        return cls(tx, max_length, length, last_position)

    def full_error(self) -> RpcError | None:
        if self.length >= self.max_length:
            return RpcError("PRECONDITION_FAILED", f"queue is full ({self.max_length} messages)")
        return None

    async def add(
        self, content: str, attachments: list[dict[str, Any]], client_request_id: str | None
    ) -> wire.QueuedMessage:
        """Queue one message (``PRECONDITION_FAILED`` when the queue is full) and announce it."""
        full = self.full_error()
        if full is not None:
            raise full
        tx, session_id = self.tx, self.tx.row.id
        await file_refs.link(await tx.plain(), session_id, attachments)
        self.length, self._last_position = self.length + 1, self._last_position + 1
        item = wire.QueuedMessage(
            id=f"queue-{uuid.uuid4().hex}",
            content=content,
            attachments=attachments,
            enqueued_at=_now_ms(),
            client_request_id=client_request_id,
        )
        self._rows.append(
            {
                "id": item.id,
                "session_id": session_id,
                "position": self._last_position,
                "content": content,
                "attachments": attachments,
                "enqueued_at": item.enqueued_at,
                "client_request_id": client_request_id,
            }
        )
        tx.emit(events.queue_message_added(item))
        return item

    async def flush(self) -> bool:
        """Write the added rows; True when there were any."""
        rows, self._rows = self._rows, []
        if rows:
            db = await self.tx.plain()
            await db.execute(_INSERT_QUEUED, rows[0] if len(rows) == 1 else rows)
        return bool(rows)


async def take(tx: SessionTx, item: QueuedMessage | QueuedRow, reason: QueueRemovalReason) -> None:
    """Take ``item`` out of the queue. A message ``sent`` keeps its files (its message in the history carries
    them on); one dequeued or removed releases those nothing else in the session carries. ``item`` is the ORM's
    object when the caller read the queue that way (it is deleted through it), or a plain row (one ``DELETE``)."""
    if isinstance(item, QueuedMessage):
        await (await tx.orm()).delete(item)
    else:
        await run_rows.delete_queued(await tx.plain(), tx.row.id, item.id)
    if reason != "sent":
        await file_refs.release(await tx.plain(), tx.row.id, item.attachments)
    else:
        metrics.queue_waited(item.enqueued_at)
    tx.emit(events.queue_message_removed(item.id, reason))


async def reorder(tx: SessionTx, items: list[QueuedMessage], item: QueuedMessage, to_index: int) -> None:
    """Move ``item`` of the queue ``items`` (all of them, in order; reordered in place) to ``to_index``."""
    if items.index(item) != to_index:
        items.remove(item)
        items.insert(to_index, item)
        await repo.renumber_queue(await tx.orm(), items)
        tx.emit(events.queue_reordered([q.id for q in items]))


def set_paused(tx: SessionTx, paused: bool) -> None:
    """Hold the queue (nothing is sent from it automatically) or let it flow again; says so when it changed."""
    if tx.row.queue_paused != paused:
        tx.row.queue_paused = paused
        tx.emit(events.queue_paused() if paused else events.queue_resumed())


async def empty(tx: SessionTx) -> None:
    """Empty the queue (one ``queue-cleared``, none when it was empty) and release the files it carried."""
    db = await tx.plain()
    if await repo.clear_queue(db, tx.row.id):
        await file_refs.release_queue(db, tx.row.id)
        tx.emit(events.queue_cleared())
    tx.queue_length = 0


def find(items: list[QueuedMessage], message_id: str) -> QueuedMessage:
    """The queued message ``message_id`` of ``items``, or ``NOT_FOUND``."""
    item = next((q for q in items if q.id == message_id), None)
    if item is None:
        raise RpcError("NOT_FOUND", "Queued message not found")
    return item


def _enqueued_again(
    content: str, attachments: list[dict[str, Any]], request: RequestKey
) -> Expand[QueuedReceipt, wire.QueuedMessage]:
    async def expand(receipt: QueuedReceipt) -> wire.QueuedMessage:
        return queued_again(receipt, content, attachments, request.request_id)

    return expand


# --- the queue procedures ---------------------------------------------------------------------------------


class QueueService:
    """The queue procedures (enqueue, update, move, dequeue, remove, clear, pause) under the queue's rules
    (module docstring)."""

    def __init__(
        self,
        uow: UnitOfWork,
        *,
        max_length: int,
        max_content_chars: int,
        dispatch: Callable[[str], Awaitable[object]] | None = None,
    ) -> None:
        self.uow = uow
        self.max_length = max_length
        self.max_content_chars = max_content_chars
        # Sends the head of an idle session's queue (the orchestrator's ``dispatch``).
        self.dispatch = dispatch

    def _check_content(self, content: str) -> None:
        if len(content) > self.max_content_chars:
            raise RpcError("PAYLOAD_TOO_LARGE", f"content exceeds {self.max_content_chars} characters")

    async def enqueue(
        self,
        user: User,
        session_id: str,
        content: str,
        attachments: list[dict[str, Any]],
        request: RequestKey | None = None,
    ) -> wire.QueuedMessage:
        """Append to the queue; a repeated ``request`` returns the first call's reply (``services.requests``)."""
        self._check_content(content)
        (result,) = await self._enqueue_run(user, session_id, [(content, attachments, request)])
        if isinstance(result, Exception):
            raise result
        return result

    async def enqueue_many(
        self, user: User, items: list[tuple[str, str, list[dict[str, Any]], RequestKey | None]]
    ) -> list[wire.QueuedMessage | Exception]:
        """Several ``(session_id, content, attachments, request)`` enqueues, with the effect of calling
        :meth:`enqueue` on each in turn: one result or exception per item, in order. Consecutive items of one
        session share one transaction; one that cannot be queued (too long, queue full) fails alone, one that
        the transaction could not commit fails with the rest of that transaction's items."""
        results: dict[int, wire.QueuedMessage | Exception] = {}  # by index
        runs: list[tuple[str, list[int]]] = []  # (session, indexes of its consecutive items)
        for i, (session_id, content, _attachments, _request) in enumerate(items):
            try:
                self._check_content(content)
            except RpcError as exc:
                results[i] = exc
                continue
            if runs and runs[-1][0] == session_id:
                runs[-1][1].append(i)
            else:
                runs.append((session_id, [i]))
        for session_id, indexes in runs:
            try:
                done = await self._enqueue_run(user, session_id, [items[i][1:] for i in indexes])
            except Exception as exc:
                done = [exc] * len(indexes)
            for i, result in zip(indexes, done):
                results[i] = result
        return [results[i] for i in range(len(items))]

    async def _enqueue_run(
        self, user: User, session_id: str, items: list[tuple[str, list[dict[str, Any]], RequestKey | None]]
    ) -> list[wire.QueuedMessage | Exception]:
        """Append ``items`` to one session's queue in one transaction, in order, each as far as it fits. An
        item whose client request was made before gets that request's reply and adds nothing."""
        results: list[wire.QueuedMessage | Exception] = []
        async with self.uow.session(user, session_id, head_only=True) as tx:
            appender = await Appender.open(tx, self.max_length)
            for content, attachments, request in items:
                if request is not None:
                    try:  # a repeat of an earlier item of this batch too (``requests.Ledger``)
                        replayed = await tx.replay(request, ENQUEUED, _enqueued_again(content, attachments, request))
                    except RpcError as exc:
                        results.append(exc)
                        continue
                    if replayed is not MISSING:
                        results.append(replayed)
                        continue
                full = appender.full_error()
                if full is not None:
                    results.append(full)
                    continue
                item = await appender.add(content, attachments, request.request_id if request is not None else None)
                tx.remember(request, ENQUEUED, queued_receipt(item))
                results.append(item)
            added = await appender.flush()
            tx.queue_length = appender.length
            idle = tx.row.run_id is None and not tx.row.queue_paused
        if added and idle and self.dispatch is not None:
            # Nothing is running, so nothing would end and send it: send it now. (This also closes the
            # race of a message enqueued just as the previous run finished.)
            await self.dispatch(session_id)
        return results

    async def append(
        self, tx: SessionTx, content: str, attachments: list[dict[str, Any]], client_request_id: str | None
    ) -> wire.QueuedMessage:
        """Queue one message inside the caller's transaction (``message.send`` on a busy session)."""
        self._check_content(content)
        appender = await Appender.open(tx, self.max_length)
        item = await appender.add(content, attachments, client_request_id)
        await appender.flush()
        tx.queue_length = appender.length
        return item

    async def dequeue(
        self, user: User, session_id: str, reason: QueueRemovalReason = "dequeued"
    ) -> wire.QueuedMessage | None:
        async with self.uow.session(user, session_id, head_only=True) as tx:
            head = await run_rows.queue_head(await tx.plain(), session_id)
            if head is None:
                return None
            await take(tx, head, reason)
            return repo.queued_wire(head)

    async def list(self, user: User, session_id: str) -> list[wire.QueuedMessage]:
        async with self.uow.db.read() as s:
            row = await repo.get_session(s, session_id)
            if row is None or not can_read(user, row):
                raise RpcError("NOT_FOUND", "Session not found")
            return [repo.queued_wire(q) for q in await repo.queue_rows(s, session_id)]

    async def clear(self, user: User, session_id: str) -> None:
        async with self.uow.session(user, session_id, head_only=True) as tx:
            await empty(tx)

    async def remove(self, user: User, session_id: str, message_id: str) -> None:
        async with self.uow.session(user, session_id, head_only=True) as tx:
            await take(tx, find(await repo.queue_rows(await tx.orm(), session_id), message_id), "removed")

    async def update(
        self,
        user: User,
        session_id: str,
        message_id: str,
        content: str | None,
        attachments: builtins.list[dict[str, Any]] | None,
    ) -> wire.QueuedMessage:
        if content is not None:
            self._check_content(content)
        async with self.uow.session(user, session_id, head_only=True) as tx:
            target = find(await repo.queue_rows(await tx.orm(), session_id), message_id)
            changed = False
            if content is not None and content != target.content:
                target.content, changed = content, True
            if attachments is not None and attachments != target.attachments:
                await file_refs.link(await tx.plain(), session_id, attachments)
                dropped, target.attachments, changed = target.attachments, attachments, True
                await file_refs.release(await tx.plain(), session_id, dropped)
            item = repo.queued_wire(target)
            if changed:
                tx.emit(events.queue_message_updated(item))
            return item

    async def pause(self, user: User, session_id: str) -> None:
        """Hold the queue: nothing is sent from it automatically until ``message.resumeQueue`` or a send."""
        async with self.uow.session(user, session_id, head_only=True) as tx:
            set_paused(tx, True)

    async def move(
        self, user: User, session_id: str, message_id: str, to_index: int
    ) -> builtins.list[wire.QueuedMessage]:
        async with self.uow.session(user, session_id, head_only=True) as tx:
            rows = await repo.queue_rows(await tx.orm(), session_id)
            target = find(rows, message_id)
            if not 0 <= to_index < len(rows):
                raise RpcError("BAD_REQUEST", f"toIndex must be between 0 and {len(rows) - 1}")
            await reorder(tx, rows, target, to_index)
            return [repo.queued_wire(r) for r in rows]
