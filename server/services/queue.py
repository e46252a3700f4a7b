"""The per-session message queue: messages typed while the model answers.

Every operation locks the session row, so concurrent edits from several clients apply one after the
other and each produces exactly one event describing what it did. Positions order the queue; they are
not dense (a dequeue does not shift every row), and a move rewrites them as 0..n-1.
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import insert

from ..domain import events
from ..domain import models as wire
from ..domain.events import QueueRemovalReason
from ..files import refs as file_refs
from ..protocol.errors import RpcError
from ..store import repo
from ..store.models import QueuedMessage, User
from .requests import MISSING, RequestKey
from .uow import UnitOfWork, can_read

_INSERT_QUEUED = insert(QueuedMessage.__table__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class QueueService:
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
    ) -> Any:
        """Append to the queue; a repeated ``request`` returns the first call's reply (``services.requests``)."""
        self._check_content(content)
        (result,) = await self._enqueue_run(user, session_id, [(content, attachments, request)])
        if isinstance(result, RpcError):
            raise result
        return result

    async def enqueue_many(
        self, user: User, items: list[tuple[str, str, list[dict[str, Any]], RequestKey | None]]
    ) -> list[Any]:
        """Several ``(session_id, content, attachments, request)`` enqueues, with the effect of calling
        :meth:`enqueue` on each in turn: one result or exception per item, in order. Consecutive items of one
        session share one transaction; one that cannot be queued (too long, queue full) fails alone, one that
        the transaction could not commit fails with the rest of that transaction's items."""
        results: list[Any] = [None] * len(items)
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
        return results

    async def _enqueue_run(
        self, user: User, session_id: str, items: list[tuple[str, list[dict[str, Any]], RequestKey | None]]
    ) -> list[Any]:
        """Append ``items`` to one session's queue in one transaction, in order, each as far as it fits. An
        item whose client request was made before gets that request's reply and adds nothing."""
        results: list[Any] = []
        async with self.uow.queue(user, session_id) as tx:
            # Read after the row lock is held: on PostgreSQL a statement that waited for the lock still
            # sees the queue as it was when the statement began.
            length, last_position = await repo.queue_stats(tx.db, session_id)
            rows = []
            seen: dict[str, tuple[RequestKey, Any]] = {}  # request ids of this transaction
            for content, attachments, request in items:
                if request is not None:
                    try:
                        earlier = seen.get(request.request_id)
                        if earlier is not None:
                            if earlier[0] != request:
                                raise RpcError("CONFLICT", "clientRequestId was already used for a different request")
                            results.append(earlier[1])
                            continue
                        replayed = await tx.replay(request)
                    except RpcError as exc:
                        results.append(exc)
                        continue
                    if replayed is not MISSING:
                        results.append(replayed)
                        continue
                if length >= self.max_length:
                    results.append(RpcError("PRECONDITION_FAILED", f"queue is full ({self.max_length} messages)"))
                    continue
                await file_refs.link(tx.db, session_id, attachments)
                length, last_position = length + 1, last_position + 1
                crid = request.request_id if request is not None else None
                item = wire.QueuedMessage(
                    id=f"queue-{uuid.uuid4().hex}",
                    content=content,
                    attachments=attachments,
                    enqueued_at=_now_ms(),
                    client_request_id=crid,
                )
                rows.append(
                    {
                        "id": item.id,
                        "session_id": session_id,
                        "position": last_position,
                        "content": content,
                        "attachments": attachments,
                        "enqueued_at": item.enqueued_at,
                        "client_request_id": crid,
                    }
                )
                tx.emit(events.queue_message_added(item))
                tx.remember(request, item)
                if request is not None:
                    seen[request.request_id] = (request, item.wire())
                results.append(item)
            if rows:
                # Plain INSERTs: enqueue is the busiest write there is, and nothing here needs ORM objects.
                await tx.db.execute(_INSERT_QUEUED, rows[0] if len(rows) == 1 else rows)
            tx.queue_length = length
            idle = tx.row.run_id is None and not tx.row.queue_paused
        if rows and idle and self.dispatch is not None:
            # Nothing is running, so nothing would end and send it: send it now. (This also closes the
            # race of a message enqueued just as the previous run finished.)
            await self.dispatch(session_id)
        return results

    async def dequeue(
        self, user: User, session_id: str, reason: QueueRemovalReason = "dequeued"
    ) -> wire.QueuedMessage | None:
        async with self.uow.session(user, session_id) as tx:
            head = await repo.queue_head(tx.db, session_id)
            if head is None:
                return None
            await tx.db.delete(head)
            await file_refs.release(tx.db, session_id, head.attachments)
            tx.emit(events.queue_message_removed(head.id, reason))
            return repo.queued_wire(head)

    async def list(self, user: User, session_id: str) -> list[wire.QueuedMessage]:
        async with self.uow.db.read() as s:
            row = await repo.get_session(s, session_id)
            if row is None or not can_read(user, row):
                raise RpcError("NOT_FOUND", "Session not found")
            return [repo.queued_wire(q) for q in await repo.queue_rows(s, session_id)]

    async def clear(self, user: User, session_id: str) -> None:
        async with self.uow.queue(user, session_id) as tx:
            if await repo.clear_queue(tx.db, session_id):
                await file_refs.release_queue(tx.db, session_id)
                tx.emit(events.queue_cleared())
            tx.queue_length = 0

    async def remove(self, user: User, session_id: str, message_id: str) -> None:
        async with self.uow.session(user, session_id) as tx:
            rows = await repo.queue_rows(tx.db, session_id)
            target = next((r for r in rows if r.id == message_id), None)
            if target is None:
                raise RpcError("NOT_FOUND", "Queued message not found")
            await tx.db.delete(target)
            await file_refs.release(tx.db, session_id, target.attachments)
            tx.emit(events.queue_message_removed(message_id, "removed"))

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
        async with self.uow.session(user, session_id) as tx:
            rows = await repo.queue_rows(tx.db, session_id)
            target = next((r for r in rows if r.id == message_id), None)
            if target is None:
                raise RpcError("NOT_FOUND", "Queued message not found")
            changed = False
            if content is not None and content != target.content:
                target.content, changed = content, True
            if attachments is not None and attachments != target.attachments:
                await file_refs.link(tx.db, session_id, attachments)
                dropped, target.attachments, changed = target.attachments, attachments, True
                await file_refs.release(tx.db, session_id, dropped)
            item = repo.queued_wire(target)
            if changed:
                tx.emit(events.queue_message_updated(item))
            return item

    async def pause(self, user: User, session_id: str) -> None:
        """Hold the queue: nothing is sent from it automatically until ``message.resumeQueue`` or a send."""
        async with self.uow.session(user, session_id) as tx:
            if not tx.row.queue_paused:
                tx.row.queue_paused = True
                tx.emit(events.queue_paused())

    async def move(
        self, user: User, session_id: str, message_id: str, to_index: int
    ) -> builtins.list[wire.QueuedMessage]:
        async with self.uow.session(user, session_id) as tx:
            rows = await repo.queue_rows(tx.db, session_id)
            target = next((r for r in rows if r.id == message_id), None)
            if target is None:
                raise RpcError("NOT_FOUND", "Queued message not found")
            if not 0 <= to_index < len(rows):
                raise RpcError("BAD_REQUEST", f"toIndex must be between 0 and {len(rows) - 1}")
            if rows.index(target) != to_index:
                rows.remove(target)
                rows.insert(to_index, target)
                await repo.renumber_queue(tx.db, rows)
                tx.emit(events.queue_reordered([r.id for r in rows]))
            return [repo.queued_wire(r) for r in rows]
