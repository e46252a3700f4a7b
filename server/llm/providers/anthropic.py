"""Anthropic Messages adapter on ``anthropic.AsyncAnthropic`` (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``).

Stream parsing (the SDK's raw response, each event's JSON read here): blocks keyed by content-block ``index``;
``input_json_delta`` fragments are concatenated (the first may be ``""``) and parsed only when the message ends;
``ping`` is ignored; usage is ``message_start`` input (+ cache reads/writes) and the *cumulative* ``message_delta``
output; an ``event: error`` after HTTP 200 (e.g. ``overloaded_error``) ends the step with an error and any
half-streamed call is not emitted. Thinking blocks are not requested and their deltas are ignored.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anthropic
import httpx2

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
from ..sse import sse_json
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
        return classify_http(exc.status_code, exc.message, exc.body, exc.response.headers)
    if isinstance(exc, anthropic.APITimeoutError):
        return connection_error(str(exc), timeout=timed_out(exc))
    if isinstance(exc, anthropic.APIConnectionError):
        return connection_error(str(exc))
    if isinstance(exc, anthropic.APIError):
        return classify_status(None, exc.message, exc.body)
    return classify_stream_failure(exc)


def _input_tokens(usage: Mapping[str, Any]) -> int | None:
    """Prompt tokens including cache reads and writes (Anthropic reports them separately)."""
    base: int | None = usage.get("input_tokens")
    if base is None:
        return None
    return base + (usage.get("cache_creation_input_tokens") or 0) + (usage.get("cache_read_input_tokens") or 0)


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
            # The SDK sends the request (auth, base URL, status errors, timeouts); its raw response is read here
            # as plain JSON, as the OpenAI adapter does: the SDK's typed events and its running snapshot of the
            # message cost more CPU per token than the rest of the turn. The body is already the wire's JSON
            # (``to_anthropic_request``), so it goes as ``extra_body``, which the SDK merges over the typed
            # parameters as is, instead of walking every field of the history to transform it first.
            async with self.client.messages.with_streaming_response.create(
                model=body["model"], max_tokens=body["max_tokens"], messages=(), stream=True, extra_body=body
            ) as response:
                async for event in sse_json(response.iter_lines()):
                    for out in self._handle(asm, event):
                        yield out
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise classify_anthropic_error(exc) from exc
        except (ValueError, TypeError, AttributeError, KeyError) as exc:  # not JSON, or not the documented shape
            raise classify_stream_failure(exc) from exc
        for out in asm.end():
            yield out

    @staticmethod
    def _handle(asm: TurnAssembler, event: dict[str, Any]) -> list[TurnEvent]:
        kind = event.get("type")
        if kind == "content_block_delta":  # nearly every event: first
            delta = event["delta"]
            if delta.get("type") == "text_delta":
                return asm.text(delta.get("text") or "")
            if delta.get("type") == "input_json_delta":
                return asm.tool_call(event.get("index", 0), arguments=delta.get("partial_json"))
        elif kind == "message_start":
            usage = event["message"].get("usage") or {}
            asm.set_usage(_input_tokens(usage), usage.get("output_tokens"))
        elif kind == "content_block_start":
            block = event["content_block"]
            if block.get("type") == "text":
                return asm.text(block.get("text") or "")
            if block.get("type") == "tool_use":
                # `input` is `{}` at start and filled by deltas; a non-empty one means the call came whole.
                initial = json.dumps(block["input"]) if block.get("input") else None
                return asm.tool_call(
                    event.get("index", 0), id=block.get("id"), name=block.get("name"), arguments=initial
                )
        elif kind == "message_delta":
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                asm.finish_with(STOP_REASONS.get(reason, "error"))
            delta_usage = event.get("usage")
            if delta_usage is not None:
                asm.set_usage(_input_tokens(delta_usage), delta_usage.get("output_tokens"))
        elif kind == "error":  # after HTTP 200: the event says what failed
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            raise classify_status(None, message or "An error occurred during streaming", event)
        return []

    async def aclose(self) -> None:
        """Close the SDK client."""
        await self.client.close()
