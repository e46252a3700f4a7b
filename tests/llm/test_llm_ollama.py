"""Ollama adapter: documented ``/api/chat`` NDJSON streams replayed through ``ollama.AsyncClient``."""

from __future__ import annotations

import pytest
from llm_replay import collect, error_reply, ndjson, simple_request

from server.llm import ErrorEvent, Finished, TextDelta, TextDone, ToolCallEvent, ToolCallStart, Usage
from server.llm.providers.ollama import OllamaProvider

pytestmark = pytest.mark.fast


@pytest.fixture
async def make_provider(httpx_replay, retry_policy):
    providers: list[OllamaProvider] = []

    def make(replies, **kwargs):
        replay, transport = httpx_replay(replies)
        kwargs.setdefault("retry_policy", retry_policy)
        provider = OllamaProvider(host="http://ollama.local:11434", transport=transport, **kwargs)
        providers.append(provider)
        return replay, provider

    yield make
    for provider in providers:
        await provider.aclose()


async def test_text_stream_usage_and_request(make_provider):
    replay, provider = make_provider([ndjson("ollama_text.ndjson")])
    events = await collect(provider.stream(simple_request("llama3.2", temperature=0.1, max_tokens=99)))
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["Hello", " there"]
    assert events[-2] == TextDone(text="Hello there")
    assert events[-1] == Finished(finish_reason="stop", usage=Usage(input_tokens=26, output_tokens=298))

    request = replay.requests[0]
    assert (request.url.host, request.url.port, request.url.path) == ("ollama.local", 11434, "/api/chat")
    body = replay.body()
    assert body["stream"] is True and body["model"] == "llama3.2"
    assert body["options"]["temperature"] == 0.1 and body["options"]["num_predict"] == 99
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    # Arguments are an object; the result names its tool, as the docs pair them.
    assert messages[2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert messages[3]["tool_name"] == "get_weather" and messages[3]["content"] == "18°C, sunny"
    assert body["tools"][0]["function"]["name"] == "get_weather"


async def test_whole_tool_calls_then_done_stop_is_tool_calls(make_provider):
    _, provider = make_provider([ndjson("ollama_tools.ndjson")])
    events = await collect(provider.stream(simple_request("llama3.2")))
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(s.name, s.index) for s in starts] == [("get_weather", 0), ("get_time", 1)]
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", '{"city": "Toronto"}'), ("get_time", "{}")]
    assert len({c.id for c in calls}) == 2
    assert events[-1] == Finished(finish_reason="tool-calls", usage=Usage(input_tokens=122, output_tokens=31))


async def test_error_line_after_output_is_an_error(make_provider, sleeps):
    replay, provider = make_provider([ndjson("ollama_error.ndjson"), ndjson("ollama_text.ndjson")])
    events = await collect(provider.stream(simple_request("llama3.2")))
    assert events[0] == TextDelta(delta="Par")
    assert isinstance(events[-1], ErrorEvent) and "unexpected EOF" in events[-1].message
    assert len(replay.requests) == 1 and sleeps.waits == []


async def test_stream_without_done_line_is_an_error(make_provider):
    _, provider = make_provider([ndjson("ollama_no_done.ndjson")])
    events = await collect(provider.stream(simple_request("llama3.2")))
    assert events[-1].code == "missing_finish_reason"


async def test_server_busy_503_is_retried(make_provider, sleeps):
    busy = error_reply(503, {"error": "server busy, please try again.  maximum pending requests exceeded"})
    replay, provider = make_provider([busy, ndjson("ollama_text.ndjson")])
    events = await collect(provider.stream(simple_request("llama3.2")))
    assert events[-1].finish_reason == "stop"
    assert len(replay.requests) == 2 and sleeps.waits == [0.5]


async def test_context_overflow_400_is_not_retried(make_provider):
    too_long = error_reply(400, {"error": "the input length exceeds the context length"})
    replay, provider = make_provider([too_long])
    events = await collect(provider.stream(simple_request("llama3.2")))
    assert events == [ErrorEvent(code="context_length_exceeded", message=events[0].message, retryable=False)]
    assert len(replay.requests) == 1
