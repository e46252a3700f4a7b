"""The run lease on SQLite and PostgreSQL: crash recovery by the sweeper, fencing of a process that lost its
lease, and two "replicas" (two service stacks on one database) sending each queued message exactly once."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from server.app import open_services
from server.engine.run import RunLoop
from server.services import queue, transitions
from server.services.lease import LeaseLost
from server.settings import load_settings
from server.store import repo
from server.store.models import ChatSession, Event, Message, utcnow


def settings(db_url, **kw):
    # Answers cut off by a crash are not continued here (CHATSYNC_RESUME_INTERRUPTED_ANSWERS off): these tests are
    # about the run that fails instead; tests/engine/test_resume.py covers the continuation.
    base = {"database_url": db_url, "echo_delay": 0.001, "sweep_seconds": 1000, "resume_interrupted_answers": False}
    return load_settings(**{**base, **kw})


@pytest.fixture
async def services(db_url):
    async with open_services(settings(db_url)) as svc:
        yield svc


async def event_types(svc, session_id):
    async with svc.db.read() as s:
        rows = await s.execute(select(Event.type).where(Event.session_id == session_id).order_by(Event.seq))
        return list(rows.scalars())


async def crashed_run(svc, user, lease_seconds, owner="replica-that-died"):
    """A session whose run was driven by another process: user message, partial answer, queued messages."""
    sess = await svc.sessions.create(user, {})
    async with svc.uow.session(None, sess.id) as tx:
        _msg, run = await transitions.start_with_message(tx, owner, lease_seconds, "question", [], "message")
        answer = await transitions.add_message(tx, "assistant", "", status="streaming", run_id=run.id)
        (await tx.get(Message, answer.id)).content = "half an ans"  # what its last flush wrote
    for i in range(2):
        await svc.queue.enqueue(user, sess.id, f"q{i}", [])
    return sess.id, run.id


async def test_sweeper_recovers_a_run_whose_lease_expired(services):
    alice, _ = await services.auth.create_user("alice")
    sid, run_id = await crashed_run(services, alice, lease_seconds=-1)  # its lease lapsed a second ago
    assert await services.orchestrator.sweep_once() == 1
    snap = await services.sessions.snapshot(alice, sid)
    answer = snap.messages[-1]
    assert (answer.status, answer.content, answer.finish_reason) == ("interrupted", "half an ans", "error")
    assert snap.session.status == "idle" and snap.session.queue_paused is True and snap.run is None
    assert [q.content for q in snap.queue] == ["q0", "q1"]
    types = await event_types(services, sid)
    assert types[-4:] == ["message-completed", "run-failed", "queue-paused", "session-updated"]
    async with services.db.read() as s:
        row = await repo.get_session(s, sid)
        run = await repo.get_run(s, run_id)
    assert row.lease_owner is None and row.run_id is None and run.status == "failed"
    assert run.error["code"] == "interrupted"
    assert await services.orchestrator.sweep_once() == 0  # paused: nothing more to do


async def test_sweeper_leaves_a_live_lease_alone(services):
    alice, _ = await services.auth.create_user("alice")
    sid, _run_id = await crashed_run(services, alice, lease_seconds=60, owner="replica-alive")
    assert await services.orchestrator.sweep_once() == 0
    snap = await services.sessions.snapshot(alice, sid)
    assert snap.session.status == "running" and snap.messages[-1].status == "streaming"
    assert snap.run["status"] == "running" and snap.run["streaming"]["text"] == "half an ans"


async def test_a_process_that_lost_its_lease_stops_without_writing(db_url):
    async with open_services(settings(db_url, echo_delay=0.01, stream_flush_seconds=0.1)) as svc:
        alice, _ = await svc.auth.create_user("alice")
        sess = await svc.sessions.create(alice, {})
        await svc.runs.send(alice, sess.id, " ".join(["w"] * 500), [], [], None)
        async with asyncio.timeout(10):
            while (loop := svc.orchestrator.local_loop(sess.id)) is None:
                await asyncio.sleep(0.01)
        # Another replica took the session over (as its sweeper would after our lease expired).
        async with svc.db.write() as s:
            await s.execute(
                update(ChatSession)
                .where(ChatSession.id == sess.id)
                .values(lease_owner="thief", lease_expires_at=utcnow() + timedelta(seconds=60))
            )
        before = await event_types(svc, sess.id)
        await asyncio.wait_for(loop.done.wait(), 2)
        assert await event_types(svc, sess.id) == before  # not one event written after losing the lease
        async with svc.db.read() as s:
            assert (await repo.get_session(s, sess.id)).lease_owner == "thief"


async def test_two_replicas_send_each_queued_message_exactly_once(db_url):
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(open_services(settings(db_url)))
        b = await stack.enter_async_context(open_services(settings(db_url)))
        alice, _ = await a.auth.create_user("alice")
        sess = await a.sessions.create(alice, {"queue_paused": True})
        for i in range(12):
            await (a if i % 2 else b).queue.enqueue(alice, sess.id, f"m{i}", [])
        async with a.uow.session(None, sess.id) as tx:
            queue.set_paused(tx, False)

        async def hammer(svc):
            for _ in range(200):
                await svc.orchestrator.sweep_once()
                snap = await svc.sessions.snapshot(alice, sess.id)
                if not snap.queue and snap.run is None:
                    return
                await asyncio.sleep(0.005)

        await asyncio.wait_for(asyncio.gather(hammer(a), hammer(b)), 30)
        snap = await a.sessions.snapshot(alice, sess.id)
        users = [m.content for m in snap.messages if m.role == "user"]
        assert users == [f"m{i}" for i in range(12)]
        assert [m.content for m in snap.messages if m.role == "assistant"] == users
        types = await event_types(a, sess.id)
        assert types.count("run-started") == 12 and types.count("run-finished") == 12


async def taken_over_and_answered(survivor, user, session_id):
    """The dead process's lease lapses; ``survivor``'s sweeper takes the run over and it ends: the session then."""
    async with survivor.db.write() as s:
        await s.execute(
            update(ChatSession)
            .where(ChatSession.id == session_id)
            .values(lease_expires_at=utcnow() - timedelta(seconds=1))
        )
    assert await survivor.orchestrator.sweep_once() == 1
    async with asyncio.timeout(10):
        while (snap := await survivor.sessions.snapshot(user, session_id)).run is not None:
            await asyncio.sleep(0.01)
    return snap


async def test_a_send_commits_the_runs_first_step_and_a_crash_right_after_it_loses_nothing(db_url):
    """A send that starts a run starts the run's first step in the same transaction (its answer, streaming): a
    process that dies right after that commit, before its run loop began, leaves a run that another process
    takes over — the question stored once, one answer, nothing sent twice."""
    resume = {"resume_interrupted_answers": True}
    async with AsyncExitStack() as stack:
        doomed = await stack.enter_async_context(open_services(settings(db_url, **resume)))
        survivor = await stack.enter_async_context(open_services(settings(db_url, **resume)))
        alice, _ = await doomed.auth.create_user("alice")
        sess = await doomed.sessions.create(alice, {})
        doomed.orchestrator.start = lambda *_args: None  # the process is gone right after the commit
        await doomed.runs.send(alice, sess.id, "question", [], [], None)
        snap = await survivor.sessions.snapshot(alice, sess.id)
        assert [(m.role, m.status) for m in snap.messages] == [("user", "complete"), ("assistant", "streaming")]
        assert snap.session.status == "running"
        snap = await taken_over_and_answered(survivor, alice, sess.id)
        assert [(m.role, m.status) for m in snap.messages] == [("user", "complete"), ("assistant", "complete")]
        assert snap.messages[0].content == "question" and snap.messages[1].content
        types = await event_types(survivor, sess.id)
        assert types.count("message-created") == 2 and types.count("run-started") == 1
        assert types.count("run-resumed") == 1 and types.count("run-finished") == 1 and "run-failed" not in types


async def sent_by_hand(svc, queued):
    """A user's session sent "first" with ``queued`` enqueued behind it, its run loop not started: the user, and
    what the send handed the orchestrator (session id, run id, the first step it started)."""
    alice, _ = await svc.auth.create_user("alice")
    sess = await svc.sessions.create(alice, {})
    handed: list[tuple[str, str, object]] = []
    svc.orchestrator.start = lambda *args: handed.append(args)  # the loop is started by the caller
    await svc.runs.send(alice, sess.id, "first", [], [], None)
    for content in queued:
        await svc.queue.enqueue(alice, sess.id, content, [])
    return alice, handed[0]


def dies_once_the_queue_is_sent(first_run: str) -> type[RunLoop]:
    """A run loop whose process dies right after the transaction that ended ``first_run`` and auto-sent the
    queue's head committed: it writes nothing more (as after a lost lease)."""

    class Dying(RunLoop):
        def _next_run(self, run_id, *args):
            super()._next_run(run_id, *args)
            if run_id not in (None, first_run):
                raise LeaseLost(self.session_id)

    return Dying


async def test_an_auto_send_commits_its_runs_first_step_and_a_crash_right_after_it_loses_nothing(db_url):
    """The step that ends a run and sends the queue's head starts the new run's first step in the same
    transaction: a process that dies right after that commit leaves a run that another process takes over and
    answers once — the queued message sent once, one answer each, no failure."""
    resume = {"resume_interrupted_answers": True}
    async with AsyncExitStack() as stack:
        doomed = await stack.enter_async_context(open_services(settings(db_url, **resume)))
        survivor = await stack.enter_async_context(open_services(settings(db_url, **resume)))
        alice, (sid, run_id, first) = await sent_by_hand(doomed, ["second"])
        await asyncio.wait_for(
            dies_once_the_queue_is_sent(run_id)(doomed.orchestrator.run_context, sid, run_id, first).main(), 10
        )
        snap = await survivor.sessions.snapshot(alice, sid)
        assert [(m.role, m.status) for m in snap.messages] == [
            ("user", "complete"),
            ("assistant", "complete"),
            ("user", "complete"),
            ("assistant", "streaming"),
        ]
        assert snap.session.status == "running" and snap.queue == []
        snap = await taken_over_and_answered(survivor, alice, sid)
        assert [(m.role, m.content, m.status) for m in snap.messages] == [
            ("user", "first", "complete"),
            ("assistant", "first", "complete"),
            ("user", "second", "complete"),
            ("assistant", "second", "complete"),
        ]
        types = await event_types(survivor, sid)
        assert types.count("message-created") == 4 and types.count("run-started") == 2
        assert types.count("queue-message-removed") == 1 and types.count("run-resumed") == 1
        assert types.count("run-finished") == 2 and "run-failed" not in types


async def test_an_abort_committed_right_after_the_auto_send_stops_the_new_run(db_url):
    """A Stop that reaches the run loop after the transaction that auto-sent the queue's head (and started its
    first step) committed, but before the loop moved on to the new run, is for the new run: its answer ends
    interrupted, the run aborted, the queue paused — never answered as if nobody had asked."""
    async with open_services(settings(db_url)) as svc:
        alice, (sid, run_id, first) = await sent_by_hand(svc, ["second", "third"])
        loop = RunLoop(svc.orchestrator.run_context, sid, run_id, first)
        publish_tx = svc.uow.publish_tx

        async def then_stop(tx):
            await publish_tx(tx)
            if any(e.type == "run-started" for e in tx.events) and tx.row.run_id != run_id:
                # As ``run.abort`` does: the flag committed, then the loop told (before it moved on).
                async with svc.uow.session(None, sid) as stop:
                    stop.row.abort_requested = True
                loop.request_abort()

        svc.uow.publish_tx = then_stop
        await asyncio.wait_for(loop.main(), 10)
        snap = await svc.sessions.snapshot(alice, sid)
    assert [(m.role, m.content, m.status) for m in snap.messages] == [
        ("user", "first", "complete"),
        ("assistant", "first", "complete"),
        ("user", "second", "complete"),
        ("assistant", "", "interrupted"),
    ]
    assert snap.session.status == "idle" and snap.session.queue_paused and [q.content for q in snap.queue] == ["third"]


async def test_an_abort_before_the_sends_first_step_began_ends_that_step_with_its_run(db_url):
    """The first step a send started belongs to its run: an abort that arrives before the run loop begins it marks
    its answer interrupted, and the queued message the abort makes room for gets an answer of its own."""
    async with open_services(settings(db_url)) as svc:
        alice, (sid, run_id, first) = await sent_by_hand(svc, ["next"])
        async with svc.uow.session(None, sid) as tx:  # "send now, interrupting": the abort sends the head
            tx.row.abort_requested = tx.row.abort_then_send = True
        loop = RunLoop(svc.orchestrator.run_context, sid, run_id, first)
        loop.request_abort()
        await asyncio.wait_for(loop.main(), 10)
        snap = await svc.sessions.snapshot(alice, sid)
    assert [(m.role, m.content, m.status) for m in snap.messages] == [
        ("user", "first", "complete"),
        ("assistant", "", "interrupted"),
        ("user", "next", "complete"),
        ("assistant", "next", "complete"),
    ]
