"""tRPC over WebSocket (``wsLink``'s wire format, docs/api.md): one :class:`WsConnection` per socket.

Frames go out through the connection's :class:`~server.rpc.writer.ConnectionWriter`. Producers (fan-out, replies)
hand frames over synchronously and never wait on a slow client: when its buffer is full the client is
closed with :data:`close_codes.SLOW_CONSUMER` and resumes from its ``lastEventId`` (it loses nothing, the
others lose no time).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from contextlib import suppress
from typing import Any

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect

from .. import metrics
from ..domain import close_codes
from ..domain.events import EventEnvelope, dumps, tracked_tail, untracked_tail
from ..protocol.envelopes import (
    WS_METHODS,
    check_ws_request,
    connection_error,
    ws_error,
    ws_frame_prefix,
    ws_result,
)
from ..protocol.errors import RpcError, to_rpc_error
from ..services.auth import REVOKED, signed_out_error
from ..sync.writer import SubscriptionWriter
from .context import Context, Services
from .registry import Kind, Router, call, call_many, merge_last_event_id
from .tasks import CANCEL_ROUNDS, RECANCEL_SECONDS, wait_cancelled
from .uvicorn_ws import transport_writer
from .writer import ConnectionWriter, QueuedWriter

log = logging.getLogger(__name__)

REJECT_GRACE_SECONDS = 0.1
# Most calls of a batchable mutation (see ``_run_mutations``) that share one transaction.
MAX_MUTATION_BATCH = 64


class WsConnection:
    """One WebSocket connection speaking tRPC: reads and dispatches its messages (sign-in, calls, subscriptions,
    mutations in order), writes through its :class:`~server.rpc.writer.ConnectionWriter`, and closes slow
    consumers and revoked devices."""

    def __init__(
        self,
        websocket: WebSocket,
        router: Router,
        services: Services,
        registry: set[WsConnection],
        raw_send: Any = None,
    ) -> None:
        self.ws = websocket
        self.router = router
        self.services = services
        self.settings = services.settings
        self.registry = registry
        self.ctx = Context(
            user=None,
            services=services,
            transport="ws",
            base_url=_base_url(websocket),
            connection_id=uuid.uuid4().hex,
            on_close=[],
        )
        self._raw_send = raw_send
        self.writer: ConnectionWriter = QueuedWriter(websocket, self.settings.send_queue_frames, self._overflow)
        self.subscriptions: dict[Any, asyncio.Task[None]] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        # Mutations waiting their turn (prefix, path, raw input), run in order by one task at a time. Made on
        # the first mutation: most connections only subscribe, and an empty deque is 760 bytes.
        self._mutations: deque[tuple[str, str, Any]] | None = None
        self._mutation_runner: asyncio.Task[None] | None = None
        self._awaiting_params = False
        self._checking_token = False
        # Closes a socket that has not signed in in time: a timer, not a task, cancelled at sign-in (a task
        # sleeping out the deadline of every signed-in socket would be a task and a coroutine per connection,
        # for the collector to walk, in every reconnect storm).
        self._auth_timer: asyncio.TimerHandle | None = None
        self._close_code: int | None = None
        self._closing = False
        self._task: asyncio.Task[Any] | None = None
        self._cancels = 0  # cancellations of the read loop this connection made (``_request_close``)
        # Made by shutdown() only: idle connections are the many, and each object they hold is memory times many.
        self._finished: asyncio.Future[None] | None = None
        self._done = False
        self._rejected: RpcError | None = None

    # --- lifecycle ------------------------------------------------------------------------------------

    async def serve(self, header_principal: Any) -> None:
        """Read frames until the client leaves or the connection is closed from our side.

        The read loop runs in the ASGI task itself; with the transport writer there is no other
        per-connection task (memory per idle connection is what limits how many one process holds).
        """
        self._sign_in(header_principal)
        self._awaiting_params = self.ws.query_params.get("connectionParams") == "1"
        await self.ws.accept()
        direct = transport_writer(self._raw_send, self.settings.send_buffer_bytes, self._overflow)
        if direct is not None:
            self.writer = direct
            writer_task = None
        else:
            writer_task = asyncio.create_task(self.writer.run())
        self.registry.add(self)
        metrics.CONNECTIONS_OPENED.labels(transport="ws").inc()
        self._task = asyncio.current_task()
        if self.ctx.user is None:
            self._auth_timer = asyncio.get_running_loop().call_later(
                self.settings.auth_timeout_seconds, self._auth_deadline
            )
        try:
            await self._read()
        except asyncio.CancelledError:
            if not self._closing or self._task is None:
                raise
            # Our own close requests, not a cancellation from outside (one of them may have been swallowed).
            for _ in range(self._cancels):
                if self._task.cancelling():
                    self._task.uncancel()
        finally:
            self._task = None
            self._stop_auth_timer()
            self.registry.discard(self)
            if self.ctx.device_id is not None:
                self.services.devices.discard(self.ctx.device_id, self._revoked)
            everything = [*self.subscriptions.values(), *self.tasks] + ([writer_task] if writer_task else [])
            for task in everything:
                task.cancel()
            with suppress(asyncio.CancelledError):  # cancelled from outside meanwhile: the cleanup goes on
                await wait_cancelled(everything)
            for closed in self.ctx.on_close or ():
                with suppress(Exception):
                    await closed()
            if self._close_code is not None:
                await self.writer.close(self._close_code)
            metrics.CONNECTIONS_CLOSED.labels(
                "ws", "client" if self._close_code is None else str(self._close_code)
            ).inc()
            self._done = True
            if self._finished is not None and not self._finished.done():
                self._finished.set_result(None)

    def _request_close(self) -> None:
        """Stop the read loop (from any callback); ``serve`` then cleans up and sends the close frame."""
        if self._closing:
            return
        self._closing = True
        if self._task is not None:
            self._cancels += 1
            self._task.cancel()
            self._spawn(self._close_for_certain())

    async def _close_for_certain(self) -> None:
        """Cancel the read loop again while it runs on (``server.rpc.tasks``): a call it awaited, the identity
        check of connectionParams say, may have swallowed the close request, and the connection would stay
        open. Ends when the read loop does (which cancels this task), or after ``CANCEL_ROUNDS``."""
        for _ in range(CANCEL_ROUNDS):
            await asyncio.sleep(RECANCEL_SECONDS)
            if self._task is None:
                return
            self._cancels += 1
            self._task.cancel()

    def reject(self, err: RpcError, code: int) -> None:
        """End the connection because of its connectionParams (tRPC: createContext failed).

        The ``id:null`` error goes out first. Requests the client sent right behind its params (they are
        usually in flight already) each get the same error under their own id during a short grace
        period, so a caller sees UNAUTHORIZED rather than a bare disconnect; then the socket closes.
        """
        self._rejected = err
        self._close_code = code
        self.writer.send(connection_error(err))

        async def _finish() -> None:
            await asyncio.sleep(REJECT_GRACE_SECONDS)
            self._request_close()

        self._spawn(_finish())

    def _auth_deadline(self) -> None:
        """A socket that has not signed in after ``auth_timeout_seconds`` is closed: an unauthenticated socket
        can do nothing, and kept open forever a few hundred of them would use up the file descriptors."""
        self._auth_timer = None
        # Not while its token is being checked: it sent it in time, and the check may be waiting for the
        # database in a reconnect storm (``sync.admission``).
        if self.ctx.user is None and not self._checking_token:
            self._close_code = close_codes.AUTH_TIMEOUT
            self._request_close()

    def _stop_auth_timer(self) -> None:
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None

    def _sign_in(self, principal: Any) -> None:
        self.ctx.sign_in(principal)
        if self.ctx.user is not None:
            self._stop_auth_timer()
        if self.ctx.device_id is not None:
            self.services.devices.add(self.ctx.device_id, self._revoked)

    def _revoked(self) -> None:
        """Its token was revoked (``sync.revocation``): close with a code that says do not reconnect as is."""
        self._close_code = close_codes.TOKEN_REVOKED
        self._request_close()

    def _overflow(self) -> None:
        log.info("closing slow consumer (%d buffered)", self.writer.pending())
        metrics.SLOW_CONSUMER_CLOSES.inc()
        self._close_code = close_codes.SLOW_CONSUMER
        self._request_close()

    async def shutdown(self, timeout: float) -> None:
        """Tell the client to reconnect elsewhere, let queued frames drain, then close."""
        self.writer.send('{"id":null,"method":"reconnect"}')
        for task in list(self.subscriptions.values()):
            task.cancel()
        await self.writer.drain(timeout)
        self._close_code = close_codes.SERVER_RESTART
        self._request_close()
        if self._done:
            return
        if self._finished is None:
            self._finished = asyncio.get_running_loop().create_future()
        with suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._finished), 2)

    async def _read(self) -> None:
        try:
            while True:
                message = await self.ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if text is None:
                    data = message.get("bytes") or b""
                    try:
                        text = data.decode("utf-8")
                    except UnicodeDecodeError:
                        self.writer.send(connection_error(RpcError("PARSE_ERROR", "Frame is not valid UTF-8")))
                        continue
                await self._on_frame(text)
        except (WebSocketDisconnect, RuntimeError):
            return

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # --- inbound frames -------------------------------------------------------------------------------

    async def _on_frame(self, text: str) -> None:
        if text == "PING":
            self.writer.send("PONG")
            return
        if text == "PONG":
            return
        if _utf8_length_over(text, self.settings.max_frame_bytes):
            self.writer.send(
                connection_error(RpcError("PAYLOAD_TOO_LARGE", f"Frame exceeds {self.settings.max_frame_bytes} bytes"))
            )
            return
        try:
            msg = orjson.loads(text)
        except orjson.JSONDecodeError:
            self.writer.send(connection_error(RpcError("PARSE_ERROR", "Malformed JSON message")))
            return
        if self._awaiting_params:
            await self._on_connection_params(msg)
            return
        items = msg if isinstance(msg, list) else [msg]
        if self._rejected is not None:
            for item in items:
                if isinstance(item, dict) and item.get("id") is not None and item.get("method") in WS_METHODS:
                    self.writer.send(ws_error(ws_frame_prefix(item["id"], "jsonrpc" in item), self._rejected))
            return
        if not items:
            self.writer.send(connection_error(RpcError("PARSE_ERROR", "Empty batch")))
            return
        for item in items:
            problem = check_ws_request(item)
            if problem is not None:
                self.writer.send(connection_error(RpcError("PARSE_ERROR", problem)))
                return
        if len(items) > self.settings.max_batch_size:
            for item in items:
                self.writer.send(
                    ws_error(
                        ws_frame_prefix(item["id"], "jsonrpc" in item),
                        RpcError("BAD_REQUEST", "Batch call exceeds maximum size"),
                    )
                )
            return
        for item in items:
            self._dispatch(item)

    async def _on_connection_params(self, msg: Any) -> None:
        self._awaiting_params = False
        self._checking_token = True
        try:
            await self._check_connection_params(msg)
        finally:
            self._checking_token = False

    async def _check_connection_params(self, msg: Any) -> None:
        if not isinstance(msg, dict) or msg.get("method") != "connectionParams":
            self.reject(RpcError("PARSE_ERROR", "Malformed TRPCConnectionParamsMessage"), close_codes.PROTOCOL_ERROR)
            return
        data = msg.get("data")
        if data is not None and (not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values())):
            self.reject(RpcError("PARSE_ERROR", "Invalid connection params shape"), close_codes.PROTOCOL_ERROR)
            return
        token = (data or {}).get("token")
        if token is not None:
            try:
                principal = await self.services.auth.check_token(token)
            except Exception as exc:  # the database, not the token: the client should come back shortly
                self.reject(to_rpc_error(exc), close_codes.UNAVAILABLE)
                return
            if principal == REVOKED:  # e.g. a device that was offline when it was signed out, reconnecting
                self.reject(signed_out_error(), close_codes.TOKEN_REVOKED)
                return
            if principal is None:
                self.reject(RpcError("UNAUTHORIZED", "Invalid token"), close_codes.UNAUTHORIZED)
                return
            self._sign_in(principal)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        rid = msg["id"]
        prefix = ws_frame_prefix(rid, "jsonrpc" in msg)
        method = msg["method"]
        if method == "subscription.stop":
            task = self.subscriptions.get(rid)
            if task is not None:
                task.cancel()
                self._spawn(wait_cancelled((task,)))  # cancelled again if a call it awaited swallowed this
            return
        params = msg["params"]
        path = params["path"]
        if method == "subscription":
            if rid in self.subscriptions:
                self.writer.send(ws_error(prefix, RpcError("BAD_REQUEST", f"Duplicate id {rid}"), path))
                return
            if len(self.subscriptions) >= self.settings.max_subscriptions_per_connection:
                self.writer.send(
                    ws_error(
                        prefix,
                        RpcError(
                            "TOO_MANY_REQUESTS",
                            f"At most {self.settings.max_subscriptions_per_connection} subscriptions "
                            "per connection; stop one or open another connection",
                        ),
                        path,
                    )
                )
                return
            raw = merge_last_event_id(params.get("input"), params.get("lastEventId"))
            self.subscriptions[rid] = asyncio.create_task(self._subscribe(rid, prefix, path, raw))
            return
        if method == "mutation":
            if self._mutations is None:
                self._mutations = deque()
            self._mutations.append((prefix, path, params.get("input")))
            if self._mutation_runner is None:
                self._mutation_runner = self._spawn(self._run_mutations(self._mutations))
            return
        self._spawn(self._call(prefix, method, path, params.get("input")))

    async def _call(self, prefix: str, method: Kind, path: str, raw: Any) -> None:
        try:
            proc = self.router.lookup(path, method)
            result = await call(proc, self.ctx, raw)
            frame = ws_result(prefix, "data", result)  # serialising can fail too: answer that as an error
        except Exception as exc:
            self.writer.send(ws_error(prefix, to_rpc_error(exc), path))
            return
        self.writer.send(frame)

    async def _run_mutations(self, pending: deque[tuple[str, str, Any]]) -> None:
        """Mutations from one connection apply one after the other, in the order they were sent.

        Calls of a mutation with a batch handler that queued up behind each other while an earlier one ran
        go together (up to :data:`MAX_MUTATION_BATCH`): a client sending faster than the database commits
        gets one transaction per batch instead of one per call, so it cannot fall further and further
        behind. Each call still gets its own reply, in order. A lone call runs as itself.
        """
        try:
            while pending:
                prefix, path, raw = pending.popleft()
                proc = self.router.procedures.get(path)
                if (
                    proc is None
                    or proc.kind != "mutation"
                    or proc.batch is None
                    or not pending
                    or pending[0][1] != path
                ):
                    await self._call(prefix, "mutation", path, raw)
                    continue
                batch = [(prefix, raw)]
                while pending and pending[0][1] == path and len(batch) < MAX_MUTATION_BATCH:
                    nxt_prefix, _path, nxt_raw = pending.popleft()
                    batch.append((nxt_prefix, nxt_raw))
                results = await call_many(proc, self.ctx, [r for _p, r in batch])
                for (p, _r), result in zip(batch, results):
                    failure = result
                    if not isinstance(result, BaseException):
                        try:
                            self.writer.send(ws_result(p, "data", result))
                            continue
                        except Exception as exc:
                            failure = exc
                    self.writer.send(ws_error(p, to_rpc_error(failure), path))
        finally:
            self._mutation_runner = None

    async def _subscribe(self, rid: Any, prefix: str, path: str, raw: Any) -> None:
        conn = self.writer
        prefix_bytes = prefix.encode()
        started = False
        try:
            proc = self.router.lookup(path, "subscription")
            stream = await proc.handler(self.ctx, proc.parse_input(raw))
            conn.send(ws_result(prefix, "started"))
            started = True

            def send_item(event_id: str | None, item: EventEnvelope | dict[str, Any]) -> None:
                if type(item) is EventEnvelope:
                    if item.seq is not None:
                        conn.send_event(prefix_bytes, item)  # shared tail, built once per event
                    elif event_id is not None:
                        conn.send_event_as(prefix_bytes, item, event_id)
                    else:
                        conn.send(prefix + untracked_tail(item.json))
                elif event_id is not None:
                    conn.send(prefix + tracked_tail(event_id, dumps(item)))
                else:
                    conn.send(prefix + untracked_tail(dumps(item)))

            await stream.run(send_item, SubscriptionWriter(conn, prefix_bytes))
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            conn.send(ws_error(prefix, to_rpc_error(exc), path))
        finally:
            if self.subscriptions.get(rid) is asyncio.current_task():
                del self.subscriptions[rid]
            if started:
                conn.send(ws_result(prefix, "stopped"))


def _base_url(websocket: WebSocket) -> str | None:
    host = websocket.headers.get("host")
    if not host:
        return None
    scheme = "https" if websocket.url.scheme == "wss" else "http"
    return f"{scheme}://{host}"


def _utf8_length_over(text: str, limit: int) -> bool:
    """Whether ``text`` takes more than ``limit`` bytes in UTF-8 (limits count bytes, not characters);
    encodes only when the character count cannot decide."""
    if len(text) > limit:
        return True
    if len(text) * 4 <= limit:
        return False
    return len(text.encode("utf-8", "surrogatepass")) > limit
