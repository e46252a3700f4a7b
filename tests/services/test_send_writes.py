"""What a send that starts a run writes, and with how many statements (``RunService.send``: the user message, the
run, its first step and its answer, in one transaction). The rows and events must be exactly what the run path
reads later, and none of them may be written twice or read back when the transaction already knows it."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from typing import Any

import orjson
import pytest
from service_helpers import idle, until
from sqlalchemy import select

from server.rpc.context import Services
from server.services.transitions import new_id
from server.store import prepared
from server.store.models import ChatSession, Event, Message, Run, User

pytestmark = pytest.mark.fast


async def test_a_send_writes_its_run_once_and_its_answer_after_its_question(
    services: Services, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await services.sessions.create(alice, {})
    await services.runs.send(alice, s.id, "first", [], [], None)  # titles the session: the next send reads no title
    await until(idle(services, alice, s.id))

    statements: list[str] = []
    execute = prepared.PreparedConnection.execute

    async def counted(self: Any, statement: Any, params: Any = None) -> Any:
        statements.append(self._prepared(statement).sql.split("(")[0].split(" WHERE")[0].strip())
        return await execute(self, statement, params)

    monkeypatch.setattr(prepared.PreparedConnection, "execute", counted)
    sent = await services.runs.send(alice, s.id, "second", [], [], None)
    monkeypatch.undo()
    kinds = Counter(sql.split(" SET")[0] for sql in statements)

    # The run is stored once, with its first step counted; the message table's end is read once (the answer goes
    # after the question this transaction stored); the session row is written once, its log's end with it.
    assert kinds["INSERT INTO runs"] == 1 and kinds["UPDATE runs"] == 0, statements
    assert kinds["INSERT INTO messages"] == 2, statements
    assert sum("max(messages.ordinal)" in sql or "coalesce" in sql for sql in statements) <= 1, statements
    assert kinds["UPDATE sessions"] == 1, statements
    assert kinds["SELECT users.id"] == 0, statements  # SQLite's write lock already serialises the owner's runs
    assert len(statements) <= 13, statements

    assert sent["status"] == "started"
    await until(idle(services, alice, s.id))
    async with services.db.read() as read:
        run = (await read.execute(select(Run).where(Run.id == sent["runId"]))).scalars().one()
        rows = (await read.execute(select(Message).where(Message.session_id == s.id).order_by(Message.ordinal))).all()
        logged = list((await read.execute(select(Event).where(Event.session_id == s.id).order_by(Event.seq))).scalars())
        session = (await read.execute(select(ChatSession).where(ChatSession.id == s.id))).scalars().one()
    created = [orjson.loads(e.payload)["message"] for e in logged if e.type == "message-created"]
    messages = [r[0] for r in rows]
    assert run.steps == 1 and run.status == "finished"
    question, answer = messages[-2:]
    assert (question.id, question.content, question.run_id) == (sent["message"]["id"], "second", run.id)
    assert (answer.ordinal, answer.parent_id, answer.run_id) == (question.ordinal + 1, question.id, run.id)
    assert answer.role == "assistant" and answer.status == "complete" and answer.content
    # The answer's message-created places it as the only version under its question, as a read of it would.
    assert created[-1]["id"] == answer.id
    assert created[-1]["versions"] == {"index": 0, "count": 1} and created[-1]["siblingIds"] == [answer.id]
    assert created[-2]["id"] == question.id and created[-2]["parentId"] == messages[-3].id
    # The log's end and the time of the last change went out with the row's other columns.
    assert session.last_seq == logged[-1].seq and session.updated_at == logged[-1].created_at


def test_ids_are_random_uuids_and_a_forked_process_makes_its_own() -> None:
    ids = [new_id() for _ in range(2000)]  # past one read of random bytes
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the next id it makes
        os.write(write, new_id().encode())
        os._exit(0)
    ours = new_id()
    theirs = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    os.close(read)
    os.close(write)
    assert uuid.UUID(theirs).version == 4 and theirs != ours
