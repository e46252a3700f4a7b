"""Helpers for the session-management tests (imported as ``session_helpers``)."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from engine_helpers import Stream

from server.domain.titles import ELLIPSIS
from server.services.titles import TitleService

LONG = "How do I configure the connection pool size for asyncpg in SQLAlchemy when running under uvicorn?"
LONG_TITLE = "How do I configure the connection pool size for" + ELLIPSIS
LONG_MODEL_TITLE = "How do I configure the"  # the echo model repeats the first message; five words of it


class TitleJobs:
    """A server's model-title jobs, observed. In model mode the orchestrator starts
    ``TitleService.after_run_finished(session, run)`` as a task of its own once a run's ``run-finished`` is
    committed; this records each one that has returned, whatever it did (a title, nothing, a failure)."""

    def __init__(self, service: TitleService) -> None:
        self._job = service.after_run_finished
        self._returned: dict[tuple[str, str], asyncio.Event] = {}
        service.after_run_finished = self._observed  # type: ignore[method-assign]

    def _event(self, session_id: str, run_id: str) -> asyncio.Event:
        return self._returned.setdefault((session_id, run_id), asyncio.Event())

    async def _observed(self, session_id: str, run_id: str) -> None:
        try:
            await self._job(session_id, run_id)
        finally:
            self._event(session_id, run_id).set()

    async def returned(self, session_id: str, run_id: str, timeout: float = 10) -> None:
        await asyncio.wait_for(self._event(session_id, run_id).wait(), timeout)


_OBSERVED: weakref.WeakKeyDictionary[TitleService, TitleJobs] = weakref.WeakKeyDictionary()


def observe_titles(live: Any) -> TitleJobs:
    """Observe ``live``'s model-title jobs from now on (before its first run: a job missed is waited for
    in vain)."""
    service = live.services.orchestrator.titles
    if service not in _OBSERVED:
        _OBSERVED[service] = TitleJobs(service)
    return _OBSERVED[service]


async def read_to(st: Stream, last_event_id: str, timeout: float = 10) -> None:
    """Read ``st`` until it holds the durable event ``last_event_id`` (``"0"``: nothing to wait for)."""
    last = int(last_event_id)
    while last > 0 and not any(i is not None and int(i) >= last for i, _e in st.items):
        st.items.append(await st.sub.next(timeout))


async def caught_up(live: Any, client: Any, st: Stream, session_id: str) -> None:
    """Read ``st``, a subscription to an idle session, until it holds every event the session will ever log
    without a new request: first what its log holds now, then — once the model-title job of every run seen
    finishing has returned (model mode; in truncate mode titles are written only in the requests' own
    transactions, and the server starts no job) — what those jobs logged. A title that should not come would
    be among them, so an assertion on ``titles(st)`` afterwards sees it."""
    await read_to(st, (await client.query("session.get", {"sessionId": session_id}))["lastEventId"])
    service = live.services.orchestrator.titles
    if service.mode == "model":
        jobs = _OBSERVED.get(service)
        assert jobs is not None, "call observe_titles(live) before the session's first run"
        for e in st.of("run-finished"):
            await jobs.returned(session_id, e["runId"])
        await read_to(st, (await client.query("session.get", {"sessionId": session_id}))["lastEventId"])


def titles(st: Stream) -> list[tuple[str, str]]:
    return [(e["title"], e["source"]) for e in st.of("title-changed")]


def seq(st: Stream, pred: Any) -> int:
    return next(int(i) for i, e in st.items if pred(e))


async def get(c: Any, sid: str) -> dict[str, Any]:
    return (await c.query("session.get", {"sessionId": sid}))["session"]
