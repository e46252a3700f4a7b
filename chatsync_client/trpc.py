"""An async tRPC-over-WebSocket client (the wire format of ``@trpc/client``'s wsLink).

It authenticates with ``connectionParams`` like the JS client, answers ``PING``, reconnects after a
dropped socket or a server ``reconnect`` notification, and re-subscribes every open subscription with the
last tracked id it received, so a subscriber sees each tracked event once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from server.domain import close_codes

log = logging.getLogger(__name__)


class TrpcError(Exception):
    """An error answered by the server, with its tRPC code key (``NOT_FOUND``, ...)."""

    def __init__(self, shape: dict[str, Any]) -> None:
        data = shape.get("data") or {}
        self.code: str = data.get("code", "INTERNAL_SERVER_ERROR")
        self.http_status: int | None = data.get("httpStatus")
        self.rpc_code: int | None = shape.get("code")
        self.path: str | None = data.get("path")
        self.message = shape.get("message", self.code)
        # TOO_MANY_REQUESTS: when to try again.
        self.retry_after_ms: int | None = data.get("retryAfterMs")
        self.shape = shape
        super().__init__(f"{self.code}: {self.message}")


class ConnectionLost(Exception):
    """The socket closed while a query or mutation was in flight (not retried, as in @trpc/client)."""


class ServerUnreachable(ConnectionLost):
    """No connection could be opened (``reconnect=False``), or none within the connect timeout."""


class ConnectionRejected(ConnectionLost):
    """The server closed the socket with a "do not retry as is" code (``close_codes.FINAL_MIN`` to ``FINAL_MAX``,
    e.g. ``UNAUTHORIZED``: the token was not accepted)."""

    def __init__(self, code: int, reason: str = "") -> None:
        self.code = code
        super().__init__(f"connection rejected ({code}{': ' + reason if reason else ''})")


class _Sub:
    def __init__(self, sid: int, path: str, input: Any, last_event_id: str | None) -> None:
        self.id = sid
        self.path = path
        self.input = input
        self.last_event_id = last_event_id
        self.items: asyncio.Queue[Any] = asyncio.Queue()
        self.started = asyncio.Event()

    def request(self) -> dict[str, Any]:
        params: dict[str, Any] = {"path": self.path, "input": self.input}
        if self.last_event_id is not None:
            params["lastEventId"] = self.last_event_id
        return {"id": self.id, "method": "subscription", "params": params}


_END = object()


class Subscription:
    """Async iterator over ``(id, data)`` pairs (``id`` is None for untracked items)."""

    def __init__(self, client: TrpcClient, sub: _Sub) -> None:
        self._client = client
        self._sub = sub

    @property
    def last_event_id(self) -> str | None:
        return self._sub.last_event_id

    async def wait_started(self, timeout: float = 10) -> None:
        await asyncio.wait_for(self._sub.started.wait(), timeout)

    def __aiter__(self) -> AsyncIterator[tuple[str | None, Any]]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[tuple[str | None, Any]]:
        while True:
            item = await self._sub.items.get()
            if item is _END:
                return
            if isinstance(item, TrpcError):
                raise item
            yield item

    async def next(self, timeout: float = 10) -> tuple[str | None, Any]:
        item = await asyncio.wait_for(self._sub.items.get(), timeout)
        if item is _END:
            raise StopAsyncIteration
        if isinstance(item, TrpcError):
            raise item
        pair: tuple[str | None, Any] = item
        return pair

    async def close(self) -> None:
        await self._client.stop_subscription(self._sub)


class TrpcClient:
    """Use as ``async with TrpcClient(url, token) as c: await c.query("session.list")``.

    ``url`` is the server's base (``http://host:port``) or its WebSocket endpoint (``ws://host:port/trpc``).
    """

    def __init__(
        self, url: str | list[str], token: str | None, *, reconnect: bool = True, max_backoff: float = 5.0
    ) -> None:
        urls = [url] if isinstance(url, str) else list(url)
        self.urls = [self._ws_url(u) for u in urls]  # several: fail over in turn (replicas)
        self.url = self.urls[0]
        self.token = token
        self.reconnect = reconnect
        self.max_backoff = max_backoff
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._subs: dict[int, _Sub] = {}
        self._ws: ClientConnection | None = None
        self._runner: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self.connects = 0  # how many sockets were opened; tests and UIs read it
        self.reconnect_notices = 0  # server-requested reconnects (graceful restarts) seen
        self.rejected: ConnectionRejected | None = None  # set when the server refused us for good
        self._listeners: list[Callable[[bool], None]] = []

    def add_connection_listener(self, callback: Callable[[bool], None]) -> Callable[[], None]:
        """Call ``callback(True)`` when a socket is open and ``callback(False)`` when it drops.

        Returns a function that removes the listener. Callbacks must not block.
        """
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def _notify(self, up: bool) -> None:
        for cb in list(self._listeners):
            try:
                cb(up)
            except Exception:  # a broken UI callback must not take the connection loop down
                log.exception("connection listener failed")

    @staticmethod
    def _ws_url(url: str) -> str:
        base = url.rstrip("/")
        if base.startswith("http"):
            base = "ws" + base[4:]
        if not base.endswith("/trpc"):
            base += "/trpc"
        return base + "?connectionParams=1"

    async def __aenter__(self) -> TrpcClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self, timeout: float = 10) -> None:
        """Start the connection loop and wait for the first socket.

        Raises :class:`ServerUnreachable` when the loop gave up (``reconnect=False``) or nothing connected
        within ``timeout``, and :class:`ConnectionRejected` when the server refused the credentials.
        """
        self._runner = asyncio.create_task(self._run())
        waiter = asyncio.ensure_future(self._connected.wait())
        try:
            await asyncio.wait({waiter, self._runner}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if self._connected.is_set():
            return
        if self.rejected is not None:
            raise self.rejected
        if not self._runner.done():
            self._runner.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._runner
        raise ServerUnreachable(f"cannot connect to {self.url.split('?')[0]}")

    async def close(self) -> None:
        self._closing = True
        if self._runner is not None:
            self._runner.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._runner
        if self._ws is not None:
            await self._ws.close()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def drop_connection(self) -> None:
        """Abort the socket without a closing handshake (tests: a network drop)."""
        if self._ws is not None:
            self._ws.transport.abort()

    # --- calls ----------------------------------------------------------------------------------------

    async def query(self, path: str, input: Any = None, timeout: float = 30) -> Any:
        return await self._call("query", path, input, timeout)

    async def mutation(self, path: str, input: Any = None, timeout: float = 30) -> Any:
        return await self._call("mutation", path, input, timeout)

    async def _call(self, method: str, path: str, input: Any, timeout: float) -> Any:
        await asyncio.wait_for(self._connected.wait(), timeout)
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        params: dict[str, Any] = {"path": path}
        if input is not None:
            params["input"] = input
        try:
            await self._send({"id": rid, "method": method, "params": params})
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(rid, None)

    async def subscribe(self, path: str, input: Any = None, *, last_event_id: str | None = None) -> Subscription:
        sub = _Sub(next(self._ids), path, input, last_event_id)
        self._subs[sub.id] = sub
        if self._connected.is_set():
            with suppress(ConnectionClosed):
                await self._send(sub.request())
        return Subscription(self, sub)

    async def stop_subscription(self, sub: _Sub) -> None:
        """Stop ``sub`` on the server (when connected) and end its iteration here."""
        if self._subs.pop(sub.id, None) is not None and self._connected.is_set():
            with suppress(ConnectionClosed):
                await self._send({"id": sub.id, "method": "subscription.stop"})
        sub.items.put_nowait(_END)

    async def _send(self, msg: Any) -> None:
        assert self._ws is not None
        await self._ws.send(orjson.dumps(msg).decode())

    # --- connection loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        attempt = 0
        turn = 0
        while not self._closing:
            self.url = self.urls[turn % len(self.urls)]
            turn += 1
            try:
                async with connect(self.url, max_size=None, open_timeout=10) as ws:
                    self._ws = ws
                    self.connects += 1
                    await ws.send(
                        orjson.dumps(
                            {"method": "connectionParams", "data": {"token": self.token} if self.token else None}
                        ).decode()
                    )
                    for sub in list(self._subs.values()):
                        await ws.send(orjson.dumps(sub.request()).decode())
                    self._connected.set()
                    self._notify(True)
                    attempt = 0
                    await self._read(ws)
                    self._check_rejected(ws.close_code, ws.close_reason)
            except ConnectionClosed as exc:
                log.debug("connection lost: %r", exc)
                if exc.rcvd is not None:
                    self._check_rejected(exc.rcvd.code, exc.rcvd.reason)
            except (TimeoutError, OSError) as exc:
                log.debug("connection lost: %r", exc)
            finally:
                was_up = self._connected.is_set()
                self._connected.clear()
                self._ws = None
                lost = self.rejected or ConnectionLost("socket closed")
                for fut in self._pending.values():
                    if not fut.done():
                        fut.set_exception(lost)
                if was_up:
                    self._notify(False)
            if not self.reconnect or self._closing or self.rejected is not None:
                for sub in self._subs.values():
                    sub.items.put_nowait(self.rejected or ConnectionLost("socket closed"))
                return
            await asyncio.sleep(min(self.max_backoff, 0.05 * (2**attempt)) if attempt else 0)
            attempt += 1

    def _check_rejected(self, code: int | None, reason: str | None) -> None:
        # Decide by range, never by reason text (docs/sync.md "Close codes"): retrying a refused token
        # would only be refused again, forever.
        if code is not None and close_codes.FINAL_MIN <= code <= close_codes.FINAL_MAX:
            self.rejected = ConnectionRejected(code, reason or "")

    async def _read(self, ws: ClientConnection) -> None:
        async for raw in ws:
            if raw == "PING":
                await ws.send("PONG")
                continue
            if raw == "PONG":
                continue
            msg = orjson.loads(raw)
            if msg.get("method") == "reconnect":
                self.reconnect_notices += 1
                await ws.close()
                return
            rid = msg.get("id")
            if "error" in msg:
                err = TrpcError(msg["error"])
                if rid is None:
                    log.warning("connection-level error: %s", err)
                    continue
                if rid in self._pending:
                    fut = self._pending[rid]
                    if not fut.done():
                        fut.set_exception(err)
                elif rid in self._subs:
                    self._subs.pop(rid).items.put_nowait(err)
                continue
            result = msg.get("result", {})
            if rid in self._pending:
                fut = self._pending[rid]
                if not fut.done():
                    fut.set_result(result.get("data"))
                continue
            sub = self._subs.get(rid)
            if sub is None:
                continue
            kind = result.get("type")
            if kind == "started":
                sub.started.set()
            elif kind == "stopped":
                self._subs.pop(rid, None)
                sub.items.put_nowait(_END)
            elif kind == "data":
                tracked_id = result.get("id")
                data = result.get("data")
                if tracked_id is not None:
                    sub.last_event_id = tracked_id
                    sub.items.put_nowait((tracked_id, data["data"]))
                else:
                    sub.items.put_nowait((None, data))
