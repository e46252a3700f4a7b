"""The in-process bus's delivery order: a stream delta goes out inside ``publish`` unless a batch of its session
still waits for the loop's turn; everything else is delivered on a later turn."""

from __future__ import annotations

import asyncio

from server.domain import events
from server.domain.events import EventEnvelope
from server.pubsub.memory import MemoryBus


def durable(sid: str, seq: int) -> EventEnvelope:
    return EventEnvelope.build(sid, seq, "queue-cleared", {})


async def open_bus(*sessions: str) -> tuple[MemoryBus, list[tuple[str, str, int | None]]]:
    bus = MemoryBus()
    got: list[tuple[str, str, int | None]] = []
    bus.set_handlers(lambda sid, evs: got.extend((sid, e.type, e.seq) for e in evs), lambda: None)
    await bus.connect()
    for sid in sessions:
        await bus.subscribe(sid)
    return bus, got


async def next_turns() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_stream_delta_is_delivered_inside_publish():
    bus, got = await open_bus("s")
    await bus.publish("s", (events.text_delta("s", "m", 0, "Hi"),))
    assert got == [("s", "text-delta", None)]
    await bus.publish("s", (events.tool_call_delta("s", "m", "c", 0, "{"),))
    assert got[-1] == ("s", "tool-call-delta", None)


async def test_a_delta_waits_behind_a_batch_of_its_session():
    bus, got = await open_bus("s", "t")
    await bus.publish("s", (durable("s", 1), durable("s", 2)))
    await bus.publish("s", (events.text_delta("s", "m", 0, "a"),))
    await bus.publish("t", (events.text_delta("t", "m", 0, "b"),))  # another session: nothing of it waits
    assert got == [("t", "text-delta", None)]
    await next_turns()
    after_turn = [("s", "queue-cleared", 1), ("s", "queue-cleared", 2), ("s", "text-delta", None)]
    assert got == [("t", "text-delta", None), *after_turn]
    await bus.publish("s", (events.text_delta("s", "m", 1, "c"),))  # nothing waits any more: at once
    assert got[-1] == ("s", "text-delta", None) and len(got) == 5


async def test_durable_events_and_other_ephemeral_events_wait_for_a_turn():
    bus, got = await open_bus("s")
    await bus.publish("s", (durable("s", 1),))
    await bus.publish("s", (EventEnvelope("s", None, "presence", "{}"),))  # no message: not a stream delta
    assert got == []
    await next_turns()
    assert got == [("s", "queue-cleared", 1), ("s", "presence", None)]


async def test_a_failing_batch_does_not_stop_the_next_ones_of_its_session(caplog):
    bus = MemoryBus()
    got: list[int | None] = []

    def on_message(sid, evs):
        if evs[0].seq == 1:
            raise RuntimeError("subscriber broke")
        got.extend(e.seq for e in evs)

    bus.set_handlers(on_message, lambda: None)
    await bus.connect()
    await bus.subscribe("s")
    await bus.publish("s", (durable("s", 1),))
    await bus.publish("s", (durable("s", 2),))
    await next_turns()
    assert got == [2]
    assert "delivering events of session s failed" in caplog.text


async def test_a_delta_that_fails_to_deliver_is_logged_not_raised_in_its_publisher(caplog):
    bus = MemoryBus()

    def on_message(sid, evs):
        raise RuntimeError("subscriber broke")

    bus.set_handlers(on_message, lambda: None)
    await bus.connect()
    await bus.subscribe("s")
    await bus.publish("s", (events.text_delta("s", "m", 0, "a"),))  # handed over at once: it must not raise
    assert "delivering events of session s failed" in caplog.text


async def test_nothing_is_delivered_for_a_session_unsubscribed_before_its_turn():
    bus, got = await open_bus("s")
    await bus.publish("s", (durable("s", 1),))
    await bus.unsubscribe("s")
    await bus.publish("s", (events.text_delta("s", "m", 0, "a"),))
    await next_turns()
    assert got == []
