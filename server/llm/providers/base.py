"""The provider interface every adapter implements."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, ClassVar

from ..retry import RetryPolicy, with_retries
from ..types import (
    ChatRequest,
    Completion,
    ErrorEvent,
    Finished,
    TextDelta,
    ToolCallEvent,
    TurnEvent,
)


class Provider(ABC):
    """One LLM backend. ``stream`` is the streaming call, ``complete`` the blocking one.

    Subclasses implement ``_attempt``: one request, yielding canonical events and raising ``ProviderError`` on
    failure. The base class owns the retry policy, so every adapter retries the same way.

    The stream contract: events in order, ending with exactly one ``Finished`` or ``ErrorEvent``; the iterator
    never raises for provider conditions. To abort, stop iterating and ``aclose()`` the iterator (or cancel the
    task); the HTTP response is closed on the way out.
    """

    provider_id: ClassVar[str]

    def __init__(self, *, retry_policy: RetryPolicy | None = None) -> None:
        self.retry_policy = retry_policy or RetryPolicy()

    @property
    def input_target(self) -> str:
        """The conversion target whose attachment rules apply (``server.llm.capabilities``)."""
        return self.provider_id

    @staticmethod
    async def convert(convert: Callable[..., Any], request: ChatRequest, *args: Any, **kwargs: Any) -> Any:
        """``convert(request, ...)``, off the event loop when the request has files: decoding and resizing images
        or extracting a PDF's text can take longer than any stream should wait for."""
        if any(m.attachments for m in request.messages):
            return await asyncio.to_thread(convert, request, *args, **kwargs)
        return convert(request, *args, **kwargs)

    @abstractmethod
    def _attempt(self, request: ChatRequest) -> AsyncIterator[TurnEvent]:
        """One request to the provider; raise ``ProviderError`` on failure."""

    def stream(self, request: ChatRequest) -> AsyncGenerator[TurnEvent, None]:
        """Stream one step of ``request`` as Turn events, with retries before any output.

        Returns the retrying generator itself rather than re-yielding from it: every token passes each
        generator layer once, and this one would add nothing but the hop."""
        return with_retries(lambda: self._attempt(request), self.retry_policy)

    async def complete(self, request: ChatRequest, *, progress: Callable[[], None] | None = None) -> Completion:
        """Run one step to the end and return it whole (for sessions with streaming disabled); ``progress`` is
        called after each event of the stream underneath (``engine.turn``'s idle limit counts from it)."""
        text: list[str] = []
        calls = []
        stream = self.stream(request)
        try:
            async for event in stream:
                if progress is not None:
                    progress()
                if isinstance(event, TextDelta):
                    text.append(event.delta)
                elif isinstance(event, ToolCallEvent):
                    calls.append(event.to_tool_call())
                elif isinstance(event, Finished):
                    return Completion(
                        text="".join(text),
                        tool_calls=tuple(calls),
                        finish_reason=event.finish_reason,
                        usage=event.usage,
                    )
                elif isinstance(event, ErrorEvent):
                    return Completion(text="".join(text), tool_calls=tuple(calls), error=event)
        finally:
            await stream.aclose()  # now, on cancellation too (an abort, the idle limit): closes the HTTP response
        raise RuntimeError("provider stream ended without a terminal event")  # a bug in an adapter, not a provider

    async def aclose(self) -> None:
        """Release the SDK client's connections (no-op by default)."""

    async def __aenter__(self) -> Provider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
