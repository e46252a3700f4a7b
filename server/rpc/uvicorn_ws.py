"""Everything chatsync knows of uvicorn's WebSocket internals, in one place (tested with the uvicorn versions
pyproject.toml allows; its HTTP protocol is ``uvicorn_http.py``'s).

* :class:`LeanWebSocketProtocol`, uvicorn's sans-I/O WebSocket protocol with less memory per idle
  connection. An idle subscribed connection is mostly bookkeeping, and the per-process connection count is
  bounded by memory, so the parts every connection carries for its whole life are kept small: the inbox of
  ASGI receive events is ``sse.Inbox`` (a list and one waiter future) instead of an ``asyncio.Queue``
  (three deques and an Event: about 3 KiB before it holds anything); the "transport writable" flag is a
  bool and a waiter future instead of an ``asyncio.Event``; the upgrade request's headers (the parsed
  request's and the ASGI scope's copy) and the 101 response are dropped once the handshake is sent (the
  app reads what it needs from them before it accepts). Behaviour is uvicorn's: only these containers change.
* :class:`TransportWriter`, the connection writer that puts a connection's frames straight onto that
  protocol's transport (``writer.py`` says why), found from the server's own ASGI ``send`` by :func:`transport_writer`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Any, cast

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from ..domain.events import EventEnvelope
from ..sync.writer import SubscriptionWriter
from .sse import Inbox
from .writer import ABORT_AFTER_CLOSE_SECONDS, ConnectionWriter, frame_header


class _Flag:
    """The subset of ``asyncio.Event`` the protocol uses for "the transport takes writes"."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = True
        self._waiters: list[asyncio.Future[None]] | None = None

    def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self) -> None:
        if self._set:
            return
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        await waiter


class LeanWebSocketProtocol(WebSocketsSansIOProtocol):
    """``ws=`` for uvicorn: its sans-I/O protocol with lighter per-connection state (see module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn declares these as an asyncio.Queue and an asyncio.Event; the lighter stand-ins implement the
        # part of them uvicorn uses (see the module doc), hence the two ignores.
        self.queue = Inbox()  # type: ignore[assignment]
        self.writable = _Flag()  # type: ignore[assignment]

    async def send(self, message: Any) -> None:
        await super().send(message)
        if message["type"] == "websocket.accept" and self.request is not None:
            # Read once to build the scope and the 101 response; nothing needs them after. (The request
            # stays referenced by the websockets parser's suspended frame: emptying its headers frees them.)
            self.request.headers.clear()
            self.request = self.response = None  # type: ignore[assignment]  # uvicorn declares them never None
            # The app reads the upgrade request (origin, token, host) before it accepts; emptied in place,
            # the scope's header list is freed for Starlette's ``Headers`` view of it too.
            cast(list[tuple[bytes, bytes]], self.scope["headers"]).clear()  # a list (ASGI declares an iterable)


def transport_writer(raw_send: Any, limit_bytes: int, on_overflow: Callable[[], None]) -> TransportWriter | None:
    """A :class:`TransportWriter` for the connection whose server-side ASGI ``send`` is ``raw_send`` (a
    bound method of uvicorn's sans-I/O protocol), or None under any other server."""
    protocol = getattr(raw_send, "__self__", None)
    if not isinstance(protocol, WebSocketsSansIOProtocol):
        return None
    return TransportWriter(protocol, limit_bytes, on_overflow)


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


class TransportWriter(ConnectionWriter):
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

    def writable(self) -> bool:
        """The connection is open: neither side began to close it."""
        return not (self.closed or self._proto.close_sent or self._transport.is_closing())

    def write_frame(self, frame: bytes) -> None:
        """Write one frame (the caller checked :meth:`writable`)."""
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
        if self.writable():
            self.write_frame(frame_header(len(payload)) + payload)

    def send(self, text: str) -> None:
        self._write(text.encode())

    def send_event(self, prefix: bytes, env: EventEnvelope) -> None:
        if self.writable():
            self.write_frame(env.ws_frame(prefix, frame_header))

    def send_event_as(self, prefix: bytes, env: EventEnvelope, event_id: str) -> None:
        if self.writable():
            self.write_frame(env.ws_frame_as(prefix, event_id, frame_header))

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

    @staticmethod
    def send_event_many(targets: list[SubscriptionWriter], events: Sequence[EventEnvelope]) -> None:
        """Fan-out's batch write (``sync/writer.EventWriter``): consecutive durable events to many subscriptions,
        each tracked under the event's own id.

        Every frame is chosen first — Python only, over the connections' state — and the writes then run back
        to back. Interleaving the two costs more than it looks: each ``write()`` runs the kernel's TCP path (on
        loopback the receiver's too), and Python run between two writes runs on caches the kernel just
        evicted. Several events (a batch committed together) go to a connection in one write.
        """
        writes: list[tuple[TransportWriter, bytes]] = []
        single = events[0] if len(events) == 1 else None
        joined: dict[bytes, bytes] = {}
        for target in targets:
            conn = target.connection
            prefix = target.prefix
            if type(conn) is not TransportWriter:
                for env in events:
                    conn.send_event(prefix, env)
            elif conn.writable():
                if single is not None:
                    writes.append((conn, single.ws_frame(prefix, frame_header)))
                    continue
                frame = joined.get(prefix)
                if frame is None:
                    frame = joined[prefix] = b"".join(env.ws_frame(prefix, frame_header) for env in events)
                writes.append((conn, frame))
        _write_all(writes)

    @staticmethod
    def send_tracked_many(targets: list[tuple[SubscriptionWriter, str]], env: EventEnvelope) -> None:
        """Send one ephemeral event to many subscriptions, each tracked under its own ``event_id`` (the last
        durable id that subscriber got); two passes, as ``send_event_many``. Subscribers that follow each other
        with the same prefix and id (most: tRPC clients number subscriptions from 1, and live ones share the last
        id) take the frame the one before them took, without looking it up again."""
        writes: list[tuple[TransportWriter, bytes]] = []
        last_prefix: bytes | None = None
        last_id: str | None = None
        frame = b""
        for target, event_id in targets:
            conn = target.connection
            if type(conn) is not TransportWriter:
                conn.send_event_as(target.prefix, env, event_id)
            elif conn.writable():
                prefix = target.prefix
                if prefix != last_prefix or event_id != last_id:
                    frame = env.ws_frame_as(prefix, event_id, frame_header)
                    last_prefix, last_id = prefix, event_id
                writes.append((conn, frame))
        _write_all(writes)


def _write_all(writes: list[tuple[TransportWriter, bytes]]) -> None:
    for conn, frame in writes:
        conn.write_frame(frame)
