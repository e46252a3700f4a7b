"""How frames leave a WebSocket connection.

Fan-out is the hot path: one event goes to every subscriber of a session. Two writers share one interface,
:class:`ConnectionWriter` (an ``EventWriter`` of ``sync/writer.py`` plus what the connection itself needs):

* ``uvicorn_ws.TransportWriter`` (under uvicorn's sans-I/O WebSocket protocol): frames are encoded and
  written straight to the socket (or its transport), synchronously, by the code that produced them. No
  queue, no task switch, no per-frame ASGI message. The transport's own write buffer is the bounded buffer:
  when a client stops reading and it grows past its limit, the client is closed as a slow consumer.
* :class:`QueuedWriter` (any other ASGI server): a bounded deque of text frames drained by one writer task
  through the ASGI ``send``.

Either way a producer never waits on a slow client, and a slow client never delays the others.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections import deque
from collections.abc import Callable
from contextlib import suppress

from starlette.websockets import WebSocket, WebSocketDisconnect

from ..domain.events import EventEnvelope, tracked_tail
from ..sync.writer import EventWriter

log = logging.getLogger(__name__)

ABORT_AFTER_CLOSE_SECONDS = 5.0


def frame_header(length: int) -> bytes:
    """RFC 6455 header of one unmasked, final text frame (server to client)."""
    if length < 126:
        return bytes((0x81, length))
    if length < 65536:
        return b"\x81\x7e" + length.to_bytes(2, "big")
    return b"\x81\x7f" + length.to_bytes(8, "big")


class ConnectionWriter(EventWriter):
    """The one writer of a WebSocket connection's frames: replies and control frames (``send``) and, as an
    :class:`~server.sync.writer.EventWriter`, the events fan-out gives its subscriptions. Never blocks."""

    __slots__ = ()
    closed: bool = False

    @abc.abstractmethod
    def send(self, text: str) -> None:
        """Queue one text frame; never blocks."""

    def send_event(self, prefix: bytes, env: EventEnvelope) -> None:
        """Queue a tracked data frame for a durable event (``prefix`` is ``{"id":<sub id>``)."""
        self.send(prefix.decode() + env.ws_tail())

    def send_event_as(self, prefix: bytes, env: EventEnvelope, event_id: str) -> None:
        """Queue a data frame for an ephemeral event, tracked under ``event_id``."""
        self.send(prefix.decode() + tracked_tail(event_id, env.json))

    @abc.abstractmethod
    def pending(self) -> int:
        """How much is buffered and not yet written to the network (frames or bytes)."""

    @abc.abstractmethod
    async def run(self) -> None:
        """Write until cancelled or the connection is gone."""

    @abc.abstractmethod
    async def close(self, code: int) -> None:
        """Send a close frame after what is queued (give up after a few seconds) and close."""

    async def drain(self, timeout: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        # Polled: the transport tells nobody when its buffer empties, and this runs once, at shutdown.
        while self.pending() and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.01)


class QueuedWriter(ConnectionWriter):
    """Bounded deque of text frames drained through the ASGI ``send`` by one task."""

    def __init__(self, websocket: WebSocket, limit_frames: int, on_overflow: Callable[[], None]) -> None:
        self._ws = websocket
        self._frames: deque[str] = deque()
        self._wake = asyncio.Event()
        self._limit = limit_frames
        self._on_overflow = on_overflow
        self.closed = False

    def send(self, text: str) -> None:
        if self.closed:
            return
        if len(self._frames) >= self._limit:
            self.closed = True
            self._on_overflow()
            return
        self._frames.append(text)
        self._wake.set()

    def pending(self) -> int:
        return len(self._frames)

    async def run(self) -> None:
        frames = self._frames
        with suppress(WebSocketDisconnect, RuntimeError, OSError):
            while True:
                await self._wake.wait()
                self._wake.clear()
                while frames:
                    await self._ws.send_text(frames.popleft())

    async def close(self, code: int) -> None:
        self.closed = True
        with suppress(Exception):
            await asyncio.wait_for(self._ws.close(code), ABORT_AFTER_CLOSE_SECONDS)
