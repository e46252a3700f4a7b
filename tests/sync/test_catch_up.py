"""A subscriber's catch-up (``sync.delivery.Delivery._catch_up``) against a log whose read the test holds open, so
events can arrive on the hub while the read is in flight: what the subscriber receives once the read returns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import orjson

from server.domain.events import EventEnvelope
from server.pubsub.memory import MemoryBus
from server.sync.delivery import Delivery
from server.sync.hub import Hub


@dataclass
class Row:
    seq: int
    type: str
    payload: str


class HeldLog:
    """A session log whose reads wait until the test lets them through (``release``)."""

    ending_types = frozenset({"session-deleted"})

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.reading = asyncio.Event()
        self.gate = asyncio.Event()

    def append(self, env: EventEnvelope) -> None:
        assert env.seq is not None
        self.rows.append(Row(env.seq, env.type, env.json))

    async def events_after(self, db: Any, key: str, after: int, limit: int) -> Sequence[Row]:
        self.reading.set()
        await self.gate.wait()
        return [r for r in self.rows if r.seq > after][:limit]

    async def last_seq(self, db: Any, key: str) -> int | None:
        return self.rows[-1].seq if self.rows else 0

    async def oldest_seq(self, db: Any, key: str) -> int | None:
        return self.rows[0].seq if self.rows else None

    def resync_body(self, key: str, last: int) -> dict[str, Any]:
        return {"type": "resync-required", "sessionId": key, "lastEventId": str(last)}


class FakeDatabase:
    """What a catch-up needs of a Database: a read session (unused by HeldLog) and a pool to size the gate by."""

    read_engine = SimpleNamespace(pool=None)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        yield None


def created(seq: int, mid: str) -> EventEnvelope:
    return EventEnvelope.build("s", seq, "message-created", {"message": {"id": mid, "role": "assistant"}})


def completed(seq: int, mid: str, content: str) -> EventEnvelope:
    return EventEnvelope.build("s", seq, "message-completed", {"message": {"id": mid, "content": content}})


def delta(offset: int, text: str, mid: str) -> EventEnvelope:
    return EventEnvelope.build("s", None, "text-delta", {"messageId": mid, "offset": offset, "delta": text})


async def test_deltas_held_for_a_message_the_catch_up_saw_complete_are_dropped() -> None:
    """A subscriber that joins mid-answer, and whose log read returns the answer's completion, must not get the
    deltas that arrived during the read after that completion: a client would append them to the final text."""
    hub, log, db = Hub(MemoryBus()), HeldLog(), FakeDatabase()
    got: list[dict[str, Any]] = []
    delivery = Delivery(
        db,  # type: ignore[arg-type]
        hub,
        "s",
        0,
        lambda _id, env: got.append(orjson.loads(env.json if isinstance(env, EventEnvelope) else orjson.dumps(env))),
        log=log,
    )
    task = asyncio.create_task(delivery.run())
    await log.reading.wait()
    # While the read is in flight the answer streams on (two deltas of m1, one of m2 still streaming) and m1
    # completes: its events reach the log, and the deltas reach the hub.
    log.append(created(1, "m1"))
    hub._on_message("s", [delta(0, "Hel", "m1")])
    hub._on_message("s", [delta(3, "lo", "m1")])
    log.append(completed(2, "m1", "Hello"))
    log.append(created(3, "m2"))
    hub._on_message("s", [delta(0, "Wor", "m2")])
    log.gate.set()
    while len(got) < 4:
        await asyncio.sleep(0)
    task.cancel()
    assert [(e["type"], e.get("messageId")) for e in got] == [
        ("message-created", None),
        ("message-completed", None),
        ("message-created", None),
        ("text-delta", "m2"),  # m2 is still streaming: its delta is delivered
    ]
    assert "Hello" in orjson.dumps(got[1]).decode()


async def test_a_delta_that_arrives_after_its_message_completed_is_not_delivered() -> None:
    """Once the subscriber has a message's final text, a delta of it that a bus delivers late is stale."""
    hub, log, db = Hub(MemoryBus()), HeldLog(), FakeDatabase()
    got: list[tuple[str, str | None]] = []
    delivery = Delivery(
        db,  # type: ignore[arg-type]
        hub,
        "s",
        0,
        lambda _id, env: got.append((env.type, env.message_id)),  # type: ignore[union-attr]
        log=log,
    )
    task = asyncio.create_task(delivery.run())
    await log.reading.wait()
    log.append(created(1, "m1"))
    log.append(completed(2, "m1", "Hi"))
    log.gate.set()
    while len(got) < 2:
        await asyncio.sleep(0)
    # A late delta of the completed message (a replica's publish overtaken by the log) is not shown after it.
    hub._on_message("s", [delta(0, "Hi", "m1")])
    hub._on_message("s", [created(3, "m2")])
    while len(got) < 3:
        await asyncio.sleep(0)
    task.cancel()
    assert got == [("message-created", None), ("message-completed", None), ("message-created", None)]
