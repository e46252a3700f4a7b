"""Gemini adapter: documented ``streamGenerateContent?alt=sse`` streams replayed through ``google.genai``."""

from __future__ import annotations

import base64

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
    ToolCallEvent,
    ToolCallStart,
    Usage,
)
from server.llm.providers.google import GoogleProvider

pytestmark = pytest.mark.fast

MODEL = "gemini-2.5-flash"


@pytest.fixture
def make_provider(httpx2_replay, retry_policy):
    def make(replies, **kwargs):
        replay, client = httpx2_replay(replies)
        kwargs.setdefault("retry_policy", retry_policy)
        kwargs.setdefault("base_url", "http://gemini-gateway.local/")
        return replay, GoogleProvider(api_key="g-test", http_client=client, **kwargs)

    return make


async def test_text_stream_usage_and_request(make_provider):
    replay, provider = make_provider([sse("google_text.sse")])
    events = await collect(provider.stream(simple_request(MODEL, temperature=0.3, max_tokens=64)))
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["Hello", ", world", "!"]
    assert events[-2] == TextDone(text="Hello, world!")
    # Latest usageMetadata wins; thinking tokens count as output.
    assert events[-1] == Finished(finish_reason="stop", usage=Usage(input_tokens=9, output_tokens=24))

    request = replay.requests[0]
    assert request.url.host == "gemini-gateway.local"
    assert request.url.path.endswith(f"/models/{MODEL}:streamGenerateContent")
    assert request.url.params["alt"] == "sse"
    assert request.headers["x-goog-api-key"] == "g-test"
    body = replay.body()
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert body["generationConfig"] == {"temperature": 0.3, "maxOutputTokens": 64}
    roles = [c["role"] for c in body["contents"]]
    assert roles == ["user", "model", "user", "model", "user"]
    call_part = body["contents"][1]["parts"][0]
    assert call_part["functionCall"] == {"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}}
    # No stored signature: the documented dummy goes on the first call of the turn.
    assert base64.b64decode(call_part["thoughtSignature"]) == b"skip_thought_signature_validator"
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"id": "call_1", "name": "get_weather", "response": {"output": "18°C, sunny"}}}
    ]


async def test_parallel_calls_without_ids_get_generated_ids_and_signature(make_provider):
    _, provider = make_provider([sse("google_tool_calls.sse")])
    events = await collect(provider.stream(simple_request(MODEL)))
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_weather", '{"city": "Paris"}'),
        ("get_time", '{"tz": "UTC"}'),
    ]
    assert all(c.id for c in calls) and calls[0].id != calls[1].id
    assert [s.call_id for s in starts] == [c.id for c in calls]
    assert calls[0].signature == "c2lnLTE=" and calls[0].signature_provider == "google"
    assert calls[1].signature is None
    # STOP with calls is a tool-calls finish (Gemini has no tool-call finish reason).
    assert events[-1] == Finished(finish_reason="tool-calls", usage=Usage(input_tokens=40, output_tokens=18))


async def test_stored_signature_is_replayed_on_its_own_part(make_provider):
    replay, provider = make_provider([sse("google_text.sse")])
    call = ToolCall(id="c1", name="get_weather", arguments="{}", signature="c2lnLTE=", signature_provider="google")
    foreign = ToolCall(id="c2", name="get_time", arguments="{}", signature="b3RoZXI=", signature_provider="anthropic")
    request = ChatRequest(
        messages=(
            Message(role="user", content="hi"),
            Message(role="assistant", tool_calls=(call, foreign)),
            Message(role="tool", tool_call_id="c1", content="ok"),
            Message(role="tool", tool_call_id="c2", content="ok"),
        ),
        options=RequestOptions(model=MODEL),
    )
    await collect(provider.stream(request))
    parts = replay.body()["contents"][1]["parts"]
    assert base64.b64decode(parts[0]["thoughtSignature"]) == b"sig-1"
    assert "thoughtSignature" not in parts[1]  # another provider's signature is never replayed here


async def test_blocked_prompt_is_content_filter(make_provider):
    _, provider = make_provider([sse("google_blocked.sse")])
    events = await collect(provider.stream(simple_request(MODEL)))
    assert events == [Finished(finish_reason="content-filter", usage=Usage(input_tokens=7, output_tokens=0))]


async def test_error_after_200_is_an_error_without_retry(make_provider, sleeps):
    replay, provider = make_provider([sse("google_midstream_error.sse"), sse("google_text.sse")])
    events = await collect(provider.stream(simple_request(MODEL)))
    assert events[0] == TextDelta(delta="Partial")
    assert isinstance(events[-1], ErrorEvent) and events[-1].code == "overloaded" and events[-1].retryable
    assert len(replay.requests) == 1 and sleeps.waits == []


async def test_missing_finish_reason_is_an_error(make_provider):
    _, provider = make_provider([sse("google_no_finish.sse")])
    events = await collect(provider.stream(simple_request(MODEL)))
    assert events[-1].code == "missing_finish_reason"


async def test_resource_exhausted_uses_retry_info_delay(make_provider, sleeps):
    exhausted = error_reply(
        429,
        {
            "error": {
                "code": 429,
                "message": "Resource has been exhausted.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "4.5s"}],
            }
        },
    )
    replay, provider = make_provider([exhausted, sse("google_text.sse")])
    events = await collect(provider.stream(simple_request(MODEL)))
    assert events[-1].finish_reason == "stop"
    assert sleeps.waits == [4.5] and len(replay.requests) == 2


async def test_daily_quota_is_not_retried(make_provider):
    quota = error_reply(
        429,
        {
            "error": {
                "code": 429,
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "status": "RESOURCE_EXHAUSTED",
            }
        },
    )
    replay, provider = make_provider([quota])
    events = await collect(provider.stream(simple_request(MODEL)))
    assert events[-1].code == "quota_exceeded" and len(replay.requests) == 1


async def test_base_url_from_environment(httpx2_replay, monkeypatch):
    monkeypatch.setenv("CHATSYNC_GOOGLE_BASE_URL", "http://from-env.local/")
    monkeypatch.setenv("GEMINI_API_KEY", "env-key")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    replay, client = httpx2_replay([sse("google_text.sse")])
    provider = GoogleProvider(http_client=client)
    await collect(provider.stream(simple_request(MODEL)))
    assert replay.requests[0].url.host == "from-env.local"
    assert replay.requests[0].headers["x-goog-api-key"] == "env-key"
