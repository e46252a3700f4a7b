"""What no input may carry, whichever way it arrives: a tRPC input (:func:`check_json`, run by the procedure
registry before any model sees it), an HTTP path or query string (:func:`url_problem`, run by the app's
outermost layer before any route), or text decoded out of an opaque value such as a page cursor
(:func:`check_text`).

Each refusal is ``BAD_REQUEST``; what they refuse would otherwise fail later, and worse: a NUL character fits
no PostgreSQL text column (the query fails), nesting too deep is stored and then cannot be serialised back,
and an integer past 64 bits fits no integer column."""

from __future__ import annotations

from typing import Any

from .errors import RpcError

MAX_JSON_DEPTH = 32
MAX_INT = 2**63 - 1  # every integer column is at most a BIGINT
NUL_MESSAGE = "Invalid input: strings may not contain NUL (\\u0000)"


def check_text(value: str) -> None:
    """Refuse text no column can hold (a NUL character)."""
    if "\x00" in value:
        raise RpcError("BAD_REQUEST", NUL_MESSAGE)


def check_json(value: Any) -> None:
    """Refuse, for every procedure at once, what no field may hold: nesting deeper than
    :data:`MAX_JSON_DEPTH`, integers outside 64 bits, and NUL characters in any string (keys included)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            check_text(item)
        elif isinstance(item, bool) or item is None or isinstance(item, float):
            continue
        elif isinstance(item, int):
            if not -MAX_INT - 1 <= item <= MAX_INT:
                raise RpcError("BAD_REQUEST", "Invalid input: integers must fit in 64 bits")
        elif isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise RpcError("BAD_REQUEST", f"Invalid input: nested deeper than {MAX_JSON_DEPTH} levels")
            if isinstance(item, dict):
                stack.extend((k, depth) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)


def url_problem(path: str, query_string: bytes) -> str | None:
    """Why a request's URL cannot be served, or None: a NUL in its (percent-decoded) path or anywhere in its
    query (where it can only arrive percent-encoded; the HTTP parser refuses a raw one). Every path and query
    parameter of every route is covered by this one check, made before routing."""
    if "\x00" in path:
        return "Invalid path: it may not contain NUL (%00)"
    if b"%00" in query_string or b"\x00" in query_string:
        return "Invalid query: it may not contain NUL (%00)"
    return None
