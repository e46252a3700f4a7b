"""Anthropic Messages adapter on ``anthropic.AsyncAnthropic`` (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``).

Stream parsing: blocks keyed by content-block ``index``; ``input_json_delta`` fragments are
concatenated (the first may be ``""``) and parsed only when the message ends; ``ping`` is ignored; usage is
``message_start`` input (+ cache reads/writes) and the *cumulative* ``message_delta`` output; an ``event: error``
after HTTP 200 (e.g. ``overloaded_error``) ends the step with an error and any half-streamed call is not emitted.
Thinking blocks are not requested and their deltas are ignored.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import anthropic
import httpx2
from anthropic.types import RawMessageStreamEvent

from ..assemble import TurnAssembler
from ..convert.anthropic import to_anthropic_request
from ..errors import (
    ErrorCode,
    ProviderError,
    classify_http,
    classify_status,
    classify_stream_failure,
    connection_error,
    timed_out,
)
from ..retry import RetryPolicy
from ..types import ChatRequest, FinishReason, TurnEvent
from .base import Provider

STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    # pause_turn: the server paused a long turn; vercel maps it to stop, resending continues it.
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
}


def classify_anthropic_error(exc: Exception) -> ProviderError:
    """Translate an ``anthropic`` / transport exception into a ``ProviderError``."""
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code == 200:
            # The SDK raises the SSE `error` event as a status error carrying the 200 of the stream.
            return classify_status(None, exc.message, exc.body)
        return classify_http(exc.status_code, exc.message, exc.body, exc.response.headers)
    if isinstance(exc, anthropic.APITimeoutError):
        return connection_error(str(exc), timeout=timed_out(exc))
    if isinstance(exc, anthropic.APIConnectionError):
        return connection_error(str(exc))
    if isinstance(exc, anthropic.APIError):
        return classify_status(None, exc.message, exc.body)
    return classify_stream_failure(exc)


def _input_tokens(usage: object) -> int | None:
    """Prompt tokens including cache reads and writes (Anthropic reports them separately)."""
    base: int | None = getattr(usage, "input_tokens", None)
    if base is None:
        return None
    cached = (getattr(usage, "cache_creation_input_tokens", None) or 0) + (
        getattr(usage, "cache_read_input_tokens", None) or 0
    )
    return base + cached


class AnthropicProvider(Provider):
    """Messages API through the official SDK; ``http_client`` (``httpx2.AsyncClient``) injects a transport."""

    provider_id = "anthropic"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx2.AsyncClient | None = None,
        retry_policy: RetryPolicy | None = None,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        super().__init__(retry_policy=retry_policy)
        if client is None:
            api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
            if api_key is None:
                raise ProviderError(ErrorCode.NOT_CONFIGURED, "ANTHROPIC_API_KEY is not set")
            # base_url=None lets the SDK read ANTHROPIC_BASE_URL itself. The SDK's aiohttp transport
            # (``DefaultAioHttpClient``, its defaults otherwise) reads a stream for less CPU per chunk than its
            # default HTTP client: see docs/performance.md.
            client = anthropic.AsyncAnthropic(
                api_key=api_key,
                base_url=base_url,
                http_client=http_client or anthropic.DefaultAioHttpClient(),
                max_retries=0,
            )
        self.client = client

    async def _attempt(self, request: ChatRequest) -> AsyncIterator[TurnEvent]:
        body = await self.convert(to_anthropic_request, request)
        asm = TurnAssembler(self.provider_id)
        try:
            stream = await self.client.messages.create(**body, stream=True)
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise classify_anthropic_error(exc) from exc
        try:
            async for event in stream:
                for out in self._handle(asm, event):
                    yield out
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise classify_anthropic_error(exc) from exc
        finally:
            await stream.close()
        for out in asm.end():
            yield out

    @staticmethod
    def _handle(asm: TurnAssembler, event: RawMessageStreamEvent) -> list[TurnEvent]:
        if event.type == "message_start":
            usage = event.message.usage
            asm.set_usage(_input_tokens(usage), usage.output_tokens)
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "text":
                return asm.text(block.text)
            if block.type == "tool_use":
                # `input` is `{}` at start and filled by deltas; a non-empty one means the call came whole.
                initial = json.dumps(block.input) if block.input else None
                return asm.tool_call(event.index, id=block.id, name=block.name, arguments=initial)
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                return asm.text(delta.text)
            if delta.type == "input_json_delta":
                return asm.tool_call(event.index, arguments=delta.partial_json)
        elif event.type == "message_delta":
            reason = event.delta.stop_reason
            if reason:
                asm.finish_with(STOP_REASONS.get(reason, "error"))
            delta_usage = event.usage
            if delta_usage is not None:
                asm.set_usage(_input_tokens(delta_usage), delta_usage.output_tokens)
        return []

    async def aclose(self) -> None:
        """Close the SDK client."""
        await self.client.close()
