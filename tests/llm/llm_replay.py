"""Helpers for the provider tests: recorded wire fixtures replayed through the SDKs' HTTP transport hooks.

openai, anthropic and google-genai are built on ``httpx2`` (the pydantic-maintained httpx fork), ollama-python on
``httpx``; ``Replay`` works with either module's ``MockTransport``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from server.llm import ChatRequest, Message, RequestOptions, ToolCall, ToolDefinition

FIXTURES = Path(__file__).parent / "fixtures"

SSE = {"content-type": "text/event-stream"}
NDJSON = {"content-type": "application/x-ndjson"}
JSON = {"content-type": "application/json"}

Reply = tuple[int, bytes, dict[str, str]]

# Body keys the Messages API answers with a 400 invalid_request_error ("Extra inputs are not permitted") in the
# version the Anthropic SDK speaks (2026-10-21), whatever their value.
ANTHROPIC_REFUSED = ("temperature", "top_p", "top_k")


def fixture_bytes(name: str) -> bytes:
    """The raw bytes of a recorded stream under ``fixtures/``."""
    return (FIXTURES / name).read_bytes()


def sse(name: str) -> Reply:
    """A 200 ``text/event-stream`` reply with the fixture as body."""
    return 200, fixture_bytes(name), SSE


def ndjson(name: str) -> Reply:
    """A 200 ``application/x-ndjson`` reply with the fixture as body."""
    return 200, fixture_bytes(name), NDJSON


def error_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    """An error reply with a JSON body."""
    return status, json.dumps(body).encode(), {**JSON, **(headers or {})}


class Replay:
    """A transport handler answering requests with canned replies, in order, and recording each request."""

    def __init__(self, http: Any, replies: Iterable[Reply]) -> None:
        self.http = http
        self.replies = list(replies)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError(f"unexpected extra request to {request.url}")
        status, body, headers = self.replies.pop(0)
        return self.http.Response(status, content=body, headers=headers)

    def transport(self) -> Any:
        return self.http.MockTransport(self)

    def body(self, index: int = -1) -> dict[str, Any]:
        """The JSON body of a recorded request."""
        return json.loads(self.requests[index].content)


class Sleeps:
    """Records the waits a ``RetryPolicy`` asks for instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def simple_request(model: str = "test-model", **options: Any) -> ChatRequest:
    """A small history: system prompt, a finished tool round trip, and a new user question."""
    return ChatRequest(
        messages=(
            Message(role="system", content="Be brief."),
            Message(role="user", content="Weather in Paris?"),
            Message(
                role="assistant",
                content="",
                tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),),
            ),
            Message(role="tool", tool_call_id="call_1", content="18°C, sunny"),
            Message(role="assistant", content="It is 18°C and sunny."),
            Message(role="user", content="And now?"),
        ),
        options=RequestOptions(model=model, **options),
        tools=(WEATHER,),
    )


async def collect(stream) -> list[Any]:
    """All events of a provider stream."""
    return [event async for event in stream]
