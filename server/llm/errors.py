"""Provider errors: one exception type, one classification table.

Each adapter translates its SDK's exceptions into ``ProviderError`` at the boundary (``raise ... from exc``); the
retry wrapper and the orchestrator only ever look at ``code`` and ``retryable``.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Stable error codes carried by ``ErrorEvent.code``."""

    RATE_LIMITED = "rate_limited"
    QUOTA_EXCEEDED = "quota_exceeded"
    OVERLOADED = "overloaded"
    SERVER_ERROR = "server_error"
    CONNECTION_ERROR = "connection_error"
    TIMEOUT = "timeout"
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
    INVALID_REQUEST = "invalid_request"
    AUTHENTICATION = "authentication"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    REQUEST_TOO_LARGE = "request_too_large"
    STREAM_ERROR = "stream_error"
    MISSING_FINISH_REASON = "missing_finish_reason"
    NOT_CONFIGURED = "not_configured"
    UNKNOWN = "unknown"


class ProviderError(Exception):
    """A failed provider call, already classified. ``retry_after`` is the server's hint in seconds, if any."""

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = str(code)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status

    def __repr__(self) -> str:
        return f"ProviderError({self.code!r}, {self.message!r}, retryable={self.retryable})"


# Quota/billing exhaustion arrives as 429 but retrying cannot help.
_QUOTA_MARKERS = (
    "insufficient_quota",
    "credit_balance_exhausted",
    "spend_limit_exceeded",
    "organization_usage_limit_exceeded",
    "enforced_spend_limit_reached",
    "exceeded your current quota",
)
# Context-length detection is string based in practice (litellm); `string_above_max_length` is an id/field
# length error, not a context overflow, so it is excluded explicitly.
_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "exceeds the available context size",
    "exceed_context_size_error",
    "exceeds the maximum number of tokens allowed",
    "input length exceeds the context length",
    "prompt is longer than the context length",
)
_OVERLOADED_MARKERS = ("overloaded", "server busy", "unavailable")


def body_text(body: Any) -> str:
    """A lower-cased text rendering of an error body (dict, list or str) for marker matching."""
    if body is None:
        return ""
    if isinstance(body, (dict, list)):
        return json.dumps(body, sort_keys=True).lower()
    return str(body).lower()


def classify_status(
    status: int | None, message: str, body: Any = None, *, retry_after: float | None = None
) -> ProviderError:
    """Map an HTTP status (or ``None`` for errors reported inside a 200 stream) plus body to a ``ProviderError``."""
    text = body_text(body) + " " + message.lower()
    if status == 429 or "rate_limit" in text or "resource_exhausted" in text:
        if any(m in text for m in _QUOTA_MARKERS):
            return ProviderError(ErrorCode.QUOTA_EXCEEDED, message, status=status)
        return ProviderError(ErrorCode.RATE_LIMITED, message, retryable=True, retry_after=retry_after, status=status)
    if status == 529 or "overloaded_error" in text:
        return ProviderError(ErrorCode.OVERLOADED, message, retryable=True, retry_after=retry_after, status=status)
    if status is not None and status >= 500:
        code = ErrorCode.OVERLOADED if any(m in text for m in _OVERLOADED_MARKERS) else ErrorCode.SERVER_ERROR
        return ProviderError(code, message, retryable=True, retry_after=retry_after, status=status)
    if status in (408, 409):
        return ProviderError(
            ErrorCode.TIMEOUT if status == 408 else ErrorCode.SERVER_ERROR,
            message,
            retryable=True,
            retry_after=retry_after,
            status=status,
        )
    if any(m in text for m in _CONTEXT_MARKERS) and "string_above_max_length" not in text:
        return ProviderError(ErrorCode.CONTEXT_LENGTH_EXCEEDED, message, status=status)
    fixed = {
        401: ErrorCode.AUTHENTICATION,
        403: ErrorCode.PERMISSION_DENIED,
        404: ErrorCode.NOT_FOUND,
        413: ErrorCode.REQUEST_TOO_LARGE,
    }
    if status in fixed:
        return ProviderError(fixed[status], message, status=status)
    if status is not None and 400 <= status < 500:
        return ProviderError(ErrorCode.INVALID_REQUEST, message, status=status)
    # An error object inside a 200 stream with no recognisable type: the server failed mid-response
    # ("api_error", "server_error"), which is transient by every SDK's judgement.
    if "api_error" in text or "server_error" in text or "internal" in text:
        return ProviderError(ErrorCode.SERVER_ERROR, message, retryable=True, status=status)
    if any(m in text for m in _OVERLOADED_MARKERS):
        return ProviderError(ErrorCode.OVERLOADED, message, retryable=True, status=status)
    return ProviderError(ErrorCode.STREAM_ERROR if status in (None, 200) else ErrorCode.UNKNOWN, message, status=status)


def parse_retry_after(headers: Mapping[str, str] | None, body: Any = None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``retry-after`` (seconds or HTTP date) or Gemini ``RetryInfo``."""
    if headers:
        lowered = {k.lower(): v for k, v in headers.items()}
        ms = lowered.get("retry-after-ms")
        if ms is not None:
            try:
                return max(0.0, float(ms) / 1000.0)
            except ValueError:
                pass
        value = lowered.get("retry-after")
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                try:
                    parsed = email.utils.parsedate_to_datetime(value)
                except (TypeError, ValueError):
                    parsed = None
                if parsed is not None:
                    return max(0.0, parsed.timestamp() - (time.time() if now is None else now))
    # Gemini puts the hint in the body: error.details[{"@type": ".../google.rpc.RetryInfo", "retryDelay": "34.4s"}].
    match = re.search(r'"retrydelay": "([0-9.]+)s"', body_text(body))
    if match:
        return float(match.group(1))
    return None


def connection_error(message: str, *, timeout: bool = False) -> ProviderError:
    """A transport failure before any response: always retryable."""
    return ProviderError(ErrorCode.TIMEOUT if timeout else ErrorCode.CONNECTION_ERROR, message, retryable=True)


def timed_out(exc: BaseException) -> bool:
    """Whether the failure under an SDK's ``APITimeoutError`` was a timeout. The SDKs' aiohttp transport maps every
    failure to connect (a refused connection too) to a connect *timeout*; the cause tells them apart: a timeout
    is a ``TimeoutError`` (aiohttp's are), a refused or reset connection an ``OSError`` or an aiohttp connection
    error that is not (``ServerDisconnectedError``: the connection closed before the answer)."""
    import aiohttp

    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, TimeoutError):
            return True
        if isinstance(cause, (OSError, aiohttp.ClientConnectionError)):
            return False
        cause = cause.__cause__
    return True


def classify_stream_failure(exc: Exception) -> ProviderError:
    """The httpx2 errors an SDK lets through mid-stream (OpenAI, Anthropic), else ``UNKNOWN``."""
    import httpx2

    if isinstance(exc, httpx2.TimeoutException):
        return connection_error(f"stream timed out: {exc}", timeout=True)
    if isinstance(exc, httpx2.TransportError):
        return connection_error(f"stream interrupted: {exc}")
    return ProviderError(ErrorCode.UNKNOWN, f"{type(exc).__name__}: {exc}")


def classify_http(
    status: int | None, message: str, body: Any = None, headers: Mapping[str, str] | None = None
) -> ProviderError:
    """``classify_status`` plus the response headers: ``Retry-After`` and the server's ``x-should-retry`` verdict."""
    error = classify_status(status, message, body, retry_after=parse_retry_after(headers, body))
    verdict = {k.lower(): v for k, v in (headers or {}).items()}.get("x-should-retry")
    # The OpenAI and Anthropic APIs tell clients explicitly when a retry is (not) useful.
    if verdict == "true":
        error.retryable = True
    elif verdict == "false":
        error.retryable = False
    return error
