"""A ``Turn``: one model call (one step of a run).

It yields the provider's canonical events (``text-delta``, ``text-done``, ``tool-call-start``,
``tool-call-delta``, ``tool-call``, then exactly one ``finished`` or ``error``). Streaming is the default; with
``streaming=False`` (the session's ``disableStreaming``) it makes the blocking call and yields the whole text as
one ``text-delta`` — one delta per step. Tool results are not part of a Turn: the run loop executes tools
between turns. Whatever goes wrong (unknown provider, missing key, a bug in an adapter) ends the Turn with an
``error`` event; only cancellation (abort) propagates.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from ..llm import ChatRequest, ErrorEvent, Provider, ProviderError, TextDelta, TextDone, TurnEvent
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

    async def events(self) -> AsyncIterator[TurnEvent]:
        """The call's events, observed (``llm.observe``) in this one generator: between the provider's stream
        and the run loop a token passes no other layer."""
        watch = CallObserver(self.provider_id, self.request.options.model)
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
                    finally:
                        # On abort (cancellation) close the provider's stream now, not when it is collected:
                        # that is what closes the HTTP response and stops the provider generating.
                        await stream.aclose()
                else:
                    completion = await provider.complete(self.request)
                    for event in completion.events():
                        if isinstance(event, TextDone):
                            yield watch.see(TextDelta(delta=event.text))
                        yield watch.see(event)
            except ProviderError as exc:
                yield watch.see(ErrorEvent(code=exc.code, message=exc.message, retryable=exc.retryable))
            except Exception as exc:
                log.exception("provider %s failed unexpectedly", getattr(provider, "provider_id", "?"))
                yield watch.see(ErrorEvent(code="unknown", message=f"{type(exc).__name__}: {exc}"))
        finally:
            watch.end()
