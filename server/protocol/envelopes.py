"""Building and checking tRPC v11 messages: WebSocket requests and results, HTTP batch replies."""

from __future__ import annotations

from typing import Any

from ..domain.events import dumps
from .errors import RpcError, error_shape

WS_METHODS = ("query", "mutation", "subscription")


def ws_frame_prefix(request_id: Any, jsonrpc: bool) -> str:
    """``{"id":<id>`` (plus ``"jsonrpc":"2.0"`` when the request carried it); frames continue after this."""
    return '{"id":' + dumps(request_id) + (',"jsonrpc":"2.0"' if jsonrpc else "")


def ws_result(
    prefix: str,
    result_type: str,
    data: Any = ...,
) -> str:
    if data is ...:
        return prefix + ',"result":{"type":"' + result_type + '"}}'
    return prefix + ',"result":{"type":"' + result_type + '","data":' + dumps(data) + "}}"


def ws_error(prefix: str, err: RpcError, path: str | None = None) -> str:
    return prefix + ',"error":' + dumps(error_shape(err, path)) + "}"


def connection_error(err: RpcError) -> str:
    return '{"id":null,"error":' + dumps(error_shape(err)) + "}"


def check_ws_request(msg: Any) -> str | None:
    """Return why ``msg`` is not a valid tRPC request, or None (mirrors tRPC's ``parseTRPCMessage``)."""
    if not isinstance(msg, dict):
        return "message must be an object"
    if "jsonrpc" in msg and msg["jsonrpc"] != "2.0":
        return 'jsonrpc must be "2.0"'
    rid = msg.get("id")
    if rid is None:
        return "`id` is required"
    if isinstance(rid, bool) or not isinstance(rid, (int, str)):
        return "`id` must be a number or a string"
    method = msg.get("method")
    if method == "subscription.stop":
        return None
    if method not in WS_METHODS:
        return f"invalid method {method!r}"
    params = msg.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("path"), str):
        return "params.path must be a string"
    if "lastEventId" in params and params["lastEventId"] is not None and not isinstance(params["lastEventId"], str):
        return "params.lastEventId must be a string"
    return None
