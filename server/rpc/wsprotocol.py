"""uvicorn's sans-I/O WebSocket protocol, with less memory per idle connection.

An idle subscribed connection is mostly bookkeeping, and the per-process connection count is bounded by
memory, so the parts every connection carries for its whole life are kept small:

* the inbox of ASGI receive events is ``sse.Inbox`` (a list and one waiter future) instead of an
  ``asyncio.Queue`` (which carries three deques and an Event: about 3 KiB before it holds anything);
* the "transport writable" flag is a bool and a waiter future instead of an ``asyncio.Event`` (a deque);
* the upgrade request's headers (the parsed request's and the ASGI scope's copy) and the 101 response are
  dropped once the handshake is sent: the app reads what it needs from them before it accepts.

Behaviour is uvicorn's: only these containers change.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from .sse import Inbox


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
