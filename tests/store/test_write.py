"""A write transaction (``Database.write``) is one plain connection with the ORM joined onto it, and a session
write (``UnitOfWork.session``) works on a plain ``SessionRow`` whose changed columns one ``UPDATE`` writes: on
SQLite (a file: the prepared path) and on PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta

import orjson
import pytest
from sqlalchemy import event, select

from server.domain import events
from server.pubsub.memory import MemoryBus
from server.services.sessions import new_session_row
from server.services.uow import UnitOfWork
from server.store import repo, session_row
from server.store.db import Database
from server.store.models import ChatSession, Event, QueuedMessage, User, utcnow
from server.store.session_row import SessionRow

_INSERT_QUEUED = QueuedMessage.__table__.insert()


async def _session(db: Database) -> tuple[User, str]:
    user = User(id=str(uuid.uuid4()), name=f"u-{uuid.uuid4().hex[:8]}", role="user")
    sid = str(uuid.uuid4())
    async with db.write() as s:
        s.add(user)
        await s.flush()
        s.add(new_session_row(user, {}, sid, utcnow(), "echo", "echo"))
    return user, sid


def _orm_connections(db: Database) -> list[object]:
    """Records each connection the ORM of a write takes (the joined engine's on a SQLite file)."""
    taken: list[object] = []
    engine = db._joined_engine if db._joined_engine is not None else db.write_engine
    event.listen(engine.sync_engine, "engine_connect", taken.append)
    return taken


async def test_the_orm_and_plain_statements_of_a_write_commit_and_roll_back_together(migrated_db: Database) -> None:
    user, sid = await _session(migrated_db)
    row = {"id": "q-1", "session_id": sid, "position": 0, "content": "x", "attachments": [], "enqueued_at": 1}
    row["client_request_id"] = None
    with pytest.raises(RuntimeError):
        async with migrated_db.write() as s:
            await s.plain.execute(_INSERT_QUEUED, row)
            (await s.get(User, user.id)).name = "renamed"  # type: ignore[union-attr]
            await s.flush()
            raise RuntimeError("rolled back, both")
    async with migrated_db.read() as r:
        assert (await r.execute(select(QueuedMessage))).scalars().all() == []
        assert (await r.get(User, user.id)).name == user.name  # type: ignore[union-attr]

    async with migrated_db.write() as s:
        await s.plain.execute(_INSERT_QUEUED, row)
        (await s.get(User, user.id)).name = "renamed"  # type: ignore[union-attr]  # flushed before the commit
    async with migrated_db.read() as r:
        assert [q.id for q in (await r.execute(select(QueuedMessage))).scalars()] == ["q-1"]
        assert (await r.get(User, user.id)).name == "renamed"  # type: ignore[union-attr]


async def test_a_session_write_writes_the_changed_columns_of_its_row(migrated_db: Database) -> None:
    user, sid = await _session(migrated_db)
    uow = UnitOfWork(migrated_db, MemoryBus(), retention=1000)
    until = utcnow() + timedelta(seconds=30)
    async with uow.session(user, sid) as tx:
        assert tx.row.created_at.tzinfo is not None and tx.row.queue_paused is False
        tx.row.title, tx.row.pinned, tx.row.lease_expires_at = "typed", True, until
        tx.row.meta = {"k": [1, 2]}
        tx.emit(events.queue_paused())
    assert tx.row.changed == set()
    async with migrated_db.read() as r:
        got = await r.get(ChatSession, sid)
    assert got is not None
    assert (got.title, got.pinned, got.meta, got.last_seq) == ("typed", True, {"k": [1, 2]}, 1)
    assert got.lease_expires_at == until.replace(microsecond=got.lease_expires_at.microsecond)  # type: ignore[union-attr]
    assert got.title_source == "none" and got.status == "idle"  # not assigned: not written


async def test_a_session_write_without_orm_objects_never_connects_the_orm(migrated_db: Database) -> None:
    user, sid = await _session(migrated_db)
    uow = UnitOfWork(migrated_db, MemoryBus(), retention=1000)
    taken = _orm_connections(migrated_db)
    async with uow.session(user, sid) as tx:
        tx.row.queue_paused = True
        tx.emit(events.queue_paused())
    if migrated_db._joined_engine is not None:  # elsewhere the plain connection is the ORM's engine's
        assert taken == []
    async with uow.session(user, sid) as tx:  # a model object: the ORM joins the same transaction
        assert await repo.queue_rows(await tx.orm(), sid) == []
        tx.row.queue_paused = False
        tx.emit(events.queue_resumed())
    assert taken  # the ORM connected this time
    async with migrated_db.read() as r:
        got = await r.get(ChatSession, sid)
        logged = (await r.execute(select(Event.type).order_by(Event.seq))).scalars().all()
    assert got is not None and got.queue_paused is False and got.last_seq == 2
    assert logged == ["queue-paused", "queue-resumed"]


async def test_a_head_only_write_reads_the_head_columns_and_writes_what_it_changes(migrated_db: Database) -> None:
    """A queue edit's lock reads the ``HEAD`` columns, typed as a full row's; the rest are not there to read."""
    user, sid = await _session(migrated_db)
    uow = UnitOfWork(migrated_db, MemoryBus(), retention=1000)
    async with uow.session(user, sid) as tx:
        full = {name: getattr(tx.row, name) for name in session_row.HEAD}
    async with uow.session(user, sid, head_only=True) as tx:
        assert {name: getattr(tx.row, name) for name in session_row.HEAD} == full
        assert tx.row.created_at.tzinfo is not None and tx.row.queue_paused is False
        for name in set(SessionRow.COLUMNS) - set(session_row.HEAD):
            with pytest.raises(AttributeError):
                getattr(tx.row, name)
        tx.row.title = "from the head"
        tx.emit(events.queue_paused())
    assert tx.row.updated_at is not None  # the log's write set it
    assert [orjson.loads(e.json)["session"]["title"] for e in tx.feed_events] == ["from the head"]
    async with migrated_db.read() as r:
        got = await r.get(ChatSession, sid)
    assert got is not None and (got.title, got.last_seq, got.defaults) == ("from the head", 1, {})


def test_no_attribute_of_the_row_type_stands_in_for_a_column() -> None:
    """A column is an attribute of the row itself (what a transaction reads most, at Python's fastest): no
    attribute of ``SessionRow`` (a descriptor) shadows it; only the raw row of SQLite's lock converts lazily."""
    assert [name for name in SessionRow.COLUMNS if hasattr(SessionRow, name)] == []


async def test_a_row_refuses_to_write_what_is_not_a_column(migrated_db: Database) -> None:
    user, sid = await _session(migrated_db)
    async with migrated_db.write() as s:
        row = await session_row.lock(s.plain, sid)
        assert row is not None and row.owner_id == user.id
        row.not_a_column = 1  # type: ignore[attr-defined]
        with pytest.raises(AttributeError):
            await session_row.write_changes(s.plain, row)


def test_the_row_type_declares_every_column_of_the_session() -> None:
    """A column added to ``ChatSession`` is declared (typed) on ``SessionRow`` too."""
    declared = set(SessionRow.__annotations__) - {"changed", "COLUMNS"}
    assert declared == {p.key for p in ChatSession.__mapper__.column_attrs} == set(SessionRow.COLUMNS)
