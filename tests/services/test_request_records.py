"""Exactly-once records (``services/requests.py``) as the writes keep them: a repeat gets the reply of the type its
procedure declares, rebuilt from the receipt; a record that cannot be read as its receipt is a typed ``CONFLICT``
that applies nothing (never a server error)."""

from __future__ import annotations

import pytest
from service_helpers import idle, until
from sqlalchemy import update

from server.domain import models as wire
from server.protocol.errors import to_rpc_error
from server.rpc.context import Services
from server.services.requests import RequestKey, UnreadableRecord
from server.store.models import ClientRequest, User

pytestmark = pytest.mark.fast


async def _overwrite(services: Services, request_id: str, result: str, seq: int | None = None) -> None:
    values: dict[str, object] = {"result": result}
    if seq is not None:
        values["seq"] = seq
    async with services.db.write() as s:
        await s.execute(update(ClientRequest).where(ClientRequest.request_id == request_id).values(**values))


async def test_a_repeat_gets_the_reply_its_procedure_declares(services: Services, alice: User) -> None:
    create = RequestKey(alice.id, "c-1", "session.create", "d")
    session = await services.sessions.create(alice, {"title": "t"}, create)
    again = await services.sessions.create(alice, {"title": "t"}, create)
    assert isinstance(again, wire.Session) and again == session
    send = RequestKey(alice.id, "s-1", "message.send", "d")
    sent = await services.runs.send(alice, session.id, "hi", [], [], None, send)
    await until(idle(services, alice, session.id))
    repeat = await services.runs.send(alice, session.id, "hi", [], [], None, send)
    assert repeat["status"] == sent["status"] == "started"
    assert (repeat["message"]["id"], repeat["runId"]) == (sent["message"]["id"], sent["runId"])
    fork = RequestKey(alice.id, "f-1", "session.fork", "d")
    forked = await services.sessions.fork(alice, session.id, sent["message"]["id"], "copy", fork)
    assert await services.sessions.fork(alice, session.id, sent["message"]["id"], "copy", fork) == forked
    assert isinstance(forked, wire.Session) and forked.title == "copy"
    listed = (await services.sessions.list(alice, 50, None, None, None))["items"]
    assert len(listed) == 2


async def test_a_record_that_cannot_be_read_is_a_conflict_and_applies_nothing(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {"queue_paused": True})).id
    enqueue = RequestKey(alice.id, "q-1", "message.enqueueMessage", "d")
    await services.queue.enqueue(alice, sid, "once", [], enqueue)
    create = RequestKey(alice.id, "c-1", "session.create", "d")
    await services.sessions.create(alice, {}, create)
    for stored in ('{"id": 5}', '{"id": "queue-1"}', "[]", "not JSON"):
        await _overwrite(services, "q-1", stored)
        with pytest.raises(UnreadableRecord) as refused:
            await services.queue.enqueue(alice, sid, "once", [], enqueue)
        assert to_rpc_error(refused.value).code == "CONFLICT"
        await _overwrite(services, "c-1", stored)
        with pytest.raises(UnreadableRecord):
            await services.sessions.create(alice, {}, create)
    assert len(await services.queue.list(alice, sid)) == 1
    assert len((await services.sessions.list(alice, 50, None, None, None))["items"]) == 2


async def test_a_record_written_before_receipts_is_read_as_the_whole_reply(services: Services, alice: User) -> None:
    create = RequestKey(alice.id, "c-0", "session.create", "d")
    first = await services.sessions.create(alice, {"title": "old"}, create)
    await _overwrite(services, "c-0", first.model_dump_json(by_alias=True), seq=0)
    again = await services.sessions.create(alice, {"title": "old"}, create)
    assert isinstance(again, wire.Session) and again == first
    await _overwrite(services, "c-0", '{"id": "only"}', seq=0)
    with pytest.raises(UnreadableRecord):
        await services.sessions.create(alice, {"title": "old"}, create)
