"""A ``Turn``: one model call (one step of a run).

It yields the provider's canonical events (``text-delta``, ``text-done``, ``tool-call-start``,
``tool-call-delta``, ``tool-call``, then exactly one ``finished`` or ``error``). Streaming is the default; with
``streaming=False`` (the session's ``disableStreaming``) it makes the blocking call and yields the whole text as
one ``text-delta`` — one delta per step. Tool results are not part of a Turn: the run loop executes tools
between turns. Whatever goes wrong (unknown provider, missing key, a bug in an adapter) ends the Turn with an
``error`` event; only cancellation (an abort, a shutdown) propagates.

Idle limit: :attr:`Turn.asked` is when the call last went to the provider for its next event (the call's start,
then after each event the consumer took). A watchdog outside the stream (the run loop's tick) calls
:meth:`Turn.expire` with ``CHATSYNC_PROVIDER_IDLE_TIMEOUT_SECONDS``; when the call has been waiting on the provider
that long it cancels the task consuming the events, and the Turn, recognising its own cancellation, closes the
provider's stream and ends with a retryable ``timeout`` error. A stream that keeps sending is never cut, and the
stream itself pays one clock read and one attribute store per event: no timer, no task.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from types import AsyncGeneratorType
from typing import cast

from ..llm import ChatRequest, ErrorEvent, Provider, ProviderError, TextDelta, TextDone, TurnEvent
from ..llm.errors import ErrorCode
from ..llm.observe import CallObserver

log = logging.getLogger(__name__)


class Turn:
    """One model call: :meth:`events` yields the provider's canonical events for ``request``, streamed or
    (``streaming=False``) delivered at once; see the module docstring."""

    def __init__(
        self, provider: Callable[[], Provider], request: ChatRequest, *, streaming: bool = True, provider_id: str = ""
    ) -> None:
        self._provider = provider
        self.request = request
        self.streaming = streaming
        self.provider_id = provider_id  # for metrics and traces (``llm.observe``)
        self.asked = time.monotonic()  # when the call last asked the provider for an event (see the module doc)
        self.expired = False  # the idle limit ended the call
        self._events: AsyncGeneratorType[TurnEvent, None] | None = None

    def events(self) -> AsyncGenerator[TurnEvent, None]:
        """The call's events (iterate them once), observed (``llm.observe``) in one generator: between the
        provider's stream and the run loop a token passes no other layer."""
        # The generator object itself: ``ag_running`` says whether it is waiting on the provider.
        events = self._events = cast("AsyncGeneratorType[TurnEvent, None]", self._run())
        return events

    def expire(self, idle_limit: float) -> bool:
        """Whether the call has waited on the provider for ``idle_limit`` seconds, marking it so when it has. The
        caller then cancels the task consuming :meth:`events`; the generator turns that cancellation into a
        ``timeout`` error. Not while the consumer holds an event (the generator is suspended at its ``yield``,
        not waiting on the provider), nor twice."""
        events = self._events
        if self.expired or events is None or not events.ag_running or time.monotonic() - self.asked < idle_limit:
            return False
        self.expired = True
        return True

    async def _run(self) -> AsyncGenerator[TurnEvent, None]:
        watch = CallObserver(self.provider_id, self.request.options.model)
        clock = time.monotonic
        self.asked = clock()
        try:
            try:
                provider = self._provider()
            except ProviderError as exc:
                yield watch.see(ErrorEvent(code=exc.code, message=exc.message, retryable=exc.retryable))
                return
            except KeyError as exc:
                yield watch.see(ErrorEvent(code="not_configured", message=str(exc.args[0] if exc.args else exc)))
                return
            try:
                if self.streaming:
                    stream = provider.stream(self.request)
                    try:
                        async for event in stream:
                            if watch.waiting or type(event) is not TextDelta:  # else: a token, nothing to record
                                watch.see(event)
                            yield event
                            self.asked = clock()
                    finally:
                        # On abort or the idle limit (cancellation) close the provider's stream now, not when it
                        # is collected: that is what closes the HTTP response and stops the provider generating.
                        await stream.aclose()
                else:
                    completion = await provider.complete(self.request, progress=self._progress)
                    for event in completion.events():
                        if isinstance(event, TextDone):
                            yield watch.see(TextDelta(delta=event.text))
                        yield watch.see(event)
            except ProviderError as exc:
                yield watch.see(ErrorEvent(code=exc.code, message=exc.message, retryable=exc.retryable))
            except asyncio.CancelledError:
                task = asyncio.current_task()
                # Only the idle limit's own cancellation, alone: an abort or a shutdown (also) asked for it
                # propagates as ever.
                if not self.expired or task is None or task.cancelling() != 1:
                    raise
                task.uncancel()
                message = "The provider sent nothing for too long; the answer was stopped."
                yield watch.see(ErrorEvent(code=ErrorCode.TIMEOUT, message=message, retryable=True))
            except Exception as exc:
                log.exception("provider %s failed unexpectedly", getattr(provider, "provider_id", "?"))
                yield watch.see(ErrorEvent(code="unknown", message=f"{type(exc).__name__}: {exc}"))
        finally:
            watch.end()

    def _progress(self) -> None:
        self.asked = time.monotonic()
