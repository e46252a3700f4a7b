"""Queue and session state with their event log, on SQLite and PostgreSQL (real databases)."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from sqlalchemy import select

from server.app import open_services
from server.protocol.errors import RpcError
from server.settings import load_settings
from server.store import eventlog, repo
from server.store.models import Event


@pytest.fixture
async def services(db_url):
    async with open_services(load_settings(database_url=db_url, max_queue_length=5)) as svc:
        yield svc


@pytest.fixture
async def users(services):
    alice, _ = await services.auth.create_user("alice")
    bob, _ = await services.auth.create_user("bob")
    return alice, bob


async def log_of(services, session_id):
    async with services.db.read() as s:
        rows = (await s.execute(select(Event).where(Event.session_id == session_id).order_by(Event.seq))).scalars()
        return [(r.seq, r.type, orjson.loads(r.payload)) for r in rows]


async def test_queue_operations_write_state_and_events_together(services, users):
    alice, _ = users
    s = await services.sessions.create(alice, {"title": "t", "queue_paused": True})
    a = await services.queue.enqueue(alice, s.id, "first", [])
    b = await services.queue.enqueue(alice, s.id, "second", [{"path": "/tmp/x.txt"}])
    c = await services.queue.enqueue(alice, s.id, "third", [])
    await services.queue.update(alice, s.id, b.id, "second (edited)", None)
    moved = await services.queue.move(alice, s.id, c.id, 0)
    assert [m.id for m in moved] == [c.id, a.id, b.id]
    head = await services.queue.dequeue(alice, s.id)
    assert head is not None and head.id == c.id
    await services.queue.remove(alice, s.id, b.id)

    remaining = await services.queue.list(alice, s.id)
    assert [(m.id, m.content) for m in remaining] == [(a.id, "first")]

    log = await log_of(services, s.id)
    assert [seq for seq, _t, _p in log] == list(range(1, 8))
    assert [t for _s, t, _p in log] == [
        "queue-message-added",
        "queue-message-added",
        "queue-message-added",
        "queue-message-updated",
        "queue-reordered",
        "queue-message-removed",
        "queue-message-removed",
    ]
    assert log[3][2]["message"]["content"] == "second (edited)"
    assert log[4][2]["order"] == [c.id, a.id, b.id]
    assert log[5][2] == {"type": "queue-message-removed", "sessionId": s.id, "messageId": c.id, "reason": "dequeued"}
    assert log[6][2]["reason"] == "removed"
    snap = await services.sessions.snapshot(alice, s.id)
    assert snap.last_event_id == "7" and snap.session.last_seq == 7


async def test_failed_operations_change_nothing(services, users):
    alice, bob = users
    s = await services.sessions.create(alice, {"queue_paused": True})
    for i in range(5):
        await services.queue.enqueue(alice, s.id, f"m{i}", [])
    before = await log_of(services, s.id)
    with pytest.raises(RpcError) as full:
        await services.queue.enqueue(alice, s.id, "one too many", [])
    assert full.value.code == "PRECONDITION_FAILED"
    with pytest.raises(RpcError) as foreign:
        await services.queue.enqueue(bob, s.id, "not yours", [])
    assert foreign.value.code == "NOT_FOUND"
    with pytest.raises(RpcError) as missing:
        await services.queue.remove(alice, s.id, "queue-nope")
    assert missing.value.code == "NOT_FOUND"
    with pytest.raises(RpcError) as bad_index:
        first = (await services.queue.list(alice, s.id))[0]
        await services.queue.move(alice, s.id, first.id, 9)
    assert bad_index.value.code == "BAD_REQUEST"
    assert await log_of(services, s.id) == before
    assert len(await services.queue.list(alice, s.id)) == 5


async def test_concurrent_enqueues_get_distinct_positions_and_contiguous_seqs(services, users):
    alice, _ = users
    s = await services.sessions.create(alice, {"queue_paused": True})
    services.queue.max_length = 100
    results = await asyncio.gather(*(services.queue.enqueue(alice, s.id, f"m{i}", []) for i in range(30)))
    queue = await services.queue.list(alice, s.id)
    assert sorted(q.id for q in queue) == sorted(r.id for r in results)
    async with services.db.read() as db:
        positions = [r.position for r in await repo.queue_rows(db, s.id)]
    assert positions == sorted(positions) and len(set(positions)) == 30
    log = await log_of(services, s.id)
    assert [seq for seq, _t, _p in log] == list(range(1, 31))
    # The log's order is the queue's order: the event with seq k added the k-th row.
    assert [p["message"]["id"] for _s, _t, p in log] == [q.id for q in queue]


async def test_delete_hides_session_and_logs_event(services, users):
    alice, _ = users
    s = await services.sessions.create(alice, {"queue_paused": True})
    await services.sessions.delete(alice, s.id)
    with pytest.raises(RpcError):
        await services.sessions.snapshot(alice, s.id)
    assert (await log_of(services, s.id))[-1][1] == "session-deleted"
    listed = await services.sessions.list(alice, 50, None, None)
    assert listed["items"] == []


async def test_session_list_pages_and_search(services, users):
    alice, bob = users
    ids = [(await services.sessions.create(alice, {"title": f"chat {i}"})).id for i in range(7)]
    await services.sessions.create(bob, {"title": "chat bob"})
    page1 = await services.sessions.list(alice, 3, None, None)
    page2 = await services.sessions.list(alice, 3, page1["nextCursor"], None)
    page3 = await services.sessions.list(alice, 3, page2["nextCursor"], None)
    seen = [s["id"] for p in (page1, page2, page3) for s in p["items"]]
    assert sorted(seen) == sorted(ids) and len(seen) == 7
    assert page3["nextCursor"] is None
    found = await services.sessions.list(alice, 50, None, "chat 3")
    assert [s["title"] for s in found["items"]] == ["chat 3"]


async def test_event_log_is_trimmed_to_retention(db_url):
    async with open_services(load_settings(database_url=db_url, event_retention=10, max_queue_length=500)) as svc:
        alice, _ = await svc.auth.create_user("alice")
        s = await svc.sessions.create(alice, {"queue_paused": True})
        for i in range(140):
            await svc.queue.enqueue(alice, s.id, f"m{i}", [])
        async with svc.db.read() as db:
            oldest = await eventlog.oldest_seq(db, s.id)
        assert oldest is not None and 100 < oldest <= 131
