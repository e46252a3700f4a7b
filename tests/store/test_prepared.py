"""The queue's hot path on SQLite runs SQLAlchemy-compiled statements straight on the driver connection
(server/store/prepared.py): what it writes must read back exactly as what SQLAlchemy writes."""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest
from sqlalchemy import select
from sqlalchemy.dialects import sqlite

from server.app import open_services
from server.domain import events
from server.settings import load_settings
from server.store import repo
from server.store.models import Event, Message, QueuedMessage
from server.store.prepared import PreparedConnection, bind_processor, result_processor


@pytest.fixture
async def services(sqlite_url):
    async with open_services(load_settings(database_url=sqlite_url, max_queue_length=5)) as svc:
        yield svc


async def test_sqlite_queue_writes_go_through_prepared_statements(services):
    async with services.db.write() as write:
        assert isinstance(write.plain, PreparedConnection)
        assert await repo.queue_stats(write.plain, "no-such-session") == (0, -1)  # the literal -1 inside the statement


async def test_rows_written_directly_read_back_as_sqlalchemy_writes_them(services, sqlite_url):
    alice, _ = await services.auth.create_user("alice")
    s = await services.sessions.create(alice, {"queue_paused": True})
    attachments = [{"path": "/tmp/a.txt", "size": 3, "mimeType": "text/plain"}]
    item = await services.queue.enqueue(alice, s.id, "hello ünïcode", attachments)  # prepared path
    await services.queue.pause(alice, s.id)  # no change (already paused): nothing written
    await services.sessions.set_title(alice, s.id, "renamed", "user")  # ORM path: one event

    async with services.db.read() as read:
        queued = (await read.execute(select(QueuedMessage))).scalars().one()
        events = (await read.execute(select(Event).order_by(Event.seq))).scalars().all()
        session = await repo.get_session(read, s.id)
    assert (queued.id, queued.content, queued.attachments, queued.position) == (
        item.id,
        "hello ünïcode",
        attachments,
        0,
    )
    assert [e.seq for e in events] == [1, 2] and events[0].type == "queue-message-added"
    assert orjson.loads(events[0].payload)["message"]["id"] == item.id
    assert events[0].created_at.tzinfo == UTC
    assert session is not None and session.last_seq == 2 and session.updated_at >= events[0].created_at

    # Stored the same way as SQLAlchemy stores them: same text shape for timestamps, JSON for attachments.
    raw = sqlite3.connect(sqlite_url.split("///", 1)[1])
    try:
        stamps = [r[0] for r in raw.execute("SELECT created_at FROM events ORDER BY seq")]
        assert len(stamps[0]) == len(stamps[1]) and stamps[0][10] == stamps[1][10] == " "
        assert raw.execute("SELECT typeof(created_at) FROM events").fetchall() == [("text",), ("text",)]
        assert orjson.loads(raw.execute("SELECT attachments FROM queued_messages").fetchone()[0]) == attachments
    finally:
        raw.close()


async def test_a_failed_transaction_leaves_nothing(services):
    alice, _ = await services.auth.create_user("alice")
    s = await services.sessions.create(alice, {"queue_paused": True})
    with pytest.raises(RuntimeError):
        async with services.uow.session(alice, s.id) as tx:
            await (await tx.plain()).execute(repo._CLEAR_QUEUE, {"sid": s.id})
            tx.emit(events.queue_cleared())
            await tx.finish()  # the event row is written ...
            raise RuntimeError("... and rolled back with everything else")
    snap = await services.sessions.snapshot(alice, s.id)
    assert snap.last_event_id == "0"
    async with services.db.read() as read:
        assert (await read.execute(select(Event))).scalars().all() == []


def test_timestamps_and_json_are_bound_as_sqlalchemy_binds_them() -> None:
    """The converters that stand in for SQLAlchemy's (timestamps, JSON) store the same timestamp text and the same
    JSON value, and a value that only SQLAlchemy's path takes goes through it."""
    dialect = sqlite.dialect()
    stamp = Message.__table__.c.created_at.type
    ours, theirs = bind_processor(stamp, dialect), stamp.dialect_impl(dialect).bind_processor(dialect)
    assert ours is not None and theirs is not None
    for value in (
        datetime.now(UTC),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),  # no microseconds: still six digits
        datetime(5, 6, 7, 8, 9, 10, 11, tzinfo=UTC),  # a year of one digit: four
        datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=-7))),  # its wall time, as SQLAlchemy's
        None,
    ):
        assert ours(value) == theirs(value)
    with pytest.raises(ValueError):
        ours(datetime(2026, 1, 2))  # naive: refused, as UTCDateTime refuses it

    for column in (Message.__table__.c.tool_calls, Message.__table__.c.attachments):
        ours, theirs = bind_processor(column.type, dialect), column.type.dialect_impl(dialect).bind_processor(dialect)
        assert ours is not None and theirs is not None
        assert ours(None) == theirs(None)  # SQL NULL, or JSON null text, as the column says
        for value in ([], {}, [{"a": 1, "b": [1.5, "ünï", None, True]}], {"deep": {"x": -(2**63)}}):
            assert orjson.loads(ours(value)) == value == orjson.loads(theirs(value))
        # What orjson does not take is SQLAlchemy's to write, unchanged: a 70-bit integer, a lone surrogate, a key
        # that is not a string; and what stdlib json refuses is still refused.
        for value in ({"n": 2**70}, ["\ud800"], {1: "one"}):
            assert ours(value) == theirs(value)
        with pytest.raises(TypeError):
            ours({"when": datetime.now(UTC)})


def test_json_reads_as_sqlalchemy_reads_it() -> None:
    """orjson reads what SQLAlchemy's ``json.loads`` reads, the same value; what it would read otherwise (an integer
    past 64 bits, which it makes a float) or not at all (``NaN``, ``1e400``) is read by SQLAlchemy's path."""
    dialect = sqlite.dialect()
    column = Message.__table__.c.tool_calls
    ours, theirs = (
        result_processor(column.type, dialect),
        column.type.dialect_impl(dialect).result_processor(dialect, None),
    )
    assert ours is not None and theirs is not None
    for text in (
        "null",
        "[]",
        '[{"a": 1, "b": [1.5, "\\u00fcn\\u00ef", null, true]}]',
        '{"a":[1,2.5,"ünï"]}',
        '{"x": -9223372036854775808}',
        '{"n": 1180591620717411303424}',
        '{"f": 0.1234567890123456789}',
        "[1e400]",
    ):
        value = ours(text)
        assert value == theirs(text) and type(value) is type(theirs(text))
        assert repr(value) == repr(theirs(text))  # an integer stays an integer
    assert math.isnan(ours('{"x": NaN}')["x"])
