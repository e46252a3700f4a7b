"""Admin inspection over HTTP: JSON under ``/admin/api`` (an admin's bearer token), a page at ``/admin``
and Prometheus metrics at ``/metrics``.

Everything here reads; nothing changes state. Database-backed answers (sessions, events, counts, leases)
cover every replica; what lives in a process — its connections, subscribers and running loops — is this
replica's, and every such answer names the replica (``replica``: its lease-owner id) so that, behind a load
balancer, an admin can tell which one answered.

Errors are JSON ``{"error": {"code", "message"}}`` with tRPC's codes and HTTP statuses: no or an unknown
token ``UNAUTHORIZED`` (401), a token of a user who is not an admin ``FORBIDDEN`` (403), a bad parameter
``BAD_REQUEST`` (400), an unknown or deleted session ``NOT_FOUND`` (404).
"""

from __future__ import annotations

import hmac
import importlib.metadata
import secrets
import time
from typing import Any, get_args

import orjson
from prometheus_client.core import Metric
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from ... import metrics
from ...api.inputs import MAX_MESSAGES_PER_PAGE
from ...domain.models import SessionStatus
from ...protocol.errors import RpcError, to_rpc_error
from ...rpc.context import Services
from ...rpc.http import bearer_token, plain_error_response
from ...store.models import User
from ..state import AppState
from .page import PAGE

try:
    VERSION = importlib.metadata.version("chatsync")
except importlib.metadata.PackageNotFoundError:  # running from a checkout that was never installed
    VERSION = "unknown"
_STATUSES = frozenset(get_args(SessionStatus))


class _Json(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise RpcError("BAD_REQUEST", f"{name} must be an integer") from None
    if not low <= value <= high:
        raise RpcError("BAD_REQUEST", f"{name} must be between {low} and {high}")
    return value


class AdminApi:
    """The handlers, over the running app's ``state`` (its services and tRPC HTTP transport)."""

    def __init__(self, state: AppState) -> None:
        self.state = state

    @property
    def services(self) -> Services:
        return self.state.require_services()

    def routes(self) -> list[Route]:
        return [
            Route("/admin", self.page),
            Route("/admin/api/sessions", self._guard(self.list_sessions)),
            Route("/admin/api/sessions/{session_id}", self._guard(self.session_detail)),
            Route("/admin/api/sessions/{session_id}/events", self._guard(self.session_events)),
            Route("/admin/api/stats", self._guard(self.stats)),
            Route("/admin/api/openapi.json", self.openapi),
            Route("/metrics", self.metrics),
        ]

    def _guard(self, handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            if self.state.services is None:
                return plain_error_response(RpcError("SERVICE_UNAVAILABLE", "Starting"))
            try:
                user = await self.services.auth.authenticate(bearer_token(request))
                if user is None:
                    return plain_error_response(RpcError("UNAUTHORIZED", "Missing or invalid token"))
                if user.role != "admin":
                    return plain_error_response(RpcError("FORBIDDEN", "Admins only"))
                return _Json(await handler(request, user))
            except Exception as exc:  # a database failure too: a typed error, never a plain-text 500
                return plain_error_response(to_rpc_error(exc))

        return endpoint

    # --- JSON ---------------------------------------------------------------------------------------------

    async def list_sessions(self, request: Request, _admin: User) -> dict[str, Any]:
        """``?owner=<user id or name>&status=<idle|running|requires-action|error>&limit=1..200&cursor=``"""
        q = request.query_params
        status = q.get("status") or None
        if status is not None and status not in _STATUSES:
            raise RpcError("BAD_REQUEST", f"status must be one of {', '.join(sorted(_STATUSES))}")
        limit = _int_param(request, "limit", 50, 1, 200)
        return await self.services.admin.sessions(
            owner=q.get("owner") or None, status=status, limit=limit, cursor=q.get("cursor") or None
        )

    async def session_detail(self, request: Request, admin: User) -> dict[str, Any]:
        """The snapshot a client gets from ``session.get``, plus its owner, lease, event log bounds and the
        clients subscribed to it on this replica."""
        sid = request.path_params["session_id"]
        limit = _int_param(request, "messageLimit", 200, 1, MAX_MESSAGES_PER_PAGE)
        snapshot = await self.services.sessions.snapshot(admin, sid, limit)  # NOT_FOUND when missing or deleted
        stored = await self.services.admin.session(sid)
        oldest = await self.services.event_logs.oldest_seq(sid)
        hub = self.services.hub
        clients = [{**(d.client or {}), "position": str(d.next_seq - 1)} for d in hub.deliveries(sid)]
        return {
            "snapshot": snapshot.wire(),
            "owner": stored["owner"],
            "lease": stored["lease"],
            "eventLog": {"oldestRetainedSeq": oldest, "lastSeq": stored["lastSeq"]},
            "connectedClients": {"replica": self.services.orchestrator.owner, "clients": clients},
        }

    async def session_events(self, request: Request, admin: User) -> dict[str, Any]:
        """``?after=<seq>&limit=1..1000``: the retained event log, oldest first, as clients received it."""
        sid = request.path_params["session_id"]
        await self.services.sessions.readable(admin, sid)
        after = _int_param(request, "after", 0, 0, 2**63 - 1)
        limit = _int_param(request, "limit", 100, 1, 1000)
        items, oldest = await self.services.event_logs.page(sid, after, limit)
        return {
            "items": items,
            "oldestRetainedSeq": oldest,
            "nextAfter": items[-1]["seq"] if len(items) == limit else None,
        }

    async def stats(self, _request: Request, _admin: User) -> dict[str, Any]:
        services = self.services
        return {
            "database": await services.admin.totals(),
            "replica": {
                "id": services.orchestrator.owner,
                "version": VERSION,
                "uptimeSeconds": round(time.time() - metrics.PROCESS_START, 1),
                "webSocketConnections": len(services.connections),
                "sseStreams": len(self.state.require_http().sse_streams),
                "subscriptions": services.hub.subscriber_count(),
                "subscribedSessions": len(services.hub.subscribed_sessions()),
                "runningSessions": services.orchestrator.running_sessions(),
                "bus": services.settings.bus_url.split("://", 1)[0],
            },
        }

    async def openapi(self, _request: Request) -> Response:
        return _Json(OPENAPI)

    # --- page and metrics ---------------------------------------------------------------------------------

    async def page(self, _request: Request) -> Response:
        """The page holds no data: it asks for a token and calls the JSON API with it. A nonce keeps the
        Content-Security-Policy strict (no other script or style runs, nothing is loaded from elsewhere)."""
        nonce = secrets.token_urlsafe(16)
        return HTMLResponse(
            PAGE.replace("{nonce}", nonce),
            headers={
                "Content-Security-Policy": (
                    f"default-src 'none'; script-src 'nonce-{nonce}'; "
                    f"style-src 'nonce-{nonce}'; connect-src 'self'; base-uri 'none'; "
                    "frame-ancestors 'none'"
                ),
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-store",
            },
        )

    async def metrics(self, request: Request) -> Response:
        """Prometheus text format. Open unless ``CHATSYNC_METRICS_TOKEN`` is set; then that bearer token."""
        services = self.state.services
        if services is None:
            return PlainTextResponse("starting\n", status_code=503)
        required = services.settings.metrics_token
        if required:
            given = bearer_token(request) or ""
            if not hmac.compare_digest(given.encode(), required.encode()):
                return PlainTextResponse("unauthorized\n", status_code=401, headers={"WWW-Authenticate": "Bearer"})
        elif not services.settings.listens_on_loopback:
            # Reachable from other machines: counts of users and sessions are not for anyone who asks.
            user = await services.auth.authenticate(bearer_token(request))
            if user is None or user.role != "admin":
                return PlainTextResponse(
                    "unauthorized: set CHATSYNC_METRICS_TOKEN for scrapers, or use an admin token\n",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
        return Response(metrics.exposition(self._gauges(services)), media_type=metrics.CONTENT_TYPE)

    def _gauges(self, services: Any) -> list[Metric]:
        """The series read now: what this process holds open."""
        gauge = metrics.gauge
        return [
            gauge("chatsync_build_info", "Version of this chatsync process.", 1, {"version": VERSION}),
            gauge("chatsync_websocket_connections", "Open WebSocket connections.", len(services.connections)),
            gauge(
                "chatsync_sse_streams",
                "Open server-sent-event subscription streams.",
                len(self.state.require_http().sse_streams),
            ),
            gauge("chatsync_subscriptions", "Live session.events subscriptions.", services.hub.subscriber_count()),
            gauge(
                "chatsync_subscribed_sessions",
                "Sessions with at least one subscriber here.",
                len(services.hub.subscribed_sessions()),
            ),
            gauge(
                "chatsync_running_sessions",
                "Sessions whose run is executing in this process.",
                len(services.orchestrator.running_sessions()),
            ),
        ]


def _op(summary: str, params: list[dict[str, Any]] | None = None, path_id: bool = False) -> dict[str, Any]:
    parameters = list(params or [])
    if path_id:
        parameters.insert(0, {"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}})
    return {
        "get": {
            "summary": summary,
            "parameters": parameters,
            "security": [{"bearer": []}],
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {}}},
                "400": {"$ref": "#/components/responses/Error"},
                "401": {"$ref": "#/components/responses/Error"},
                "403": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
            },
        }
    }


def _q(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "chatsync admin API",
        "version": VERSION,
        "description": "Read-only inspection of every session. Bearer token of an admin user.",
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "responses": {
            "Error": {
                "description": "Error",
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "error": {
                                    "type": "object",
                                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                                }
                            },
                        }
                    }
                },
            }
        },
    },
    "paths": {
        "/admin/api/sessions": _op(
            "Every user's sessions, newest first",
            [
                _q("owner", {"type": "string"}, "user id or name"),
                _q("status", {"type": "string", "enum": sorted(_STATUSES)}, "session status"),
                _q("limit", {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}, "page size"),
                _q("cursor", {"type": "string"}, "nextCursor of the previous page"),
            ],
        ),
        "/admin/api/sessions/{session_id}": _op(
            "Snapshot, owner, lease, event log bounds and the clients subscribed on the answering replica",
            [
                _q(
                    "messageLimit",
                    {"type": "integer", "minimum": 1, "maximum": MAX_MESSAGES_PER_PAGE, "default": 200},
                    "the newest messages to include (older ones: message.list)",
                ),
            ],
            path_id=True,
        ),
        "/admin/api/sessions/{session_id}/events": _op(
            "The retained event log, oldest first",
            [
                _q("after", {"type": "integer", "minimum": 0, "default": 0}, "events with a greater seq"),
                _q("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}, "page size"),
            ],
            path_id=True,
        ),
        "/admin/api/stats": _op("Database totals and the answering replica's live state"),
    },
}
