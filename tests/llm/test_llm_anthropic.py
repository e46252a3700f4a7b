"""Anthropic adapter: documented Messages SSE streams replayed through ``anthropic.AsyncAnthropic``."""

from __future__ import annotations

import pytest
from llm_replay import collect, error_reply, simple_request, sse

from server.llm import (
    ChatRequest,
    ErrorEvent,
    Finished,
    Message,
    RequestOptions,
    TextDelta,
    TextDone,
    ToolCall,
    ToolCallDelta,
    ToolCallEvent,
    ToolCallStart,
    Usage,
)
from server.llm.providers.anthropic import AnthropicProvider

pytestmark = pytest.mark.fast


@pytest.fixture
def make_provider(httpx2_replay, retry_policy):
    def make(replies, **kwargs):
        replay, client = httpx2_replay(replies)
        kwargs.setdefault("retry_policy", retry_policy)
        return replay, AnthropicProvider(api_key="sk-ant-test", http_client=client, **kwargs)

    return make


async def test_text_stream_with_ping_and_cumulative_usage(make_provider):
    replay, provider = make_provider([sse("anthropic_text.sse")])
    events = await collect(provider.stream(simple_request(max_tokens=300)))
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["Hello", "!"]
    assert events[-2] == TextDone(text="Hello!")
    # input = 472 + 100 cache reads; output = the cumulative message_delta count, not 2 + 15.
    assert events[-1] == Finished(finish_reason="stop", usage=Usage(input_tokens=572, output_tokens=15))

    request = replay.requests[0]
    assert request.url.path == "/v1/messages"
    assert "sk-ant-test" in (request.headers.get("x-api-key") or request.headers.get("authorization", ""))
    body = replay.body()
    assert body["system"] == "Be brief."
    assert all(m["role"] in ("user", "assistant") for m in body["messages"])
    assert body["max_tokens"] == 300 and body["stream"] is True
    assert body["tools"][0]["input_schema"]["required"] == ["city"]
    call_turn = body["messages"][1]
    assert call_turn["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}
    ]  # no empty text block before the call; input is an object
    results = body["messages"][2]
    assert results["role"] == "user"
    assert results["content"][0] == {"type": "tool_result", "tool_use_id": "call_1", "content": "18°C, sunny"}


async def test_text_then_two_tool_use_blocks(make_provider):
    _, provider = make_provider([sse("anthropic_tools.sse")])
    events = await collect(provider.stream(simple_request()))
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    # `index` is the call's position among the step's calls, not the content-block index.
    assert [(s.name, s.index) for s in starts] == [("get_weather", 0), ("get_time", 1)]
    deltas = [e.delta for e in events if isinstance(e, ToolCallDelta) and e.call_id == starts[0].call_id]
    assert deltas == ['{"city": "Pa', 'ris"}']  # the leading "" fragment is no event
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.id, c.arguments) for c in calls] == [
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", '{"city": "Paris"}'),
        ("toolu_01B2c3", '{"tz": "UTC"}'),
    ]
    assert TextDone(text="Let me check both.") in events
    assert events[-1].finish_reason == "tool-calls" and events[-1].usage.output_tokens == 89


async def test_error_event_mid_block_never_emits_the_call(make_provider, sleeps):
    replay, provider = make_provider([sse("anthropic_error_midblock.sse"), sse("anthropic_text.sse")])
    events = await collect(provider.stream(simple_request()))
    assert any(isinstance(e, ToolCallStart) for e in events)
    assert not any(isinstance(e, (ToolCallEvent, Finished)) for e in events)
    # The API's own message, not the whole event printed.
    assert events[-1] == ErrorEvent(code="overloaded", message="Overloaded", retryable=True)
    assert len(replay.requests) == 1 and sleeps.waits == []  # output was yielded: no retry


async def test_missing_message_delta_is_an_error(make_provider):
    _, provider = make_provider([sse("anthropic_no_stop.sse")])
    events = await collect(provider.stream(simple_request()))
    assert events[0] == TextDelta(delta="Half")
    assert events[-1].code == "missing_finish_reason"


async def test_529_overloaded_before_output_is_retried(make_provider, sleeps):
    overloaded = error_reply(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    replay, provider = make_provider([overloaded, sse("anthropic_text.sse")])
    events = await collect(provider.stream(simple_request()))
    assert events[-1].finish_reason == "stop"
    assert len(replay.requests) == 2 and sleeps.waits == [0.5]
    assert all(r.headers.get("x-stainless-retry-count") == "0" for r in replay.requests)  # SDK retries are off


async def test_spend_limit_429_is_not_retried(make_provider):
    spend = error_reply(
        429,
        {
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "limit",
                "details": {"error_code": "enforced_spend_limit_reached"},
            },
        },
    )
    replay, provider = make_provider([spend])
    events = await collect(provider.stream(simple_request()))
    assert events[-1].code == "quota_exceeded" and len(replay.requests) == 1


async def test_retry_after_above_the_cap_gives_up(make_provider, sleeps):
    limited = error_reply(
        429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, {"retry-after": "600"}
    )
    replay, provider = make_provider([limited])
    events = await collect(provider.stream(simple_request()))
    assert events[-1].code == "rate_limited" and events[-1].retryable
    assert len(replay.requests) == 1 and sleeps.waits == []


async def test_request_rules_foreign_ids_queue_and_prefill(make_provider):
    replay, provider = make_provider([sse("anthropic_text.sse")])
    request = ChatRequest(
        messages=(
            Message(role="assistant", content="Earlier answer."),  # trimmed window starts with the assistant
            Message(role="assistant", content="", tool_calls=(ToolCall(id="functions.Bash:0", name="bash"),)),
            Message(role="user", content="queued while the tool ran"),
            Message(role="tool", tool_call_id="functions.Bash:0", content="", is_error=True),
            Message(role="assistant", content="Partial prefill  "),
        ),
        options=RequestOptions(model="claude-opus-4-8"),
    )
    events = await collect(provider.stream(request))
    assert events[-1].type == "finished", events
    messages = replay.body()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    tool_use = messages[1]["content"][1]
    result, queued = messages[2]["content"]
    assert tool_use["id"] == result["tool_use_id"] and tool_use["id"].startswith("functions_Bash_0_")
    assert result["is_error"] is True and result["content"]  # never an empty tool_result
    assert queued == {"type": "text", "text": "queued while the tool ran"}  # text after the results
    assert messages[3]["content"] == [{"type": "text", "text": "Partial prefill"}]  # no trailing whitespace
