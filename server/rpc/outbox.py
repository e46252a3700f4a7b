"""How frames leave a WebSocket connection.

Fan-out is the hot path: one event goes to every subscriber of a session. Two writers share one interface:

* :class:`TransportOutbox` (used under uvicorn's sans-I/O WebSocket protocol): frames are encoded here and
  written straight to the socket (or its transport), synchronously, by the code that produced them. No
  queue, no task switch, no per-frame ASGI message. The transport's own write buffer is the bounded buffer:
  when a client stops reading and it grows past ``limit_bytes``, the client is closed as a slow consumer.
* :class:`TaskOutbox` (any other ASGI server): a bounded deque of text frames drained by one writer task
  through the ASGI ``send``.

Either way a producer never waits on a slow client, and a slow client never delays the others.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import os
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from ..domain.events import EventEnvelope, tracked_tail

log = logging.getLogger(__name__)

ABORT_AFTER_CLOSE_SECONDS = 5.0


def frame_header(length: int) -> bytes:
    """RFC 6455 header of one unmasked, final text frame (server to client)."""
    if length < 126:
        return bytes((0x81, length))
    if length < 65536:
        return b"\x81\x7e" + length.to_bytes(2, "big")
    return b"\x81\x7f" + length.to_bytes(8, "big")


class Outbox(abc.ABC):
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


def _plain_socket_fd(transport: asyncio.BaseTransport) -> int:
    """The socket's file descriptor if frames may be written to it directly; -1 when the transport must
    write them itself (TLS: it encrypts; or no socket to be found)."""
    if transport.get_extra_info("sslcontext") is not None or transport.get_extra_info("ssl_object") is not None:
        return -1
    sock = transport.get_extra_info("socket")
    try:
        return int(sock.fileno()) if sock is not None else -1
    except (OSError, AttributeError, ValueError):
        return -1


def _write_fd(fd: int, frame: bytes) -> int:
    """Bytes of ``frame`` written to the socket now: 0 when its buffer is full, or when the connection
    failed (the transport then writes the frame, finds the error and reports the connection lost)."""
    try:
        return os.write(fd, frame)
    except OSError:  # BlockingIOError, InterruptedError, BrokenPipeError, ConnectionResetError, ...
        return 0


class TransportOutbox(Outbox):
    """Writes frames directly to uvicorn's transport (see module docstring).

    A frame goes to the socket with one ``os.write`` when nothing is buffered before it; the transport takes
    the rest of a partial write (and everything while it holds anything, so frames stay in order), and it
    alone writes to a TLS connection. This costs less per frame than ``transport.write`` under uvloop
    (measured in ``docs/performance.md``), and fan-out is a write per subscriber per event.
    """

    __slots__ = ("_fd", "_limit", "_on_overflow", "_proto", "_transport", "closed")

    def __init__(self, protocol: Any, limit_bytes: int, on_overflow: Callable[[], None]) -> None:
        self._proto = protocol
        self._transport: asyncio.WriteTransport = protocol.transport
        self._fd = _plain_socket_fd(self._transport)
        self._limit = limit_bytes
        self._on_overflow = on_overflow
        self.closed = False

    @staticmethod
    def supports(protocol: Any) -> bool:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

        return isinstance(protocol, WebSocketsSansIOProtocol)

    def _push(self, frame: bytes) -> None:
        """Write one frame (the caller checked that the connection is open)."""
        transport = self._transport
        if self._fd >= 0 and not transport.get_write_buffer_size():
            sent = _write_fd(self._fd, frame)
            if sent == len(frame):
                return
            frame = frame[sent:]
        transport.write(frame)
        if transport.get_write_buffer_size() > self._limit:
            self.closed = True
            self._on_overflow()

    def _write(self, payload: bytes) -> None:
        if self.closed or self._proto.close_sent or self._transport.is_closing():
            return
        self._push(frame_header(len(payload)) + payload)

    def send(self, text: str) -> None:
        self._write(text.encode())

    def send_event(self, prefix: bytes, env: EventEnvelope) -> None:
        if self.closed or self._proto.close_sent or self._transport.is_closing():
            return
        frames = env._frames
        frame = frames.get(prefix) if frames is not None else None
        self._push(frame if frame is not None else env.ws_frame(prefix, frame_header))

    def send_event_as(self, prefix: bytes, env: EventEnvelope, event_id: str) -> None:
        if self.closed or self._proto.close_sent or self._transport.is_closing():
            return
        self._push(env.ws_frame_as(prefix, event_id, frame_header))

    def pending(self) -> int:
        return 0 if self._transport.is_closing() else self._transport.get_write_buffer_size()

    async def run(self) -> None:
        await asyncio.Future()  # nothing to do: writes happen where frames are produced

    async def close(self, code: int) -> None:
        self.closed = True
        proto, transport = self._proto, self._transport
        if proto.close_sent or transport.is_closing():
            return
        # Mirror uvicorn's own close path, but without waiting for the client to make the socket writable.
        proto.conn.send_close(code)
        transport.write(b"".join(proto.conn.data_to_send()))
        proto.close_sent = True
        transport.close()  # flushes what is buffered first
        asyncio.get_running_loop().call_later(ABORT_AFTER_CLOSE_SECONDS, transport.abort)


class TaskOutbox(Outbox):
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


class EventSink:
    """Where one subscription's events go: its connection's outbox and the frame prefix
    (``{"id":<subscription id>``). Called with a durable event it sends it (the event's own id is the tracked
    one); fan-out hands many sinks to :func:`send_event_many` / :func:`send_tracked_many` at once."""

    __slots__ = ("outbox", "prefix")

    def __init__(self, outbox: Outbox, prefix: bytes) -> None:
        self.outbox = outbox
        self.prefix = prefix

    def __call__(self, env: EventEnvelope) -> None:
        self.outbox.send_event(self.prefix, env)


def send_event_many(sinks: list[EventSink], events: Sequence[EventEnvelope]) -> None:
    """Send consecutive durable events to many subscriptions (each tracked under the event's own id).

    Every frame is chosen first — Python only, over the connections' state — and the writes then run back
    to back. Interleaving the two costs more than it looks: each ``write()`` runs the kernel's TCP path (on
    loopback the receiver's too), and Python run between two writes runs on caches the kernel just
    evicted. Several events (a batch committed together) go to a connection in one write.
    """
    writes: list[tuple[TransportOutbox, bytes]] = []
    single = events[0] if len(events) == 1 else None
    joined: dict[bytes, bytes] = {}
    for sink in sinks:
        ob = sink.outbox
        prefix = sink.prefix
        if type(ob) is not TransportOutbox:
            for env in events:
                ob.send_event(prefix, env)
        elif not (ob.closed or ob._proto.close_sent or ob._transport.is_closing()):
            if single is not None:
                frames = single._frames
                frame = frames.get(prefix) if frames is not None else None
                if frame is None:
                    frame = single.ws_frame(prefix, frame_header)
            else:
                frame = joined.get(prefix)
                if frame is None:
                    frame = joined[prefix] = b"".join(env.ws_frame(prefix, frame_header) for env in events)
            writes.append((ob, frame))
    _write_all(writes)


def send_tracked_many(targets: list[tuple[EventSink, str]], env: EventEnvelope) -> None:
    """Send one ephemeral event to many subscriptions, each tracked under its own ``event_id`` (the last
    durable id that subscriber got); two passes, as :func:`send_event_many`."""
    writes: list[tuple[TransportOutbox, bytes]] = []
    for sink, event_id in targets:
        ob = sink.outbox
        if type(ob) is not TransportOutbox:
            ob.send_event_as(sink.prefix, env, event_id)
        elif not (ob.closed or ob._proto.close_sent or ob._transport.is_closing()):
            writes.append((ob, env.ws_frame_as(sink.prefix, event_id, frame_header)))
    _write_all(writes)


def _write_all(writes: list[tuple[TransportOutbox, bytes]]) -> None:
    for ob, frame in writes:
        ob._push(frame)
