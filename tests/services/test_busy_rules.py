"""What a send does while a run is in progress (``services/runs.py``): each busy policy, and "send now" in each
mode. A run waiting for a tool's approval stays in progress for as long as the test needs."""

from __future__ import annotations

import pytest
from service_helpers import idle, until

from server.protocol.errors import RpcError
from server.rpc.context import Services
from server.store.models import User

pytestmark = pytest.mark.fast

ASKS = {"name": "calculator", "description": "arithmetic", "executor": "server", "requiresApproval": True}
CALL = '/tool calculator {"expression": "6*7"}'


async def waiting_for_approval(services: Services, user: User) -> tuple[str, str]:
    """A session whose run waits for the approval of a tool call; the session and the call."""
    sid = (await services.sessions.create(user, {"tools": [ASKS]})).id
    await services.runs.send(user, sid, CALL, [], [], None)

    async def asked() -> str | None:
        snap = await services.sessions.snapshot(user, sid)
        pending = (snap.run or {}).get("pendingToolCalls") or []
        return pending[0]["callId"] if pending else None

    return sid, await until(asked)


async def user_texts(services: Services, user: User, sid: str) -> list[str]:
    return [m.content for m in (await services.sessions.snapshot(user, sid)).messages if m.role == "user"]


async def test_each_busy_policy(services: Services, alice: User) -> None:
    sid, call = await waiting_for_approval(services, alice)
    with pytest.raises(RpcError) as refused:
        await services.runs.send(alice, sid, "not now", [], [], "reject")
    assert refused.value.code == "CONFLICT"
    queued = await services.runs.send(alice, sid, "after it", [], [], "enqueue")
    assert queued["status"] == "queued"
    assert [q.content for q in await services.queue.list(alice, sid)] == ["after it"]
    assert await user_texts(services, alice, sid) == [CALL]  # neither is in the history yet
    await services.runs.approve(alice, sid, call, True, None)
    snap = await until(lambda: _answered(services, alice, sid, ["after it"]))
    assert snap.queue == [] and await user_texts(services, alice, sid) == [CALL, "after it"]


async def test_send_now_interrupts_a_waiting_run_and_sends_once(services: Services, alice: User) -> None:
    sid, _call = await waiting_for_approval(services, alice)
    a = await services.queue.enqueue(alice, sid, "a", [])
    b = await services.queue.enqueue(alice, sid, "b", [])
    pressed = await services.runs.send_queued_now(alice, sid, b.id, "interrupt")
    assert pressed["status"] == "started"
    await until(lambda: _answered(services, alice, sid, ["b", "a"]))
    assert await user_texts(services, alice, sid) == [CALL, "b", "a"]  # each once, b first
    with pytest.raises(RpcError) as gone:
        await services.runs.send_queued_now(alice, sid, a.id, "interrupt")
    assert gone.value.code == "NOT_FOUND"


async def test_send_now_next_waits_for_the_run_and_goes_first(services: Services, alice: User) -> None:
    sid, call = await waiting_for_approval(services, alice)
    a = await services.queue.enqueue(alice, sid, "a", [])
    b = await services.queue.enqueue(alice, sid, "b", [])
    assert (await services.runs.send_queued_now(alice, sid, b.id, "next"))["status"] == "next"
    assert [q.id for q in await services.queue.list(alice, sid)] == [b.id, a.id]
    await services.runs.approve(alice, sid, call, True, None)
    await until(lambda: _answered(services, alice, sid, ["b", "a"]))
    assert await user_texts(services, alice, sid) == [CALL, "b", "a"]


async def test_abort_stops_a_waiting_run_and_pauses_the_queue(services: Services, alice: User) -> None:
    sid, _call = await waiting_for_approval(services, alice)
    await services.queue.enqueue(alice, sid, "later", [])
    assert await services.runs.abort(alice, sid) == {"aborted": True}
    snap = await until(idle(services, alice, sid))
    assert snap.session.queue_paused is True and [q.content for q in snap.queue] == ["later"]
    assert await services.runs.abort(alice, sid) == {"aborted": False}  # nothing left to stop


async def _answered(services: Services, user: User, sid: str, texts: list[str]):
    """The snapshot once every one of ``texts`` was sent, answered, and nothing runs."""
    snap = await services.sessions.snapshot(user, sid)
    users = [m.content for m in snap.messages if m.role == "user"]
    answers = [m for m in snap.messages if m.role == "assistant" and m.status == "complete"]
    done = snap.run is None and users[-len(texts) :] == texts and answers and answers[-1].content == texts[-1]
    return snap if done else None
