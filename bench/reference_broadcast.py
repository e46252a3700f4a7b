"""The fan-out floor on this machine: a bare ``websockets`` server that broadcasts with ``broadcast()``.

    .venv/bin/python bench/fanout.py --server reference ...
    .venv/bin/python bench/streaming.py --server reference ...
    .venv/bin/python bench/capacity.py --server reference ...

It speaks just enough of tRPC's WebSocket messages for ``bench/fanout.py``'s publisher and subscribers
(``session.create``, ``message.enqueueMessage``, ``message.clearQueue``, ``session.get``, one
``session.events`` subscription per connection) and keeps nothing: no database, no auth, no ordering
guarantees beyond one process's. Each event's frame is serialised once and handed to ``broadcast()``, the
library's fastest fan-out (it writes the same frame to every connection without awaiting). Running both
servers under the same load generator, minutes apart, turns chatsync's CPU per delivery into a ratio that
does not drift with the machine.

For ``bench/streaming.py`` it also answers ``message.send`` the way that benchmark's ``stamp`` provider does:
``content`` tokens, each the wall-clock time it was produced, at the pace named by the session's ``model``
(``full`` or tokens per second), broadcast as ``text-delta`` events and closed by ``run-finished`` (a send
during an answer waits for it, as a queued message does). Sessions are independent (``bench/capacity.py``
runs thousands), each with its own subscribers and sequence. No
database, no stream buffer, no run: the latency it shows is the floor of producing a token and writing it to
every subscriber on this machine at that moment.
"""

from __future__ import annotations

import argparse
import asyncio
import http
import os
import time

import orjson
from websockets.asyncio.server import ServerConnection, broadcast, serve
from websockets.http11 import Request, Response


class Reference:
    def __init__(self) -> None:
        # session -> {connection: its subscription id}
        self.subscribers: dict[str, dict[ServerConnection, object]] = {}
        self.seq: dict[str, int] = {}
        self.model: dict[str, str] = {}
        self.turn: dict[str, asyncio.Lock] = {}
        self.streams: set[asyncio.Task] = set()

    def publish(self, sid: str, event: dict, durable: bool = True) -> None:
        if durable:
            self.seq[sid] = self.seq.get(sid, 0) + 1
        eid = str(self.seq.get(sid, 0))
        by_id: dict[object, list[ServerConnection]] = {}
        for conn, sub_id in self.subscribers.get(sid, {}).items():
            by_id.setdefault(sub_id, []).append(conn)
        for sub_id, conns in by_id.items():
            frame = orjson.dumps(
                {"id": sub_id, "result": {"type": "data", "data": {"id": eid, "data": event}, "id": eid}}
            ).decode()
            broadcast(conns, frame)

    def call(self, path: str, inp: dict | None) -> object:
        inp = inp or {}
        if path == "session.create":
            sid = f"reference-{len(self.model)}"
            self.model[sid] = str(inp.get("model") or "full")
            return {"id": sid}
        sid = str(inp.get("sessionId"))
        if path == "message.send":
            task = asyncio.get_running_loop().create_task(
                self.stream(sid, int(str(inp.get("content", "0")).split()[0]))
            )
            self.streams.add(task)
            task.add_done_callback(self.streams.discard)
            return {"status": "started"}
        if path == "session.get":
            return {"lastEventId": str(self.seq.get(sid, 0))}
        if path == "message.enqueueMessage":
            message = {
                "id": f"queue-{self.seq.get(sid, 0) + 1}",
                "content": inp.get("content", ""),
                "attachments": [],
                "enqueuedAt": int(time.time() * 1000),
            }
            self.publish(sid, {"type": "queue-message-added", "sessionId": sid, "message": message})
            return message
        if path == "message.clearQueue":
            self.publish(sid, {"type": "queue-cleared", "sessionId": sid})
            return None
        raise KeyError(path)

    async def stream(self, sid: str, tokens: int) -> None:
        """The ``stamp`` provider's tokens, each broadcast as it is produced; one answer at a time per session."""
        async with self.turn.setdefault(sid, asyncio.Lock()):
            model = self.model.get(sid, "full")
            interval = 0.0 if model == "full" else 1.0 / float(model)
            start, offset = time.perf_counter(), 0
            mid = f"answer-{self.seq.get(sid, 0)}"
            for i in range(tokens):
                await asyncio.sleep(max(start + i * interval - time.perf_counter(), 0) if interval else 0)
                delta = f"{time.time_ns()} "
                self.publish(
                    sid,
                    {"type": "text-delta", "sessionId": sid, "messageId": mid, "offset": offset, "delta": delta},
                    durable=False,
                )
                offset += len(delta)
            self.publish(sid, {"type": "run-finished", "sessionId": sid, "runId": mid, "finishReason": "stop"})

    async def handle(self, conn: ServerConnection) -> None:
        subscribed: list[str] = []
        try:
            async for raw in conn:
                msg = orjson.loads(raw)
                if msg == "PING" or msg.get("method") == "connectionParams":
                    continue
                rid, method = msg.get("id"), msg.get("method")
                if method == "subscription":
                    sid = str(msg["params"].get("input", {}).get("sessionId"))
                    subscribed.append(sid)
                    self.subscribers.setdefault(sid, {})[conn] = rid
                    await conn.send(orjson.dumps({"id": rid, "result": {"type": "started"}}).decode())
                elif method in ("query", "mutation"):
                    params = msg["params"]
                    result = self.call(params["path"], params.get("input"))
                    await conn.send(orjson.dumps({"id": rid, "result": {"type": "data", "data": result}}).decode())
        finally:
            for sid in subscribed:
                self.subscribers.get(sid, {}).pop(conn, None)


def ready(conn: ServerConnection, request: Request) -> Response | None:
    if request.path.startswith("/readyz"):
        return conn.respond(http.HTTPStatus.OK, "ok\n")
    return None


async def main() -> None:
    ref = Reference()
    port = int(os.environ.get("CHATSYNC_PORT", "8787"))
    # Compression off, as for chatsync's frames (and as a broadcast server would choose for small frames).
    # Thousands of subscribers connect at once: uvicorn's listen backlog (2048), and no handshake timeout (the
    # default 10 s closed a handshake queued behind 2,400 others at S = 800).
    async with serve(
        ref.handle,
        "127.0.0.1",
        port,
        process_request=ready,
        compression=None,
        max_size=None,
        backlog=2048,
        open_timeout=None,
    ):
        await asyncio.Future()


if __name__ == "__main__":
    # No options of its own: the benchmarks start it with CHATSYNC_PORT set; --help says so.
    argparse.ArgumentParser(
        description="The fan-out floor: a bare websockets broadcast() server speaking just enough tRPC for the "
        "benchmarks (started by bench/fanout.py, streaming.py and capacity.py with --server reference).",
        epilog="Listens on 127.0.0.1:$CHATSYNC_PORT (default 8787).",
    ).parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
