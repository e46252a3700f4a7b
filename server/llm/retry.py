"""The one retry policy for every provider.

The SDKs' own retries are disabled in every adapter (``max_retries=0``; google-genai retries only when
``HttpRetryOptions`` is set; ollama-python never retries) so that this wrapper alone decides. Rules:

- retry only a ``ProviderError`` with ``retryable=True`` (429 except quota, 408/409, 5xx incl. 503/529, connection
  errors, errors inside a 200 stream that the provider types as transient);
- never after the attempt yielded any event: a partial answer has been shown to users and acted on, and a retry
  would duplicate it (``overloaded_error`` can arrive mid-stream with HTTP 200);
- wait ``Retry-After`` when the server sent one (give up if it exceeds ``max_retry_after``, as the OpenAI SDK does
  above 120 s), else exponential backoff with full jitter.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from .errors import ErrorCode, ProviderError
from .types import ErrorEvent, TurnEvent


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry. ``sleep``/``rand`` are injectable so tests run without waiting."""

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False, compare=False)
    rand: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def delay(self, attempt: int, error: ProviderError) -> float | None:
        """Seconds before retry number ``attempt`` (1-based), or ``None`` to give up."""
        if not error.retryable or attempt > self.max_retries:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_retry_after else None
        ceiling = min(self.max_delay, self.initial_delay * 2.0 ** (attempt - 1))
        # Full jitter spreads the retries of many sessions hitting the same rate limit.
        return ceiling * (0.5 + 0.5 * self.rand())


NO_RETRY = RetryPolicy(max_retries=0)


def error_event(error: ProviderError) -> ErrorEvent:
    """The terminal event for a classified error."""
    return ErrorEvent(code=error.code, message=error.message, retryable=error.retryable)


async def with_retries(
    attempt: Callable[[], AsyncIterator[TurnEvent]], policy: RetryPolicy
) -> AsyncGenerator[TurnEvent, None]:
    """Run ``attempt()`` until it completes, retrying per ``policy``; failures end the stream with an ``ErrorEvent``.

    ``attempt`` must raise ``ProviderError`` for failures; any other exception is reported as ``unknown`` and not
    retried, because it is a bug rather than a provider condition.
    """
    retries = 0
    while True:
        yielded = False
        stream = attempt()
        try:
            async for event in stream:
                yielded = True
                yield event
            return
        except ProviderError as exc:
            wait = None if yielded else policy.delay(retries + 1, exc)
            if wait is None:
                yield error_event(exc)
                return
        except Exception as exc:
            yield ErrorEvent(code=ErrorCode.UNKNOWN, message=f"{type(exc).__name__}: {exc}", retryable=False)
            return
        finally:
            # Closes the SDK response even when the consumer stops early (abort) or we bail out.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        retries += 1
        await policy.sleep(wait)
