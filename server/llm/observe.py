"""One model call, observed: its ``provider request`` span, its time to the first token and its error code.

One check per event the provider yields (a token batch, not a character), one histogram observation per call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from .. import metrics, tracing
from .types import ErrorEvent, Finished, TextDelta, ToolCallStart, TurnEvent

_FIRST = (TextDelta, ToolCallStart)


async def observed(events: AsyncIterator[TurnEvent], provider: str, model: str) -> AsyncIterator[TurnEvent]:
    """``events`` as they come, recording the call (``chatsync_time_to_first_token_seconds``,
    ``chatsync_provider_errors_total``, a span with the provider, the model and the finish reason)."""
    started = time.perf_counter()
    waiting = True
    span = tracing.start("provider request", provider=provider, model=model)
    outcome = "cancelled"
    try:
        async for event in events:
            kind = type(event)
            if kind is TextDelta and not waiting:  # the common case: a token batch, nothing to record
                yield event
                continue
            if waiting and kind in _FIRST:
                waiting = False
                metrics.TIME_TO_FIRST_TOKEN.labels(provider, model).observe(time.perf_counter() - started)
            elif kind is ErrorEvent:
                code = event.code  # type: ignore[union-attr]
                metrics.PROVIDER_ERRORS.labels(provider, code).inc()
                outcome = "error:" + code
            elif kind is Finished:
                outcome = event.finish_reason or "finished"  # type: ignore[union-attr]
            yield event
    finally:
        tracing.end(span, outcome=outcome)
