"""One model call, observed: its ``provider request`` span, its time to the first token and its error code.

The caller (``engine.turn.Turn``) shows each event to a :class:`CallObserver` from inside its own generator:
every token passes each generator layer once, so observing adds a check per event rather than a layer. Past
the first token a text delta needs no look at all; one histogram observation per call.
"""

from __future__ import annotations

import time

from .. import metrics, tracing
from .types import ErrorEvent, Finished, TextDelta, ToolCallStart, TurnEvent

_FIRST = (TextDelta, ToolCallStart)


class CallObserver:
    """Records one call (``chatsync_time_to_first_token_seconds``, ``chatsync_provider_errors_total``, a span
    with the provider, the model and the finish reason): :meth:`see` each event while :attr:`waiting` or when
    it is not a text delta, then :meth:`end` once."""

    __slots__ = ("model", "outcome", "provider", "span", "started", "waiting")

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.started = time.perf_counter()
        self.waiting = True  # for the first token
        self.span = tracing.start("provider request", provider=provider, model=model)
        self.outcome = "cancelled"

    def see(self, event: TurnEvent) -> TurnEvent:
        kind = type(event)
        if self.waiting and kind in _FIRST:
            self.waiting = False
            metrics.TIME_TO_FIRST_TOKEN.labels(self.provider, self.model).observe(time.perf_counter() - self.started)
        elif kind is ErrorEvent:
            code = event.code  # type: ignore[union-attr]
            metrics.PROVIDER_ERRORS.labels(self.provider, code).inc()
            self.outcome = "error:" + code
        elif kind is Finished:
            self.outcome = event.finish_reason or "finished"  # type: ignore[union-attr]
        return event

    def end(self) -> None:
        tracing.end(self.span, outcome=self.outcome)
