"""tRPC over HTTP (tRPC v11's wire format, docs/api.md): queries by GET, mutations by POST, batches, JSONL, SSE
subscriptions."""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import unquote

import orjson
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response, StreamingResponse

from ..domain.events import dumps
from ..protocol.errors import RpcError, error_shape, to_rpc_error
from ..services.auth import REVOKED, signed_out_error
from .context import Context, Services
from .registry import Procedure, Router, call, merge_last_event_id
from .sse import Inbox, SseResponse

log = logging.getLogger(__name__)

_ABSENT = object()
JSON_HEADERS = {"vary": "trpc-accept, accept"}
SSE_HEADERS = {
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",
    "vary": "trpc-accept, accept",
}
FULL_RETRY_AFTER_SECONDS = 2
"""Retry-After of the 503 that refuses a stream past ``CHATSYNC_MAX_CONNECTIONS``."""


def _json(body: Any, status: int, extra: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers={**JSON_HEADERS, **(extra or {})}
    )


def request_error(err: RpcError) -> Response:
    """tRPC's answer to an HTTP request that fails as a whole (before any procedure is called)."""
    return _json({"error": error_shape(err)}, err.http_status)


def plain_error_body(err: RpcError) -> bytes:
    """``{"error": {"code", "message", "retryAfterMs"?}}``: see :func:`plain_error_response`."""
    body: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.retry_after_ms is not None:
        body["retryAfterMs"] = err.retry_after_ms
    return orjson.dumps({"error": body})


def plain_error_response(err: RpcError, headers: dict[str, str] | None = None) -> Response:
    """The error answer of chatsync's plain HTTP endpoints (the admin API, files, device links):
    ``{"error": {"code", "message", "retryAfterMs"?}}`` with the code's HTTP status. ``/trpc`` answers with
    tRPC's own shape (:func:`error_shape`) instead."""
    return Response(plain_error_body(err), status_code=err.http_status, media_type="application/json", headers=headers)


def bearer_token(request: HTTPConnection) -> str | None:
    header = request.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    return None


class HttpTransport:
    """The tRPC HTTP endpoint: queries (GET), mutations (POST), batches, and subscriptions as SSE streams."""

    def __init__(self, router: Router, services: Services) -> None:
        self.router = router
        self.services = services
        self.settings = services.settings
        self.sse_streams: set[Inbox] = set()

    async def __call__(self, request: Request) -> Response | SseResponse:
        if request.method == "HEAD":
            return Response(status_code=204)
        raw_path = request.path_params["path"]
        is_batch = request.query_params.get("batch") == "1"
        paths = [unquote(p) for p in raw_path.split(",")] if is_batch else [unquote(raw_path)]
        try:
            principal = await self._authenticate(request)
        except RpcError as err:
            proc = self.router.procedures.get(paths[0])
            if not is_batch and proc is not None and proc.kind == "subscription" and request.method == "GET":
                # EventSource cannot read a 4xx body: tRPC sends 200 + connected + serialized-error.
                return StreamingResponse(
                    self._sse_error(err, proc.path), media_type="text/event-stream", headers=SSE_HEADERS
                )
            return request_error(err)
        ctx = Context(user=None, services=self.services, transport="http", base_url=str(request.base_url).rstrip("/"))
        ctx.sign_in(principal)

        try:
            inputs = await self._read_inputs(request, is_batch, len(paths))
        except RpcError as err:
            return request_error(err)
        if is_batch and len(paths) > self.settings.max_batch_size:
            return request_error(RpcError("BAD_REQUEST", "Batch call exceeds maximum size"))

        procs: list[Procedure | RpcError] = []
        for path in paths:
            try:
                procs.append(self.router.lookup(path))
            except RpcError as err:
                procs.append(err)
        kinds = {p.kind for p in procs if isinstance(p, Procedure)}
        if len(kinds) > 1:
            return request_error(RpcError("BAD_REQUEST", "Cannot mix procedure types in call"))

        if not is_batch and isinstance(procs[0], Procedure) and procs[0].kind == "subscription":
            return await self._subscription(request, ctx, procs[0], inputs[0])
        if not is_batch and isinstance(procs[0], RpcError):
            return _json({"error": error_shape(procs[0], paths[0])}, procs[0].http_status)

        results = await asyncio.gather(
            *[self._one(request, ctx, proc, path, raw) for proc, path, raw in zip(procs, paths, inputs)]
        )
        if is_batch and self._wants_jsonl(request):
            head = {str(i): [[body]] for i, (body, _status) in enumerate(results)}
            return Response(orjson.dumps(head) + b"\n", media_type="application/json", headers=JSON_HEADERS)
        statuses = {status for _body, status in results}
        status = statuses.pop() if len(statuses) == 1 else 207
        body = [b for b, _s in results] if is_batch else results[0][0]
        allow = self._allow_header(procs, results)
        return _json(body, status, allow)

    # --- helpers --------------------------------------------------------------------------------------

    async def _authenticate(self, request: Request) -> Any:
        token = bearer_token(request)
        params = request.query_params.get("connectionParams")
        if token is None and params is not None:
            try:
                parsed = orjson.loads(params)
            except orjson.JSONDecodeError:
                raise RpcError("PARSE_ERROR", "Invalid connection params shape") from None
            if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
                raise RpcError("PARSE_ERROR", "Invalid connection params shape")
            token = parsed.get("token")
        if token is None:
            return None
        try:
            principal = await self.services.auth.check_token(token)
        except Exception as exc:  # the database failing is not the caller's fault: a typed, retryable error
            raise to_rpc_error(exc) from None
        if principal == REVOKED:
            raise signed_out_error()
        if principal is None:
            raise RpcError("UNAUTHORIZED", "Invalid token")
        return principal

    async def _read_inputs(self, request: Request, is_batch: bool, count: int) -> list[Any]:
        if request.method == "GET":
            raw = request.query_params.get("input")
        else:
            declared = request.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > self.settings.max_frame_bytes:
                raise RpcError("PAYLOAD_TOO_LARGE", f"Body exceeds {self.settings.max_frame_bytes} bytes")
            body = b""
            async for chunk in request.stream():
                body += chunk
                if len(body) > self.settings.max_frame_bytes:
                    raise RpcError("PAYLOAD_TOO_LARGE", f"Body exceeds {self.settings.max_frame_bytes} bytes")
            try:
                raw = body.decode("utf-8") if body else None
            except UnicodeDecodeError:
                raise RpcError("BAD_REQUEST", "Body is not valid UTF-8") from None
        if raw is None or raw == "":
            return [None] * count
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RpcError("BAD_REQUEST", f"Invalid JSON input: {exc}") from None
        if not is_batch:
            return [value]
        if not isinstance(value, dict):
            raise RpcError("BAD_REQUEST", '"input" needs to be an object when doing a batch call')
        return [value.get(str(i)) for i in range(count)]

    def _method_allowed(self, request: Request, proc: Procedure) -> bool:
        if proc.kind == "mutation":
            return request.method == "POST"
        if request.method == "GET":
            return True
        return request.method == "POST" and self.settings.allow_method_override

    async def _one(
        self, request: Request, ctx: Context, proc: Procedure | RpcError, path: str, raw: Any
    ) -> tuple[dict[str, Any], int]:
        try:
            if isinstance(proc, RpcError):
                raise proc
            if proc.kind == "subscription":
                raise RpcError("METHOD_NOT_SUPPORTED", "Subscriptions cannot be batched; use server-sent events")
            if not self._method_allowed(request, proc):
                raise RpcError(
                    "METHOD_NOT_SUPPORTED",
                    f'Unsupported {request.method}-request to {proc.kind} procedure at path "{path}"',
                )
            # Serialised here, once (the response embeds the fragment as it is): a reply that cannot be
            # serialised becomes an error reply rather than a broken response.
            result = orjson.Fragment(orjson.dumps(await call(proc, ctx, raw)))
        except Exception as exc:
            err = to_rpc_error(exc)
            return {"error": error_shape(err, path)}, err.http_status
        return {"result": {"data": result}}, 200

    @staticmethod
    def _allow_header(procs: list[Procedure | RpcError], results: list[tuple[Any, int]]) -> dict[str, str] | None:
        if len(procs) == 1 and isinstance(procs[0], Procedure) and results[0][1] == 405:
            return {"allow": "POST" if procs[0].kind == "mutation" else "GET"}
        return None

    @staticmethod
    def _wants_jsonl(request: Request) -> bool:
        return "application/jsonl" in (request.headers.get("trpc-accept", ""), request.headers.get("accept", ""))

    # --- server-sent events ---------------------------------------------------------------------------

    async def _subscription(self, request: Request, ctx: Context, proc: Procedure, raw: Any) -> Response | SseResponse:
        if request.method != "GET":
            err = RpcError("METHOD_NOT_SUPPORTED", f'Unsupported {request.method}-request to subscription procedure')
            return _json({"error": error_shape(err, proc.path)}, 405, {"allow": "GET"})
        last_id = (
            request.headers.get("last-event-id")
            or request.query_params.get("lastEventId")
            or request.query_params.get("Last-Event-Id")
        )
        raw = merge_last_event_id(raw, last_id)
        if self.services.slots.used >= self.services.slots.limit:
            err = RpcError("SERVICE_UNAVAILABLE", "Too many connections on this server; retry shortly")
            return _json({"error": error_shape(err, proc.path)}, 503, {"retry-after": str(FULL_RETRY_AFTER_SECONDS)})
        return SseResponse(self.services, self.sse_streams, ctx, proc, raw)

    @staticmethod
    async def _sse_error(err: RpcError, path: str) -> Any:
        yield "event: connected\ndata: {}\n\n\n"
        yield "event: serialized-error\ndata: " + dumps(error_shape(err, path)) + "\n\n\n"

    def shutdown(self) -> None:
        """End every SSE stream with a retryable error so clients reconnect with their Last-Event-ID."""
        # SERVICE_UNAVAILABLE is -32603, which httpSubscriptionLink treats as retryable.
        err = RpcError("SERVICE_UNAVAILABLE", "Server is restarting; reconnect")
        for items in list(self.sse_streams):
            items.put_nowait(err)
