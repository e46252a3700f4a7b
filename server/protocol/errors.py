"""tRPC error codes, the one error class, and the one formatter (docs/api.md "Errors").

Everything that answers a client with an error goes through :func:`to_rpc_error` and :func:`error_shape`.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

# key -> (JSON-RPC code, HTTP status)
ERROR_CODES: dict[str, tuple[int, int]] = {
    "PARSE_ERROR": (-32700, 400),
    "BAD_REQUEST": (-32600, 400),
    "INTERNAL_SERVER_ERROR": (-32603, 500),
    "NOT_IMPLEMENTED": (-32603, 501),
    "BAD_GATEWAY": (-32603, 502),
    "SERVICE_UNAVAILABLE": (-32603, 503),
    "GATEWAY_TIMEOUT": (-32603, 504),
    "UNAUTHORIZED": (-32001, 401),
    "PAYMENT_REQUIRED": (-32002, 402),
    "FORBIDDEN": (-32003, 403),
    "NOT_FOUND": (-32004, 404),
    "METHOD_NOT_SUPPORTED": (-32005, 405),
    "TIMEOUT": (-32008, 408),
    "CONFLICT": (-32009, 409),
    "PRECONDITION_FAILED": (-32012, 412),
    "PAYLOAD_TOO_LARGE": (-32013, 413),
    "UNSUPPORTED_MEDIA_TYPE": (-32015, 415),
    "UNPROCESSABLE_CONTENT": (-32022, 422),
    "PRECONDITION_REQUIRED": (-32028, 428),
    "TOO_MANY_REQUESTS": (-32029, 429),
    "CLIENT_CLOSED_REQUEST": (-32099, 499),
}


class RpcError(Exception):
    """An error a client is meant to see, with a tRPC code key such as ``NOT_FOUND``."""

    def __init__(
        self, code: str, message: str | None = None, *, retry_after_ms: int | None = None, reason: str | None = None
    ) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown tRPC error code {code!r}")
        super().__init__(message or code)
        self.code = code
        self.message = message or code
        # TOO_MANY_REQUESTS: when the call would be accepted again (``data.retryAfterMs`` on the wire).
        self.retry_after_ms = retry_after_ms
        # Why, where a client acts on more than the code (``data.reason``): ``TOKEN_REVOKED`` on an UNAUTHORIZED
        # whose token was a device's and was revoked, as the WebSocket close code 4503 says.
        self.reason = reason

    @property
    def http_status(self) -> int:
        return ERROR_CODES[self.code][1]


def to_rpc_error(exc: BaseException) -> RpcError:
    """Map any exception to an :class:`RpcError`; unknown ones become ``INTERNAL_SERVER_ERROR`` and are logged."""
    if isinstance(exc, RpcError):
        return exc
    unavailable = _infrastructure_failure(exc)
    if unavailable is not None:
        log.warning("infrastructure failure answered as SERVICE_UNAVAILABLE: %r", exc)
        return RpcError("SERVICE_UNAVAILABLE", unavailable)
    log.exception("unhandled error in procedure", exc_info=exc)
    return RpcError("INTERNAL_SERVER_ERROR", "Internal server error")


def _infrastructure_failure(exc: BaseException) -> str | None:
    """A message when ``exc`` is the database or Redis being unreachable or overloaded (retryable: the
    request may succeed in a moment), else None. Imports lazily: drivers stay optional here."""
    name = type(exc).__module__.split(".")[0]
    if name == "sqlalchemy":
        from sqlalchemy import exc as sa

        if isinstance(exc, (sa.OperationalError, sa.InterfaceError, sa.TimeoutError)) or (
            isinstance(exc, sa.DBAPIError) and exc.connection_invalidated
        ):
            return "The database is unavailable or busy; retry shortly"
    if name == "redis":
        from redis import exceptions as rx

        if isinstance(
            exc, (rx.ConnectionError, rx.TimeoutError, rx.ClusterDownError, rx.TryAgainError, rx.RedisClusterException)
        ):
            return "The message bus is unavailable; retry shortly"
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return "A service this server needs is unavailable; retry shortly"
    return None


def error_shape(err: RpcError, path: str | None = None) -> dict[str, Any]:
    """The default tRPC error shape: ``{message, code, data: {code, httpStatus, path?}}``."""
    number, status = ERROR_CODES[err.code]
    data: dict[str, Any] = {"code": err.code, "httpStatus": status}
    if path is not None:
        data["path"] = path
    if err.retry_after_ms is not None:
        data["retryAfterMs"] = err.retry_after_ms
    if err.reason is not None:
        data["reason"] = err.reason
    return {"message": err.message, "code": number, "data": data}
