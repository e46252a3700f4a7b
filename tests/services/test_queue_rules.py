"""The queue's rules (``services/queue.py``, "send now" in ``services/runs.py``) called directly: enqueue,
edit, reorder, remove, clear, and send-now, each exactly once and each announced by exactly one event;
what is refused changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from service_helpers import event_types, idle, last_seq, until

from server.protocol.errors import RpcError
from server.rpc.context import Services
from server.services.requests import RequestKey
from server.store.models import User

pytestmark = pytest.mark.fast


async def paused_session(services: Services, user: User) -> str:
    return (await services.sessions.create(user, {"queue_paused": True})).id


async def contents(services: Services, user: User, sid: str) -> list[str]:
    return [q.content for q in await services.queue.list(user, sid)]


async def test_enqueue_edit_move_remove_each_write_one_event(services: Services, alice: User) -> None:
    sid = await paused_session(services, alice)
    start = await last_seq(services, sid)
    a, b, c = [await services.queue.enqueue(alice, sid, text, []) for text in ("a", "b", "c")]
    await services.queue.update(alice, sid, b.id, "B", None)
    await services.queue.update(alice, sid, b.id, "B", None)  # no change: no event
    moved = await services.queue.move(alice, sid, c.id, 0)
    assert [q.content for q in moved] == ["c", "a", "B"]
    await services.queue.remove(alice, sid, a.id)
    assert await contents(services, alice, sid) == ["c", "B"]
    assert await event_types(services, sid, start) == [
        "queue-message-added",
        "queue-message-added",
        "queue-message-added",
        "queue-message-updated",
        "queue-reordered",
        "queue-message-removed",
    ]
    await services.queue.clear(alice, sid)
    assert await contents(services, alice, sid) == []
    assert (await event_types(services, sid, start))[-1] == "queue-cleared"


async def test_an_enqueue_repeated_with_its_request_id_is_applied_once(services: Services, alice: User) -> None:
    sid = await paused_session(services, alice)
    key = RequestKey(alice.id, "req-1", "message.enqueueMessage", "digest-1")
    first = await services.queue.enqueue(alice, sid, "once", [], key)
    again = await services.queue.enqueue(alice, sid, "once", [], key)  # a retry after a lost reply
    assert again.id == first.id
    assert await contents(services, alice, sid) == ["once"]
    with pytest.raises(RpcError) as refused:
        await services.queue.enqueue(alice, sid, "other", [], RequestKey(alice.id, "req-1", key.procedure, "digest-2"))
    assert refused.value.code == "CONFLICT"
    assert await contents(services, alice, sid) == ["once"]


async def test_pipelined_enqueues_apply_in_order_and_a_repeat_within_them_once(services: Services, alice: User) -> None:
    sid = await paused_session(services, alice)
    key = RequestKey(alice.id, "req-p", "message.enqueueMessage", "d")
    results = await services.queue.enqueue_many(
        alice, [(sid, "1", [], None), (sid, "2", [], key), (sid, "2", [], key), (sid, "x" * 10**7, [], None)]
    )
    assert _id(results[1]) == _id(results[2])
    assert isinstance(results[3], RpcError) and results[3].code == "PAYLOAD_TOO_LARGE"
    assert await contents(services, alice, sid) == ["1", "2"]


async def test_refusals_are_typed_and_change_nothing(services: Services, alice: User, bob: User) -> None:
    sid = await paused_session(services, alice)
    item = await services.queue.enqueue(alice, sid, "mine", [])
    before = await last_seq(services, sid)
    attempts = [
        (services.queue.enqueue(bob, sid, "theirs", []), "NOT_FOUND"),
        (services.queue.remove(bob, sid, item.id), "NOT_FOUND"),
        (services.queue.remove(alice, sid, "queue-nothing"), "NOT_FOUND"),
        (services.queue.move(alice, sid, item.id, 5), "BAD_REQUEST"),
        (
            services.queue.update(alice, sid, item.id, "x" * (services.queue.max_content_chars + 1), None),
            "PAYLOAD_TOO_LARGE",
        ),
        (services.queue.enqueue(alice, "no-such-session", "x", []), "NOT_FOUND"),
        (services.queue.enqueue(alice, sid, "x", [{"fileId": "no-such-file"}]), "NOT_FOUND"),
    ]
    for call, code in attempts:
        with pytest.raises(RpcError) as refused:
            await call
        assert refused.value.code == code
    assert await contents(services, alice, sid) == ["mine"]
    assert await last_seq(services, sid) == before


async def test_a_full_queue_refuses_the_next_message(services: Services, alice: User) -> None:
    services.queue.max_length = 2
    sid = await paused_session(services, alice)
    for text in ("1", "2"):
        await services.queue.enqueue(alice, sid, text, [])
    with pytest.raises(RpcError) as refused:
        await services.queue.enqueue(alice, sid, "3", [])
    assert refused.value.code == "PRECONDITION_FAILED"
    assert await contents(services, alice, sid) == ["1", "2"]


async def test_a_message_queued_on_an_idle_session_is_sent_and_answered(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {})).id
    await services.queue.enqueue(alice, sid, "hello there", [])
    snap = await until(idle(services, alice, sid))
    assert [(m.role, m.content) for m in snap.messages] == [("user", "hello there"), ("assistant", "hello there")]
    assert snap.queue == []


async def test_send_now_sends_the_item_once_ahead_of_the_rest(services: Services, alice: User) -> None:
    sid = await paused_session(services, alice)
    first, second = [await services.queue.enqueue(alice, sid, text, []) for text in ("first", "second")]
    started = await services.runs.send_queued_now(alice, sid, second.id, "next")
    assert started["status"] == "started"
    snap = await until(idle(services, alice, sid))
    # pressing send-now resumes the queue: the rest follows, each message once
    snap = await until(lambda: _answered(services, alice, sid, 2))
    assert [m.content for m in snap.messages if m.role == "user"] == ["second", "first"]
    assert snap.queue == []
    with pytest.raises(RpcError) as gone:
        await services.runs.send_queued_now(alice, sid, second.id, "next")  # pressed again: it was sent
    assert gone.value.code == "NOT_FOUND"
    assert first.id != second.id


async def _answered(services: Services, user: User, sid: str, n: int):
    snap = await services.sessions.snapshot(user, sid)
    done = [m for m in snap.messages if m.role == "assistant" and m.status == "complete"]
    return snap if len(done) == n and snap.run is None else None


def _id(reply: Any) -> str:
    """A queued message's id, whether the reply is the model or (a replayed one) its wire form."""
    return reply["id"] if isinstance(reply, dict) else reply.id
