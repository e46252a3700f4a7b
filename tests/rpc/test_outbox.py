"""Both frame writers: straight to the transport (uvicorn's sans-I/O protocol, the default) and the
queued writer task used under any other WebSocket implementation."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from testkit import collect
from websockets.asyncio.client import connect

from server.rpc.writer import frame_header

# uvicorn's "websockets" implementation sits on the websockets library's deprecated legacy API.
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::uvicorn.config.UvicornDeprecationWarning"),
]


def test_frame_header_lengths():
    assert frame_header(5) == b"\x81\x05"
    assert frame_header(125) == b"\x81\x7d"
    assert frame_header(126) == b"\x81\x7e\x00\x7e"
    assert frame_header(65535) == b"\x81\x7e\xff\xff"
    assert frame_header(65536) == b"\x81\x7f" + (65536).to_bytes(8, "big")


@pytest.mark.parametrize("ws_impl", ["websockets-sansio", "websockets"])
async def test_events_and_replies_flow(server_factory, sqlite_url, ws_impl):
    live = await server_factory(sqlite_url, ws=ws_impl)
    async with live.client() as c, live.client() as watcher:
        s = await c.mutation("session.create", {"queuePaused": True})
        sub = await watcher.subscribe("session.events", {"sessionId": s["id"]})
        await sub.wait_started()
        for i in range(30):
            await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "é" * (i * 10)})
        got = await collect(sub, 30)
        assert [int(i) for i, _ in got] == list(range(1, 31))
        assert got[-1][1]["message"]["content"] == "é" * 290


@pytest.mark.parametrize(
    "ws_impl,limit,codes",
    [
        ("websockets-sansio", {"send_buffer_bytes": 64 * 1024}, {4000}),
        # The queued writer cannot reach the socket: when the client's buffers are full the close frame is
        # stuck behind the data, and after the close timeout the connection ends without one (1006).
        ("websockets", {"send_queue_frames": 16}, {4000, None}),
    ],
)
async def test_slow_consumer_is_disconnected(server_factory, sqlite_url, ws_impl, limit, codes):
    live = await server_factory(sqlite_url, ws=ws_impl, max_queue_length=1000, **limit)
    async with live.client() as writer:
        s = await writer.mutation("session.create", {"queuePaused": True})
        slow = await connect(live.url.replace("http", "ws") + "/trpc?connectionParams=1", max_queue=1, max_size=None)
        await slow.send(orjson.dumps({"method": "connectionParams", "data": {"token": live.tokens["alice"]}}).decode())
        await slow.send(
            orjson.dumps(
                {
                    "id": 1,
                    "method": "subscription",
                    "params": {"path": "session.events", "input": {"sessionId": s["id"]}},
                }
            ).decode()
        )
        assert orjson.loads(await slow.recv())["result"]["type"] == "started"
        slow.transport.pause_reading()
        for i in range(150):
            await writer.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"{i}" + "y" * 60_000})
        slow.transport.resume_reading()
        with pytest.raises(Exception):
            while True:
                await asyncio.wait_for(slow.recv(), 10)
        assert slow.close_code in codes
        await slow.close()
        assert live.services.connections == set() or all(c.ws is not slow for c in live.services.connections)
        # the writer is not held back: a fresh subscriber replays the whole log at once
        async with live.client() as again:
            sub = await again.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"})
            assert len(await collect(sub, 150)) == 150


def test_shared_frames_are_per_prefix():
    from server.domain.events import EventEnvelope

    env = EventEnvelope.build("s", 7, "queue-cleared", {})
    a = env.ws_frame(b'{"id":1', frame_header)
    b = env.ws_frame(b'{"id":22', frame_header)
    assert env.ws_frame(b'{"id":1', frame_header) is a  # built once, shared
    assert orjson.loads(a[2:]) == {
        "id": 1,
        "result": {"type": "data", "data": {"id": "7", "data": {"type": "queue-cleared", "sessionId": "s"}}, "id": "7"},
    }
    assert orjson.loads(b[2:])["id"] == 22 and b[1] == len(b) - 2


def _payload(frame: bytes) -> bytes:
    n = frame[1] & 0x7F
    return frame[2:] if n < 126 else frame[4:] if n == 126 else frame[10:]


def test_ephemeral_frames_are_shared_per_prefix_and_id():
    from server.domain.events import EventEnvelope

    env = EventEnvelope.build("s", None, "text-delta", {"messageId": "m", "offset": 0, "delta": "hi"})
    a = env.ws_frame_as(b'{"id":1', "7", frame_header)
    assert env.ws_frame_as(b'{"id":1', "7", frame_header) is a
    b = env.ws_frame_as(b'{"id":1', "8", frame_header)
    assert orjson.loads(_payload(a))["result"]["id"] == "7" and orjson.loads(_payload(b))["result"]["id"] == "8"
    assert orjson.loads(_payload(b))["result"]["data"] == {"id": "8", "data": orjson.loads(env.json)}
