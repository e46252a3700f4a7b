"""Ollama native ``/api/chat`` adapter on ``ollama.AsyncClient`` (``OLLAMA_HOST``).

Stream parsing: NDJSON lines; content fragments are deltas, tool calls arrive whole (object
arguments) and are keyed by arrival order; the final ``done: true`` line carries ``done_reason`` (``stop`` even
when calls were made, so calls turn it into tool-calls) and the counts ``prompt_eval_count``/``eval_count``; an
``{"error": ...}`` line after HTTP 200 is an error (ollama-python raises ``ResponseError``); no ``done`` line is an
error. ollama-python never retries, so ``RetryPolicy`` alone decides.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, cast

import httpx
import ollama

from ..assemble import TurnAssembler
from ..convert.ollama import to_ollama_request
from ..errors import ErrorCode, ProviderError, classify_status, connection_error
from ..retry import RetryPolicy
from ..types import ChatRequest, FinishReason, TurnEvent
from .base import Provider

DONE_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length"}


def classify_ollama_error(exc: Exception) -> ProviderError:
    """Translate an ``ollama`` / transport exception into a ``ProviderError``."""
    if isinstance(exc, ollama.ResponseError):
        # status_code is -1 for an error line inside a 200 stream.
        status = exc.status_code if exc.status_code and exc.status_code > 0 else None
        return classify_status(status, exc.error)
    if isinstance(exc, httpx.TimeoutException):
        return connection_error(f"request timed out: {exc}", timeout=True)
    if isinstance(exc, (ConnectionError, httpx.TransportError)):
        return connection_error(str(exc))
    return ProviderError(ErrorCode.UNKNOWN, f"{type(exc).__name__}: {exc}")


class OllamaProvider(Provider):
    """Ollama's native chat API. ``transport`` (an ``httpx.AsyncBaseTransport``) or other httpx keyword arguments
    are passed to the ``httpx.AsyncClient`` ollama-python builds; ``host=None`` reads ``OLLAMA_HOST``."""

    provider_id = "ollama"

    def __init__(
        self,
        *,
        host: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        retry_policy: RetryPolicy | None = None,
        client: ollama.AsyncClient | None = None,
        **httpx_kwargs: object,
    ) -> None:
        super().__init__(retry_policy=retry_policy)
        if client is None:
            if transport is not None:
                httpx_kwargs["transport"] = transport
            client = ollama.AsyncClient(host=host, **httpx_kwargs)
        self.client = client

    async def _attempt(self, request: ChatRequest) -> AsyncIterator[TurnEvent]:
        body = await self.convert(to_ollama_request, request)
        asm = TurnAssembler(self.provider_id)
        calls = 0
        try:
            stream = await self.client.chat(**body, stream=True)
        except (ollama.ResponseError, ConnectionError, httpx.HTTPError) as exc:
            raise classify_ollama_error(exc) from exc
        try:
            async for part in stream:
                msg = part.message
                for event in asm.text(msg.content or ""):
                    yield event
                for tc in msg.tool_calls or ():
                    fn = tc.function
                    for event in asm.tool_call(calls, name=fn.name, arguments=json.dumps(dict(fn.arguments or {}))):
                        yield event
                    calls += 1
                if part.done:
                    # Very old servers sent no done_reason; `done` itself is then the normal end.
                    reason = part.done_reason if part.done_reason is not None else "stop"
                    asm.finish_with(DONE_REASONS.get(reason, "error"))
                    asm.set_usage(part.prompt_eval_count or 0, part.eval_count or 0)
        except (ollama.ResponseError, ConnectionError, httpx.HTTPError) as exc:
            raise classify_ollama_error(exc) from exc
        finally:
            # The SDK declares an iterator; it is an async generator, whose aclose() closes the response.
            await cast(AsyncGenerator[Any, None], stream).aclose()
        for event in asm.end():
            yield event

    async def aclose(self) -> None:
        """Close ollama-python's httpx client."""
        await self.client.close()
