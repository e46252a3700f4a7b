"""OpenAI Chat Completions adapter (also every OpenAI-compatible server via a base URL) on ``openai.AsyncOpenAI``.

Configuration comes from the SDK's own variables (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) unless passed
explicitly. With a base URL that is not api.openai.com the ``COMPATIBLE`` conversion profile is used (one leading
system message, merged same-role turns), since those servers validate through chat templates.

Stream parsing: tool calls keyed by ``index`` and finalised at the end, usage from the
``choices: []`` chunk (or any chunk carrying it: vLLM sends cumulative usage on every chunk, so replace), a
``data: {"error": ...}`` line after HTTP 200 is an error, no ``finish_reason`` is an error.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai

from ..assemble import TurnAssembler
from ..convert.openai import COMPATIBLE, OPENAI, OpenAIProfile, to_openai_request
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

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}


def classify_openai_error(exc: Exception) -> ProviderError:
    """Translate an ``openai`` / transport exception into a ``ProviderError``."""
    if isinstance(exc, openai.APIStatusError):
        return classify_http(exc.status_code, exc.message, exc.body, exc.response.headers)
    if isinstance(exc, openai.APITimeoutError):
        return connection_error(str(exc), timeout=timed_out(exc))
    if isinstance(exc, openai.APIConnectionError):
        return connection_error(str(exc))
    if isinstance(exc, openai.APIError):
        # Raised by the SDK for an `error` object inside a 200 stream: no status, the body says what failed.
        return classify_status(None, exc.message, exc.body)
    return classify_stream_failure(exc)


class OpenAIProvider(Provider):
    """Chat Completions through the official SDK. Pass ``http_client`` (an ``httpx2.AsyncClient``) to inject a
    transport; the SDK's own retries are off (``max_retries=0``) because ``RetryPolicy`` decides."""

    provider_id = "openai"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx2.AsyncClient | None = None,
        profile: OpenAIProfile | None = None,
        retry_policy: RetryPolicy | None = None,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        super().__init__(retry_policy=retry_policy)
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if client is None:
            if api_key is None and base_url is None:
                raise ProviderError(ErrorCode.NOT_CONFIGURED, "OPENAI_API_KEY is not set")
            # Local OpenAI-compatible servers (llama.cpp, Ollama /v1) need no key, but the SDK insists on one.
            # The SDK's aiohttp transport (``DefaultAioHttpClient``, its defaults otherwise) reads a stream for
            # less CPU per chunk than its default HTTP client: see docs/performance.md.
            client = openai.AsyncOpenAI(
                api_key=api_key or "not-needed",
                base_url=base_url,
                http_client=http_client or openai.DefaultAioHttpClient(),
                max_retries=0,
            )
        self.client = client
        if profile is None:
            profile = OPENAI if base_url is None or "api.openai.com" in base_url else COMPATIBLE
        self.profile = profile

    @property
    def input_target(self) -> str:
        return self.profile.target

    async def _attempt(self, request: ChatRequest) -> AsyncIterator[TurnEvent]:
        body: dict[str, Any] = await self.convert(to_openai_request, request, self.profile)
        asm = TurnAssembler(self.provider_id)
        refused = False
        try:
            # The SDK sends the request (auth, base URL, status errors, timeouts); its raw response is read here
            # as plain JSON: building its typed chunk objects cost ~100 µs a token, more than the rest of a turn.
            # The body is already the wire's JSON (``to_openai_request``), so it goes as ``extra_body``, which the
            # SDK merges into the request over the typed parameters, as is. As typed parameters the SDK would walk
            # it to transform each field first: ~130 µs per message of the history, 13 ms a request at 100.
            async with self.client.chat.completions.with_streaming_response.create(
                model=body["model"],
                messages=(),
                stream=True,
                stream_options={"include_usage": True},
                extra_body=body,
            ) as response:
                async for chunk in sse_json(response.iter_lines()):
                    error = chunk.get("error")
                    if error:  # after HTTP 200: the body says what failed
                        message = error.get("message") if isinstance(error, dict) else None
                        raise classify_status(None, message or "An error occurred during streaming", error)
                    usage = chunk.get("usage")
                    if usage:
                        asm.set_usage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0)
                    for choice in chunk.get("choices") or ():
                        if choice.get("index", 0) != 0:
                            continue  # we never ask for n > 1
                        delta = choice.get("delta") or {}
                        for event in asm.text(delta.get("content") or ""):
                            yield event
                        if delta.get("refusal"):
                            refused = True
                            for event in asm.text(delta["refusal"]):
                                yield event
                        for tc in delta.get("tool_calls") or ():
                            fn = tc.get("function") or {}
                            for event in asm.tool_call(
                                tc.get("index", 0), id=tc.get("id"), name=fn.get("name"), arguments=fn.get("arguments")
                            ):
                                yield event
                        reason = choice.get("finish_reason")
                        if reason:
                            asm.finish_with(FINISH_REASONS.get(reason, "error"))
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise classify_openai_error(exc) from exc
        except (ValueError, TypeError, AttributeError) as exc:  # not JSON, or not the documented shape
            raise classify_stream_failure(exc) from exc
        if refused and asm.finish is not None:
            asm.finish_with("content-filter")  # a refusal is a content-filter stop
        for event in asm.end():
            yield event

    async def aclose(self) -> None:
        """Close the SDK client (and an injected ``http_client`` with it)."""
        await self.client.close()
