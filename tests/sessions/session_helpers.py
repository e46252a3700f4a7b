"""Helpers for the session-management tests (imported as ``session_helpers``)."""

from __future__ import annotations

from typing import Any

from engine_helpers import Stream

from server.domain.titles import ELLIPSIS

LONG = "How do I configure the connection pool size for asyncpg in SQLAlchemy when running under uvicorn?"
LONG_TITLE = "How do I configure the connection pool size for" + ELLIPSIS
LONG_MODEL_TITLE = "How do I configure the"  # the echo model repeats the first message; five words of it


async def settle(st: Stream, quiet: float = 0.3) -> None:
    """Read everything the subscription delivers until it has been quiet for ``quiet`` seconds (time enough
    for a background title that should not come to show up)."""
    while True:
        try:
            st.items.append(await st.sub.next(quiet))
        except TimeoutError:
            return


def titles(st: Stream) -> list[tuple[str, str]]:
    return [(e["title"], e["source"]) for e in st.of("title-changed")]


def seq(st: Stream, pred: Any) -> int:
    return next(int(i) for i, e in st.items if pred(e))


async def get(c: Any, sid: str) -> dict[str, Any]:
    return (await c.query("session.get", {"sessionId": sid}))["session"]
