"""A subscription as a Server-Sent Events stream (``httpSubscriptionLink``'s wire format), written straight to
ASGI ``send``.

An idle SSE stream lives as long as its client, so what it holds is kept small (the per-process connection
count is bounded by memory): three tasks (this response writing, the subscription producing, one waiting
for the client to go away) and an ``Inbox`` of pending items. Starlette's ``StreamingResponse`` would add an anyio
task group, an async generator, and (with ``asyncio.Queue`` and ``wait_for`` for the pings) a queue of three
deques and a task per wait.

The frames are tRPC's: ``connected`` first, then ``data`` with ``id`` for tracked events, ``ping`` every
``PING_SECONDS`` of silence, ``return`` when the subscription ends, ``serialized-error`` for an error. A reader
that falls more than ``CHATSYNC_SEND_BUFFER_BYTES`` behind, a revoked device and a server shutdown end the
stream with a retryable error (EventSource reconnects with its ``Last-Event-ID`` and loses nothing).
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

from .. import metrics
from ..domain.events import EventEnvelope, dumps
from ..protocol.errors import RpcError, error_shape, to_rpc_error
from ..services.auth import signed_out_error
from .context import Context, Services
from .registry import Procedure

PING_SECONDS = 15.0
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
    (b"vary", b"trpc-accept, accept"),
]
CONNECTED = b"event: connected\ndata: {}\n\n\n"
_DONE, _GONE = object(), object()
PING = object()
"""What ``Inbox.get`` returns when its timeout passed first."""


class Inbox:
    """Items for one consumer, in order: the subset of ``asyncio.Queue`` used here and by the WebSocket
    protocol (``uvicorn_ws.py``), without its three deques. ``get(timeout)`` returns ``PING`` when nothing
    came in time."""

    __slots__ = ("_waiter", "items")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Any) -> None:
        self.items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def empty(self) -> bool:
        return not self.items

    async def get(self, timeout: float | None = None) -> Any:
        while not self.items:
            loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            timer = None if timeout is None else loop.call_later(timeout, _wake, waiter)
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
                self._waiter = None
            if timeout is not None and not self.items:
                return PING
        return self.items.pop(0)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def error_frame(err: RpcError, path: str) -> bytes:
    return ("event: serialized-error\ndata: " + dumps(error_shape(err, path)) + "\n\n\n").encode()


class SseResponse:
    """The ASGI response of one ``GET`` subscription (see the module doc)."""

    def __init__(self, services: Services, streams: set[Inbox], ctx: Context, proc: Procedure, raw: Any) -> None:
        self.services, self.streams, self.ctx, self.proc, self.raw = services, streams, ctx, proc, raw

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        slots = self.services.slots
        # Taken here, where the ``finally`` that gives it back is sure to run; streams that opened together
        # after the check before this response can still find the process full.
        if not slots.take():
            body = CONNECTED + error_frame(
                RpcError("SERVICE_UNAVAILABLE", "Too many connections; retry"), self.proc.path
            )
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        try:
            await self._stream(receive, send)
        finally:
            slots.release()

    async def _stream(self, receive: Any, send: Any) -> None:
        ctx, proc, path = self.ctx, self.proc, self.proc.path
        inbox = Inbox()
        limit = self.services.settings.send_buffer_bytes
        backlog = 0  # bytes queued and not yet handed to the server

        def send_item(event_id: str | None, item: Any) -> None:
            nonlocal backlog
            if backlog > limit:
                return  # already over: the stream is ending
            backlog += len(item.json) if isinstance(item, EventEnvelope) else 256
            if backlog > limit:
                # A reader that does not keep up: end its stream with a retryable error, as a slow WebSocket
                # is closed with 4000; EventSource reconnects with its Last-Event-ID and loses nothing.
                metrics.SLOW_CONSUMER_CLOSES.inc()
                inbox.put_nowait(RpcError("SERVICE_UNAVAILABLE", "Slow consumer: reconnect and resume"))
                producer.cancel()
                return
            inbox.put_nowait((event_id, item))

        async def produce() -> None:
            try:
                stream = await proc.handler(ctx, proc.parse_input(self.raw))
                await stream.run(send_item)
                inbox.put_nowait(_DONE)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                inbox.put_nowait(to_rpc_error(exc))

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            inbox.put_nowait(_GONE)

        def revoked() -> None:
            inbox.put_nowait(signed_out_error())

        await send({"type": "http.response.body", "body": CONNECTED, "more_body": True})
        producer = asyncio.create_task(produce())
        watcher = asyncio.create_task(watch())
        self.streams.add(inbox)
        devices = self.services.devices
        if ctx.device_id is not None:
            devices.add(ctx.device_id, revoked)
        last_tracked: str | None = None
        ended = False  # the response is complete, or the client is gone
        closed = "server"  # chatsync_connections_closed_total's code: completed, client, or the error's code
        metrics.CONNECTIONS_OPENED.labels(transport="sse").inc()
        try:
            while True:
                item = await inbox.get(PING_SECONDS)
                if item is _GONE:
                    ended, closed = True, "client"
                    return
                if item is PING:
                    body = "event: ping\ndata: \n\n\n"
                elif item is _DONE or isinstance(item, RpcError):
                    last = error_frame(item, path) if isinstance(item, RpcError) else b"event: return\ndata: \n\n\n"
                    ended, closed = True, item.code if isinstance(item, RpcError) else "completed"
                    await send({"type": "http.response.body", "body": last, "more_body": False})
                    return
                else:
                    event_id, value = item
                    backlog -= len(value.json) if isinstance(value, EventEnvelope) else 256
                    data = value.json if isinstance(value, EventEnvelope) else dumps(value)
                    if event_id is not None:
                        last_tracked = event_id
                        body = "data: " + data + "\nid: " + event_id + "\n\n\n"
                    elif last_tracked is None:
                        body = "data: " + data + "\n\n\n"
                    else:
                        # Browsers would stamp the last id on this untracked event; reset it, then restore it.
                        body = "data: " + data + "\nid: \n\n\nevent: restore-id\ndata: \nid: " + last_tracked + "\n\n\n"
                await send({"type": "http.response.body", "body": body.encode(), "more_body": True})
        finally:
            metrics.CONNECTIONS_CLOSED.labels("sse", closed).inc()
            self.streams.discard(inbox)
            if ctx.device_id is not None:
                devices.discard(ctx.device_id, revoked)
            producer.cancel()
            watcher.cancel()
            if not ended:  # cancelled (the server is stopping) or a failed send: end the response if we can
                with suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
