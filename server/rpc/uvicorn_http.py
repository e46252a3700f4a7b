"""What chatsync knows of uvicorn's HTTP protocol (its ``httptools`` implementation; tested with the uvicorn
versions pyproject.toml allows): :func:`guarded_http_protocol` makes the ``http=`` class that bounds what a
connection may cost before the app has any say.

uvicorn alone holds a connection that sends half a request line, or half a body, for as long as the client
likes; it holds a connection that sent nothing at all, forever; and after the app answered a request early
(``401`` before reading an upload) it reads and drops the rest of the body however long that is. Each such
connection costs a file descriptor, and the process has a fixed number of those. Here:

* **Header deadline** — a request's line and headers must be complete within ``header_timeout`` seconds of
  the connection being made (or, on a kept-alive connection, of the request's first byte); else ``408`` and
  close. Idle time between requests is uvicorn's own keep-alive timeout.
* **Body inactivity deadline** — while a request's body is being received, ``body_timeout`` seconds without
  a byte from the client end it: ``408`` and close when no answer has started, else just close. The app sees
  the client disconnect (Starlette's ``ClientDisconnect``), so an upload cleans up as for any client that
  went away. Time when the server is the one not reading (the app has not asked for more, or owes a
  ``100 Continue``) does not count.
* **Answers not read** — an answer the client stops taking (the socket's buffer full for ``body_timeout``
  seconds without draining below its low-water mark) ends the connection.
* **Early answers** — once the answer to a request is complete while its body is not, at most
  ``drain_bytes`` more of the body are read and dropped (so that an ordinary client, which writes its whole
  body before reading, gets to read the answer, and the connection can carry its next request); a body
  declared longer than that, or one that runs past it, ends the connection: the answer is flushed, the
  write side shut, nothing more is read, and the socket is closed :data:`LINGER_SECONDS` later.
* **Connection bound** — at most ``max_connections`` plain HTTP connections (an SSE stream is one; a
  WebSocket stops being one once upgraded) and at most ``max_sockets`` connections of any kind. A
  connection past either bound first makes room by closing one closing anyway after an early answer, else
  the connection that has waited longest without a request in progress (still sending its headers, or idle
  between requests: the cheapest to close and the likeliest to be a stalled client); when every connection
  is busy with a request, the new one is answered ``503`` with ``Retry-After`` and closed.

The bounds are shared by every connection of a server through one :class:`HttpGate`.
"""

from __future__ import annotations

import asyncio
import enum
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .. import metrics
from ..protocol.errors import RpcError
from .http import plain_error_body

LINGER_SECONDS = 1.0
"""After an early answer whose request body is too long to drain, how long the answer has to reach the
client (its write side already shut) before the socket is closed."""
FULL_RETRY_AFTER_SECONDS = 2


def _raw_response(status: bytes, err: RpcError, extra: bytes = b"") -> bytes:
    body = plain_error_body(err)
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncache-control: no-store\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n" + extra + b"connection: close\r\n\r\n" + body
    )


TIMEOUT_RESPONSE = _raw_response(
    b"408 Request Timeout", RpcError("TIMEOUT", "The request was not sent in time; the connection is closed")
)
FULL_RESPONSE = _raw_response(
    b"503 Service Unavailable",
    RpcError("SERVICE_UNAVAILABLE", "Too many connections on this server; retry shortly"),
    b"retry-after: " + str(FULL_RETRY_AFTER_SECONDS).encode() + b"\r\n",
)


class _Phase(enum.Enum):
    HEADERS = 1  # waiting for a request's line and headers
    BODY = 2  # headers in, body still arriving (also after an early answer, while the rest is drained)
    IDLE = 3  # the request is fully received: the app's turn, or nothing to do until the next request
    DONE = 4  # closing, or upgraded to a WebSocket: nothing here applies any more


@dataclass(eq=False)
class HttpGate:
    """The bounds of one server's HTTP connections and the connections they count (see module doc)."""

    header_timeout: float
    body_timeout: float
    drain_bytes: int
    max_connections: int
    max_sockets: int
    live: set[GuardedHttpProtocol] = field(default_factory=set)
    # Connections with no request in progress, oldest first (a dict keeps insertion order): who makes room.
    waiting: dict[GuardedHttpProtocol, None] = field(default_factory=dict)
    # Connections closing after an early answer (:data:`LINGER_SECONDS`): the first to go when room is needed.
    lingering: set[GuardedHttpProtocol] = field(default_factory=set)

    def forget(self, conn: GuardedHttpProtocol) -> None:
        self.live.discard(conn)
        self.waiting.pop(conn, None)
        self.lingering.discard(conn)

    def make_room(self) -> bool:
        """Close a lingering connection, else the one that has waited longest without a request in progress;
        False if there is none."""
        victim = next(iter(self.lingering), None) or next(iter(self.waiting), None)
        if victim is None:
            return False
        victim.close_now("evicted")
        return True


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol with the deadlines and bounds of the module doc.

    One timer at a time per connection: it fires at the earliest deadline that may apply and looks again
    at the connection's state (:meth:`_check`) rather than being moved on every chunk received."""

    gate: ClassVar[HttpGate]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = _Phase.HEADERS
        self._since = 0.0  # HEADERS: when the request (or connection) began; BODY: when a body byte last came
        self._timer: asyncio.TimerHandle | None = None
        self._unread_since: float | None = None  # when the client stopped taking the answer (writes paused)
        self._received = 0  # body bytes of the current request
        self._drained = 0  # of those, read after its answer was complete

    # --- the connection ----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(transport)
        gate = self.gate
        if (len(gate.live) >= gate.max_connections or len(self.connections) > gate.max_sockets) and (
            not gate.make_room()
        ):
            metrics.HTTP_CLOSES.labels(reason="refused").inc()
            self._phase = _Phase.DONE
            transport.write(FULL_RESPONSE)
            transport.close()
            return
        gate.live.add(self)
        gate.waiting[self] = None
        self._since = self.loop.time()
        self._arm(self._since + gate.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._phase = _Phase.DONE
        self.gate.forget(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._phase is _Phase.DONE:
            return  # refused, timed out or closing after an early answer: nothing more is parsed
        super().data_received(data)

    def handle_websocket_upgrade(self) -> None:
        # From here on the WebSocket protocol owns the socket (and its own bounds): it is no HTTP connection.
        self._phase = _Phase.DONE
        self.gate.forget(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().handle_websocket_upgrade()

    def close_now(self, reason: str) -> None:
        """Close at once (a response already written is flushed first when the socket takes it)."""
        metrics.HTTP_CLOSES.labels(reason=reason).inc()
        self._phase = _Phase.DONE
        self.gate.forget(self)
        transport = self.transport
        if transport.get_write_buffer_size():
            transport.abort()  # a client that does not read gets no say in when its socket is freed
        else:
            transport.close()

    # --- parser callbacks ---------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._phase is _Phase.DONE:
            return
        if self._phase is not _Phase.HEADERS:  # a later request on a kept-alive connection
            self._phase = _Phase.HEADERS
            self._since = self.loop.time()
            self._arm(self._since + self.gate.header_timeout)
        self._received = self._drained = 0

    def on_headers_complete(self) -> None:
        if self._phase is _Phase.DONE:
            return
        self.gate.waiting.pop(self, None)
        self._phase = _Phase.BODY
        self._since = self.loop.time()
        self._arm(self._since + self.gate.body_timeout)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._phase is not _Phase.BODY:
            return
        self._received += len(body)
        self._since = self.loop.time()
        cycle = self.cycle
        if cycle is not None and cycle.response_complete:
            self._drained += len(body)
            if self._drained > self.gate.drain_bytes:
                self._stop_reading("drain-limit")
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._phase is _Phase.BODY:
            self._phase = _Phase.IDLE
        super().on_message_complete()

    def on_response_complete(self) -> None:
        idle = not self.pipeline  # else the answer was to an earlier request, and the next one starts now
        super().on_response_complete()
        if not idle or self._phase is _Phase.DONE or self.transport.is_closing():
            return
        if self._phase is _Phase.BODY:  # answered before the body ended: drain a bounded rest, or stop
            rest = self._declared_length()
            if rest is not None and rest - self._received > self.gate.drain_bytes:
                self._stop_reading("drain-limit")
                return
        self.gate.waiting[self] = None

    def pause_writing(self) -> None:
        super().pause_writing()
        self._unread_since = self.loop.time()
        self._arm(self._unread_since + self.gate.body_timeout)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._unread_since = None

    # --- deadlines ----------------------------------------------------------------------------------------

    def _arm(self, deadline: float) -> None:
        timer = self._timer
        if timer is not None:
            if timer.when() <= deadline:
                return  # it fires first and looks again
            timer.cancel()
        self._timer = self.loop.call_at(deadline, self._check)

    def _check(self) -> None:
        self._timer = None
        if self._phase is _Phase.DONE:
            return
        now = self.loop.time()
        deadline, reason = math.inf, ""
        if self._phase is _Phase.HEADERS:
            deadline, reason = self._since + self.gate.header_timeout, "header-timeout"
        elif self._phase is _Phase.BODY:
            cycle = self.cycle
            if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
                self._since = now  # the server is the one not reading: the client is not stalling
            deadline, reason = self._since + self.gate.body_timeout, "body-timeout"
        if self._unread_since is not None and self._unread_since + self.gate.body_timeout < deadline:
            deadline, reason = self._unread_since + self.gate.body_timeout, "send-timeout"
        if deadline == math.inf:
            return
        if now < deadline:
            self._arm(deadline)
            return
        if reason != "send-timeout" and self._may_answer():
            self.transport.write(TIMEOUT_RESPONSE)
        self.close_now(reason)

    def _may_answer(self) -> bool:
        """Whether a 408 would be the only answer under way (pipelining: an earlier request's may be)."""
        cycle = self.cycle
        if self._phase is _Phase.HEADERS:
            return cycle is None or cycle.response_complete
        return not self.pipeline and not cycle.response_started

    def _stop_reading(self, reason: str) -> None:
        """End a connection whose answer is complete without reading the rest of its request: the answer is
        flushed and the write side shut, so the client can read it, then the socket is closed."""
        metrics.HTTP_CLOSES.labels(reason=reason).inc()
        self._phase = _Phase.DONE
        self.gate.waiting.pop(self, None)
        self.gate.lingering.add(self)  # still counted until closed, and the first to go when room is needed
        transport = self.transport
        self.flow.pause_reading()
        if not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, transport.abort)

    def _declared_length(self) -> int | None:
        for name, value in self.headers or ():
            if name == b"content-length":
                return int(value) if value.isdigit() else None
        return None


def guarded_http_protocol(gate: HttpGate) -> type[GuardedHttpProtocol]:
    """The ``http=`` class for one uvicorn server, all of whose connections share ``gate``."""
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"gate": gate})


def http_gate(http: object) -> HttpGate | None:
    """The gate of a uvicorn ``Config.http`` made by :func:`guarded_http_protocol`, else None."""
    if isinstance(http, type) and issubclass(http, GuardedHttpProtocol):
        return http.gate
    return None
