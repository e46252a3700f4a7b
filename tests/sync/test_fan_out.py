"""Fan-out's batch path (``sync.delivery.fan_out``): deliveries are sorted into "write now" and "full rules"
first, then written in one pass. These tests drive the hub with the real Delivery and TransportWriter over a
transport that records what reaches it, and check that batching changes nothing a subscriber sees."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from server.domain.events import EventEnvelope
from server.pubsub.memory import MemoryBus
from server.rpc.uvicorn_ws import TransportWriter
from server.sync.delivery import MAX_COMPLETED_MARKS, Delivery
from server.sync.hub import Hub
from server.sync.writer import SubscriptionWriter


class RecordingTransport:
    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.closing = False
        self.buffered = 0  # what get_write_buffer_size reports after a write

    def write(self, data: bytes) -> None:
        self.frames.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str) -> None:
        return None  # no socket: every frame goes through write()

    def get_write_buffer_size(self) -> int:
        return self.buffered


class Protocol:
    def __init__(self) -> None:
        self.transport = RecordingTransport()
        self.close_sent = False


class Subscriber:
    """One live subscription with id ``sub_id`` on its own connection."""

    def __init__(self, hub: Hub, sub_id: int, after_seq: int = 0) -> None:
        self.proto = Protocol()
        self.overflows = 0
        self.conn = TransportWriter(self.proto, 1000, self._overflow)
        self.writer = SubscriptionWriter(self.conn, b'{"id":%d' % sub_id)
        self.generic: list[tuple[str | None, EventEnvelope]] = []
        self.delivery = Delivery(None, hub, "s", after_seq, self._emit, None, self.writer)  # type: ignore[arg-type]
        self.delivery._catching_up = False  # live, as after its catch-up
        self.delivery._done = asyncio.get_running_loop().create_future()

    def _overflow(self) -> None:
        self.overflows += 1

    def _emit(self, event_id: str | None, env: EventEnvelope) -> None:
        # The connection's generic path (ws.py): ephemeral events tracked under another event's id.
        self.generic.append((event_id, env))
        self.conn.send_event_as(self.writer.prefix, env, event_id or "")

    def received(self) -> list[tuple[int, str, dict]]:
        """(subscription id, tracked id, event) per frame, headers stripped; a write may hold several."""
        out = []
        for data in self.proto.transport.frames:
            while data:
                assert data[0] == 0x81  # one final text frame, unmasked
                length, start = data[1], 2
                if length == 126:
                    length, start = int.from_bytes(data[2:4], "big"), 4
                msg = orjson.loads(data[start : start + length])
                data = data[start + length :]  # noqa: PLW2901 (the loop reads several frames out of one chunk)
                out.append((msg["id"], msg["result"]["data"]["id"], msg["result"]["data"]["data"]))
        return out


def durable(seq: int, content: str = "x") -> EventEnvelope:
    return EventEnvelope.build("s", seq, "queue-message-added", {"message": {"id": f"q{seq}", "content": content}})


def delta(offset: int, text: str, mid: str = "m1") -> EventEnvelope:
    return EventEnvelope.build("s", None, "text-delta", {"messageId": mid, "offset": offset, "delta": text})


@pytest.fixture
async def hub() -> Hub:
    return Hub(MemoryBus())


async def attach(hub: Hub, *subs: Subscriber) -> None:
    for sub in subs:
        await hub.attach(sub.delivery)


async def test_durable_event_reaches_every_live_subscriber_once_in_order(hub: Hub) -> None:
    subs = [Subscriber(hub, sub_id=1 + i % 3) for i in range(7)]  # three distinct prefixes share frames
    await attach(hub, *subs)
    for seq in (1, 2, 3):
        hub._on_message("s", (durable(seq),))
    for i, sub in enumerate(subs):
        got = sub.received()
        assert [(g[0], g[1], g[2]["message"]["id"]) for g in got] == [(1 + i % 3, str(n), f"q{n}") for n in (1, 2, 3)]
        assert sub.delivery.next_seq == 4


async def test_subscribers_in_other_states_keep_the_full_rules(hub: Hub) -> None:
    live, behind, catching_up = Subscriber(hub, 1, after_seq=1), Subscriber(hub, 1, after_seq=0), Subscriber(hub, 1, 1)
    catching_up.delivery._catching_up = True
    await attach(hub, live, behind, catching_up)
    hub._on_message("s", (durable(2),))
    assert [g[1] for g in live.received()] == ["2"]
    # One that still waits for seq 1 holds 2 (and would read 1 from the log), never skips to it.
    assert behind.received() == [] and behind.delivery.next_seq == 1 and 2 in behind.delivery._pending
    assert behind.delivery._catch_up_task is not None
    behind.delivery._catch_up_task.cancel()  # (no database here to read from)
    # One catching up from the log gets it from there, in order; live delivery leaves it alone.
    assert catching_up.received() == [] and catching_up.delivery.next_seq == 2


async def test_closed_connections_get_nothing_and_others_are_unaffected(hub: Hub) -> None:
    ok, closing, close_sent, closed = (Subscriber(hub, 1) for _ in range(4))
    closing.proto.transport.closing = True
    close_sent.proto.close_sent = True
    closed.conn.closed = True
    await attach(hub, ok, closing, close_sent, closed)
    hub._on_message("s", (durable(1),))
    hub._on_message("s", (delta(0, "hi"),))
    assert len(ok.received()) == 2
    for sub in (closing, close_sent, closed):
        assert sub.proto.transport.frames == []


async def test_a_subscriber_over_its_buffer_limit_is_closed_once_without_holding_back_the_rest(hub: Hub) -> None:
    subs = [Subscriber(hub, 1) for _ in range(5)]
    await attach(hub, *subs)
    subs[2].proto.transport.buffered = 5000  # the client stopped reading: its write buffer is over 1000 bytes
    hub._on_message("s", (durable(1),))
    hub._on_message("s", (durable(2),))
    assert subs[2].overflows == 1 and subs[2].conn.closed
    assert len(subs[2].received()) == 1  # written before the overflow was seen; nothing after it
    for i in (0, 1, 3, 4):
        assert [g[1] for g in subs[i].received()] == ["1", "2"] and subs[i].overflows == 0


async def test_deltas_are_tracked_under_each_subscribers_last_durable_id(hub: Hub) -> None:
    a, b = Subscriber(hub, 1, after_seq=4), Subscriber(hub, 2, after_seq=9)
    await attach(hub, a, b)
    hub._on_message("s", (delta(0, "Hel"),))
    hub._on_message("s", (delta(3, "lo"),))
    assert [(g[0], g[1], g[2]["delta"]) for g in a.received()] == [(1, "4", "Hel"), (1, "4", "lo")]
    assert [(g[0], g[1], g[2]["delta"]) for g in b.received()] == [(2, "9", "Hel"), (2, "9", "lo")]


async def test_a_delta_frame_is_shared_only_by_subscribers_with_the_same_id_and_position(hub: Hub) -> None:
    # Subscription ids and last durable ids mixed, so that neighbours in any order differ in one, the other or
    # neither: each subscriber still gets a frame with its own subscription id and its own tracked id.
    shapes = [(1, 4), (1, 4), (2, 4), (1, 9), (2, 9), (1, 4), (2, 4), (1, 9)]
    subs = [Subscriber(hub, sub_id, after_seq=seq) for sub_id, seq in shapes]
    await attach(hub, *subs)
    hub._on_message("s", (delta(0, "Hel"),))
    hub._on_message("s", (delta(3, "lo"),))
    for sub, (sub_id, seq) in zip(subs, shapes, strict=True):
        assert [(g[0], g[1], g[2]["delta"]) for g in sub.received()] == [
            (sub_id, str(seq), "Hel"),
            (sub_id, str(seq), "lo"),
        ]


async def test_deltas_a_snapshot_already_covered_are_dropped(hub: Hub) -> None:
    fresh, joined = Subscriber(hub, 1), Subscriber(hub, 1)
    joined.delivery._stream_offsets["m1"] = 5  # its stream-snapshot held the first 5 characters of m1
    await attach(hub, fresh, joined)
    for env in (delta(0, "Hel"), delta(3, "lo"), delta(5, " world"), delta(0, "other", mid="m2")):
        hub._on_message("s", (env,))
    assert [g[2]["delta"] for g in fresh.received()] == ["Hel", "lo", " world", "other"]
    assert [g[2]["delta"] for g in joined.received()] == [" world", "other"]


async def test_deltas_wait_while_a_subscriber_catches_up(hub: Hub) -> None:
    live, catching_up = Subscriber(hub, 1), Subscriber(hub, 1)
    catching_up.delivery._catching_up = True
    await attach(hub, live, catching_up)
    hub._on_message("s", (delta(0, "Hi"),))
    assert [g[2]["delta"] for g in live.received()] == ["Hi"]
    assert catching_up.received() == [] and [e.type for e in catching_up.delivery._held] == ["text-delta"]


async def test_a_delivery_without_a_sink_gets_the_same_events_through_emit(hub: Hub) -> None:
    sub = Subscriber(hub, 1)
    got: list[tuple[str | None, str]] = []
    plain = Delivery(None, hub, "s", 0, lambda eid, env: got.append((eid, env.type)), None)  # type: ignore[arg-type]
    plain._catching_up = False
    plain._done = asyncio.get_running_loop().create_future()
    await attach(hub, sub)
    await hub.attach(plain)
    hub._on_message("s", (durable(1),))
    hub._on_message("s", (delta(0, "Hi"),))
    assert got == [("1", "queue-message-added"), ("1", "text-delta")]
    assert [(g[1], g[2]["type"]) for g in sub.received()] == [("1", "queue-message-added"), ("1", "text-delta")]


async def test_events_committed_together_go_to_each_connection_in_one_write(hub: Hub) -> None:
    subs = [Subscriber(hub, 1 + i % 2) for i in range(4)]
    behind = Subscriber(hub, 1, after_seq=2)  # already has 1 and 2 (it read them from the log)
    await attach(hub, *subs, behind)
    hub._on_message("s", (durable(1), durable(2), durable(3)))
    for i, sub in enumerate(subs):
        assert len(sub.proto.transport.frames) == 1
        assert [(g[0], g[1]) for g in sub.received()] == [(1 + i % 2, "1"), (1 + i % 2, "2"), (1 + i % 2, "3")]
        assert sub.delivery.next_seq == 4
    assert [g[1] for g in behind.received()] == ["3"] and behind.delivery.next_seq == 4


async def test_a_batch_that_is_not_a_plain_run_of_durable_events_keeps_the_full_rules(hub: Hub) -> None:
    sub = Subscriber(hub, 1)
    await attach(hub, sub)
    completed = EventEnvelope.build("s", 2, "message-completed", {"message": {"id": "m1"}})
    sub.delivery._stream_offsets["m1"] = 3
    hub._on_message("s", (durable(1), completed, durable(3)))
    assert [(g[1], g[2]["type"]) for g in sub.received()] == [
        ("1", "queue-message-added"),
        ("2", "message-completed"),
        ("3", "queue-message-added"),
    ]
    # The completion's own rule ran: no delta of m1 reaches the subscriber after its final text, not even one
    # past the snapshot it had; another message's still does.
    hub._on_message("s", (delta(5, "late", "m1"),))
    hub._on_message("s", (delta(0, "new", "m2"),))
    assert [g[2].get("messageId") for g in sub.received()[3:]] == ["m2"]


async def test_a_subscriber_remembers_only_the_newest_completed_messages(hub: Hub) -> None:
    """The marks that keep a completed message's late deltas out are bounded: a long chat's subscriber holds a
    few message ids, not one per answer; the newest completion still keeps its late deltas out."""
    sub = Subscriber(hub, 1)
    await attach(hub, sub)
    for n in range(1, 21):
        hub._on_message("s", (EventEnvelope.build("s", n, "message-completed", {"message": {"id": f"m{n}"}}),))
    assert len(sub.delivery._stream_offsets) <= MAX_COMPLETED_MARKS
    hub._on_message("s", (delta(0, "late", "m20"),))
    hub._on_message("s", (delta(0, "old", "m1"),))  # forgotten: delivered (a client ignores it, as before)
    assert [g[2].get("messageId") for g in sub.received()[20:]] == ["m1"]
