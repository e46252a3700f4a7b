"""Gemini adapter on ``google.genai.Client(...).aio`` (``GEMINI_API_KEY``/``GOOGLE_API_KEY``).

The SDK reads no base-URL variable, so ``CHATSYNC_GOOGLE_BASE_URL`` points it at a gateway or a local stand-in.
With no ``http_client`` injected the SDK streams on aiohttp (installed with it), whose errors are classified with
httpx's: a client error (refused, reset, a body cut off mid-stream) is a connection error, a ``TimeoutError`` a
timeout. Without ``HttpRetryOptions`` the SDK retries a failed aiohttp connection once itself, after sleeping 1-10 s;
``HttpRetryOptions(attempts=1)`` makes one attempt of every request, so ``RetryPolicy`` decides.

Stream parsing: every ``data:`` line is a whole ``GenerateContentResponse``; text parts are
deltas (``thought`` parts skipped), function calls arrive whole per part — often without an id, which the
assembler then generates — with an optional ``thought_signature`` kept for replay; ``STOP`` with calls means
tool-calls; a blocked prompt (no candidates, ``prompt_feedback.block_reason``) is content-filter; usage is the last
``usage_metadata`` (cumulative).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, cast

import aiohttp
import httpx
import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from ..assemble import TurnAssembler
from ..convert.google import to_google_request
from ..errors import ErrorCode, ProviderError, classify_http, connection_error
from ..retry import RetryPolicy
from ..types import ChatRequest, FinishReason, TurnEvent
from .base import Provider

BASE_URL_ENV = "CHATSYNC_GOOGLE_BASE_URL"

FINISH_REASONS: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content-filter",
    "RECITATION": "content-filter",
    "BLOCKLIST": "content-filter",
    "PROHIBITED_CONTENT": "content-filter",
    "SPII": "content-filter",
    "IMAGE_SAFETY": "content-filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    # OTHER / FINISH_REASON_UNSPECIFIED / anything new: the model stopped for a reason we cannot vouch for, so the
    # run must not treat it as a clean stop that auto-sends the next queued message.
}

# aiohttp's timeouts are TimeoutErrors (asyncio's is the builtin); its other failures are ClientErrors.
_TIMEOUTS = (httpx.TimeoutException, httpx2.TimeoutException, TimeoutError)
_TRANSPORT_ERRORS = (httpx.HTTPError, httpx2.HTTPError, aiohttp.ClientError, TimeoutError)


def classify_google_error(exc: Exception) -> ProviderError:
    """Translate a ``google.genai`` / transport exception into a ``ProviderError``."""
    if isinstance(exc, genai_errors.APIError):
        headers = getattr(getattr(exc, "response", None), "headers", None)
        try:
            header_map = dict(headers.items()) if headers is not None else None
        except (AttributeError, TypeError):
            header_map = None  # response objects of other transports (aiohttp/requests) differ; the body suffices
        return classify_http(exc.code, exc.message or str(exc), exc.details, header_map)
    if isinstance(exc, _TIMEOUTS):
        return connection_error(f"request timed out: {exc}", timeout=True)
    if isinstance(exc, _TRANSPORT_ERRORS):
        return connection_error(f"connection failed: {exc}")
    return ProviderError(ErrorCode.UNKNOWN, f"{type(exc).__name__}: {exc}")


class GoogleProvider(Provider):
    """Gemini API through the official SDK; ``http_client`` (httpx or httpx2 ``AsyncClient``) injects a transport."""

    provider_id = "google"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | httpx2.AsyncClient | None = None,
        include_ids: bool = True,
        retry_policy: RetryPolicy | None = None,
        client: genai.Client | None = None,
    ) -> None:
        super().__init__(retry_policy=retry_policy)
        if client is None:
            api_key = api_key or os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY") or None
            if api_key is None:
                raise ProviderError(ErrorCode.NOT_CONFIGURED, "GEMINI_API_KEY / GOOGLE_API_KEY is not set")
            options: dict[str, Any] = {"retry_options": genai_types.HttpRetryOptions(attempts=1)}
            base_url = base_url or os.environ.get(BASE_URL_ENV) or None
            if base_url:
                options["base_url"] = base_url
            if http_client is not None:
                options["httpx_async_client"] = http_client
            client = genai.Client(api_key=api_key, http_options=genai_types.HttpOptions(**options))
        self.client = client
        self.include_ids = include_ids

    async def _attempt(self, request: ChatRequest) -> AsyncIterator[TurnEvent]:
        body = await self.convert(to_google_request, request, include_ids=self.include_ids)
        asm = TurnAssembler(self.provider_id)
        calls = 0
        try:
            stream = await self.client.aio.models.generate_content_stream(**body)
        except (genai_errors.APIError, *_TRANSPORT_ERRORS) as exc:
            raise classify_google_error(exc) from exc
        try:
            async for chunk in stream:
                if chunk.usage_metadata is not None:
                    meta = chunk.usage_metadata
                    output = (meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0)
                    asm.set_usage(meta.prompt_token_count or 0, output)
                if not chunk.candidates:
                    feedback = chunk.prompt_feedback
                    if feedback is not None and feedback.block_reason:
                        asm.finish_with("content-filter")
                    continue
                candidate = chunk.candidates[0]
                for part in (candidate.content.parts if candidate.content else None) or ():
                    if part.text and not part.thought:
                        for event in asm.text(part.text):
                            yield event
                    if part.function_call is not None:
                        fc = part.function_call
                        signature = (
                            base64.b64encode(part.thought_signature).decode() if part.thought_signature else None
                        )
                        for event in asm.tool_call(
                            calls, id=fc.id, name=fc.name, arguments=json.dumps(fc.args or {}), signature=signature
                        ):
                            yield event
                        calls += 1
                if candidate.finish_reason is not None:
                    name = getattr(candidate.finish_reason, "value", str(candidate.finish_reason))
                    asm.finish_with(FINISH_REASONS.get(name, "error"))
        except (genai_errors.APIError, *_TRANSPORT_ERRORS) as exc:
            raise classify_google_error(exc) from exc
        finally:
            # The SDK declares an iterator; it is an async generator, whose aclose() closes the response.
            await cast(AsyncGenerator[Any, None], stream).aclose()
        for event in asm.end():
            yield event

    async def aclose(self) -> None:
        """Close the SDK's async client."""
        await self.client.aio.aclose()
