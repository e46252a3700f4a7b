"""OpenAI adapter: documented Chat Completions SSE streams replayed through ``openai.AsyncOpenAI``."""

from __future__ import annotations

import json

import pytest
from llm_replay import SSE, collect, error_reply, simple_request, sse

from server.llm import (
    ErrorEvent,
    Finished,
    Message,
    RequestOptions,
    TextDelta,
    TextDone,
    ToolCallDelta,
    ToolCallEvent,
    ToolCallStart,
    Usage,
)
from server.llm.providers.openai import OpenAIProvider
from server.llm.types import ChatRequest

pytestmark = pytest.mark.fast


@pytest.fixture
def make_provider(httpx2_replay, retry_policy):
    providers: list[OpenAIProvider] = []

    def make(replies, **kwargs):
        replay, client = httpx2_replay(replies)
        kwargs.setdefault("retry_policy", retry_policy)
        provider = OpenAIProvider(api_key="sk-test", http_client=client, **kwargs)
        providers.append(provider)
        return replay, provider

    return make


async def test_text_stream_events_usage_and_request(make_provider):
    replay, provider = make_provider([sse("openai_text.sse")])
    events = await collect(provider.stream(simple_request(temperature=0.2, max_tokens=50)))

    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["Hello", ", world", "!"]
    assert events[-2] == TextDone(text="Hello, world!")
    assert events[-1] == Finished(finish_reason="stop", usage=Usage(input_tokens=17, output_tokens=4))

    request = replay.requests[0]
    assert request.url.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers.get("x-stainless-retry-count") == "0"
    body = replay.body()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2 and body["max_completion_tokens"] == 50
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    call_msg = body["messages"][2]
    assert call_msg["content"] is None  # content:null only next to tool_calls
    assert call_msg["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'  # JSON *string*
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "18°C, sunny"}
    assert body["tools"][0]["function"]["name"] == "get_weather"


async def test_parallel_interleaved_tool_calls_with_late_name(make_provider):
    _, provider = make_provider([sse("openai_parallel_tools.sse")])
    events = await collect(provider.stream(simple_request()))

    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.call_id, s.name, s.index) for s in starts] == [("call_a1", "get_weather", 0), ("call_b2", "get_time", 1)]
    # The fragment that arrived before call 1's name is announced only after its start, not dropped.
    first_start_b = events.index(starts[1])
    deltas_b = [e.delta for e in events if isinstance(e, ToolCallDelta) and e.call_id == "call_b2"]
    assert deltas_b == ['{"tz"', ': "UTC"}']
    assert all(
        events.index(e) > first_start_b for e in events if isinstance(e, ToolCallDelta) and e.call_id == "call_b2"
    )

    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_a1", "get_weather", '{"city": "Paris"}'),
        ("call_b2", "get_time", '{"tz": "UTC"}'),
    ]
    # Calls are final only at the end of the stream, after every delta.
    last_delta = max(i for i, e in enumerate(events) if isinstance(e, ToolCallDelta))
    assert all(events.index(c) > last_delta for c in calls)
    assert events[-1] == Finished(finish_reason="tool-calls", usage=Usage(input_tokens=80, output_tokens=31))


async def test_error_object_after_http_200_is_an_error_and_not_retried(make_provider, sleeps):
    replay, provider = make_provider([sse("openai_midstream_error.sse"), sse("openai_text.sse")])
    events = await collect(provider.stream(simple_request()))

    assert events[0] == TextDelta(delta="Partial")
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].code == "server_error" and events[-1].retryable is True
    # Partial output was yielded: a retry would duplicate it, so none happens.
    assert len(replay.requests) == 1 and sleeps.waits == []


async def test_missing_finish_reason_is_an_error(make_provider):
    _, provider = make_provider([sse("openai_no_finish.sse")])
    events = await collect(provider.stream(simple_request()))
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["Cut", " off"]
    assert isinstance(events[-1], ErrorEvent) and events[-1].code == "missing_finish_reason"
    assert not any(isinstance(e, Finished) for e in events)


async def test_truncated_arguments_are_never_emitted_as_a_call(make_provider):
    # vLLM reports `tool_calls` for a call cut by max_tokens; its arguments do not parse.
    _, provider = make_provider([sse("openai_vllm_truncated_args.sse")], base_url="http://vllm.local/v1")
    events = await collect(provider.stream(simple_request()))
    assert not any(isinstance(e, ToolCallEvent) for e in events)
    assert any(isinstance(e, ToolCallStart) for e in events)  # it was announced while streaming
    assert events[-1].finish_reason == "error"
    # vLLM's cumulative usage on every chunk is replaced, not summed.
    assert events[-1].usage == Usage(input_tokens=50, output_tokens=16)


async def test_rate_limit_is_retried_honouring_retry_after(make_provider, sleeps):
    limited = error_reply(
        429,
        {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
        {"retry-after": "3"},
    )
    replay, provider = make_provider([limited, sse("openai_text.sse")])
    events = await collect(provider.stream(simple_request()))
    assert events[-1].finish_reason == "stop"
    assert len(replay.requests) == 2 and sleeps.waits == [3.0]


async def test_quota_429_is_not_retried(make_provider, sleeps):
    quota = error_reply(
        429,
        {
            "error": {
                "message": "You exceeded your current quota",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
    )
    replay, provider = make_provider([quota, sse("openai_text.sse")])
    events = await collect(provider.stream(simple_request()))
    assert events == [ErrorEvent(code="quota_exceeded", message=events[0].message, retryable=False)]
    assert len(replay.requests) == 1 and sleeps.waits == []


async def test_server_errors_exhaust_retries_with_backoff(make_provider, sleeps):
    boom = error_reply(500, {"error": {"message": "internal", "type": "server_error"}})
    replay, provider = make_provider([boom, boom, boom])
    events = await collect(provider.stream(simple_request()))
    assert isinstance(events[-1], ErrorEvent) and events[-1].retryable
    assert len(replay.requests) == 3
    assert sleeps.waits == [0.5, 1.0]  # exponential, full ceiling with rand=1.0


async def test_context_length_is_not_retried(make_provider):
    too_long = error_reply(
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, "
                "your messages resulted in 130000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    )
    replay, provider = make_provider([too_long])
    events = await collect(provider.stream(simple_request()))
    assert events[-1].code == "context_length_exceeded" and not events[-1].retryable
    assert len(replay.requests) == 1


async def test_compatible_server_gets_one_leading_system_message(make_provider):
    replay, provider = make_provider([sse("openai_text.sse")], base_url="http://llama.local/v1")
    request = ChatRequest(
        messages=(
            Message(role="system", content="A"),
            Message(role="user", content="hi"),
            Message(role="system", content="B"),
            Message(role="user", content="again"),
        ),
        options=RequestOptions(model="qwen3", max_tokens=10),
    )
    await collect(provider.stream(request))
    body = replay.body()
    assert replay.requests[0].url.host == "llama.local"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == "hi\n\n<system>\nB\n</system>\n\nagain"
    assert body["max_tokens"] == 10 and "max_completion_tokens" not in body


async def test_complete_collects_one_step(make_provider):
    _, provider = make_provider([sse("openai_parallel_tools.sse")])
    result = await provider.complete(simple_request())
    assert result.finish_reason == "tool-calls" and result.text == ""
    assert [c.name for c in result.tool_calls] == ["get_weather", "get_time"]
    assert [type(e).__name__ for e in result.events()] == ["ToolCallEvent", "ToolCallEvent", "Finished"]


def _chunk(content: str | None = None, finish: str | None = None) -> str:
    delta = {} if content is None else {"content": content}
    return json.dumps(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


async def test_the_event_stream_is_read_as_the_sse_format_says(make_provider):
    """Comments and other fields are skipped, an event's ``data:`` lines are joined, CRLF ends lines as LF does,
    one space after the colon is dropped, and nothing after ``[DONE]`` is read."""
    split = _chunk(" world").replace('"choices"', '\n"choices"', 1).split("\n")
    body = "\r\n".join(
        [
            ": keep-alive comment",
            "event: chunk",
            f"data: {_chunk('Hello')}",
            "",
            f"data:{split[0]}",  # no space after the colon
            f"data: {split[1]}",  # one event over two data lines
            "id: 7",
            "",
            f"data: {_chunk(finish='stop')}",
            "",
            "data: [DONE]",
            "",
            f"data: {_chunk('never read')}",
            "",
        ]
    ).encode()
    _, provider = make_provider([(200, body, SSE)])
    events = await collect(provider.stream(simple_request()))
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["Hello", " world"]
    assert events[-1] == Finished(finish_reason="stop", usage=Usage())


async def test_a_chunk_that_is_not_json_is_an_error(make_provider):
    body = f"data: {_chunk('Hi')}\n\ndata: {{not json\n\n".encode()
    _, provider = make_provider([(200, body, SSE)])
    events = await collect(provider.stream(simple_request()))
    assert events[0] == TextDelta(delta="Hi")
    assert isinstance(events[-1], ErrorEvent) and not any(isinstance(e, Finished) for e in events)


async def test_the_last_event_counts_without_a_closing_blank_line(make_provider):
    body = f"data: {_chunk('Hi')}\n\ndata: {_chunk(finish='length')}".encode()
    _, provider = make_provider([(200, body, SSE)])
    events = await collect(provider.stream(simple_request()))
    assert events[-1] == Finished(finish_reason="length", usage=Usage())
