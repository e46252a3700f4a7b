"""Registry, retry wrapper, error classification and event wire shapes."""

from __future__ import annotations

import pytest
from llm_replay import collect
from pydantic import TypeAdapter, ValidationError

from server.llm import (
    PROVIDER_IDS,
    ErrorEvent,
    Finished,
    Message,
    ProviderError,
    RetryPolicy,
    TextDelta,
    ToolCallStart,
    TurnEvent,
    default_provider_id,
    get_provider,
)
from server.llm.errors import classify_status, parse_retry_after
from server.llm.retry import with_retries

pytestmark = pytest.mark.fast


def test_registry_knows_every_provider_and_rejects_unknown(monkeypatch):
    assert PROVIDER_IDS == ("echo", "openai", "anthropic", "google", "ollama")
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(KeyError, match="unknown provider"):
        get_provider("mistral")
    for provider_id in ("openai", "anthropic", "google"):
        with pytest.raises(ProviderError) as info:
            get_provider(provider_id)
        assert info.value.code == "not_configured"


async def test_registry_reads_sdk_environment(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://gateway.local")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://llama.local/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OLLAMA_HOST", "http://box:1234")
    async with get_provider("anthropic") as anthropic_provider:
        assert str(anthropic_provider.client.base_url).startswith("http://gateway.local")
        assert anthropic_provider.client.max_retries == 0  # our RetryPolicy decides, not the SDK
    async with get_provider("openai") as openai_provider:
        # A local OpenAI-compatible server needs no key and gets the template-safe profile.
        assert str(openai_provider.client.base_url).startswith("http://llama.local/v1")
        assert openai_provider.profile.system_mode == "leading" and openai_provider.client.max_retries == 0
    async with get_provider("ollama") as ollama_provider:
        assert str(ollama_provider.client._client.base_url).startswith("http://box:1234")


def test_default_provider_is_echo_without_keys():
    assert default_provider_id({}) == "echo"
    assert default_provider_id({"GEMINI_API_KEY": "x"}) == "google"
    assert default_provider_id({"OPENAI_API_KEY": "x", "ANTHROPIC_API_KEY": "y"}) == "openai"


@pytest.mark.parametrize(
    ("status", "body", "code", "retryable"),
    [
        (429, {"error": {"type": "rate_limit_error"}}, "rate_limited", True),
        (429, {"error": {"code": "insufficient_quota"}}, "quota_exceeded", False),
        (529, {"error": {"type": "overloaded_error"}}, "overloaded", True),
        (503, {"error": {"status": "UNAVAILABLE"}}, "overloaded", True),
        (500, {}, "server_error", True),
        (408, {}, "timeout", True),
        (
            400,
            {"error": {"message": "prompt is too long: 191989 tokens > 180000 maximum"}},
            "context_length_exceeded",
            False,
        ),
        (
            400,
            {"error": {"code": "string_above_max_length", "message": "maximum context length"}},
            "invalid_request",
            False,
        ),
        (401, {}, "authentication", False),
        (413, {}, "request_too_large", False),
        (None, {"type": "error", "error": {"type": "api_error"}}, "server_error", True),
        (None, {"error": "weird"}, "stream_error", False),
    ],
)
def test_classification_table(status, body, code, retryable):
    error = classify_status(status, "msg", body)
    assert (error.code, error.retryable) == (code, retryable)


def test_retry_after_parsing():
    assert parse_retry_after({"Retry-After-Ms": "1500"}) == 1.5
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert parse_retry_after({}, {"error": {"details": [{"retryDelay": "34.4s"}]}}) == 34.4
    assert parse_retry_after({"retry-after": "soon"}) is None


class _Attempts:
    """An attempt factory failing with the given errors before succeeding."""

    def __init__(self, *errors: ProviderError, partial: bool = False) -> None:
        self.errors = list(errors)
        self.partial = partial
        self.calls = 0

    async def __call__(self):
        self.calls += 1
        if self.errors:
            if self.partial:
                yield TextDelta(delta="half")
            raise self.errors.pop(0)
        yield Finished(finish_reason="stop")


async def test_retries_transient_errors_with_exponential_backoff():
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    policy = RetryPolicy(max_retries=3, initial_delay=1.0, max_delay=3.0, sleep=sleep, rand=lambda: 1.0)
    attempts = _Attempts(*(ProviderError("server_error", "x", retryable=True) for _ in range(3)))
    events = await collect(with_retries(attempts, policy))
    assert events == [Finished(finish_reason="stop")] and attempts.calls == 4
    assert waits == [1.0, 2.0, 3.0]  # capped at max_delay


async def test_never_retries_after_output_or_for_permanent_errors():
    policy = RetryPolicy(sleep=lambda s: pytest.fail("must not sleep"))
    partial = _Attempts(ProviderError("overloaded", "x", retryable=True), partial=True)
    events = await collect(with_retries(partial, policy))
    assert events == [TextDelta(delta="half"), ErrorEvent(code="overloaded", message="x", retryable=True)]
    permanent = _Attempts(ProviderError("authentication", "bad key"))
    assert (await collect(with_retries(permanent, policy)))[-1].code == "authentication"
    assert partial.calls == 1 and permanent.calls == 1


def test_events_have_camel_case_wire_shape_and_validate():
    start = ToolCallStart(call_id="c", name="n", index=0)
    assert start.model_dump(by_alias=True) == {"type": "tool-call-start", "callId": "c", "name": "n", "index": 0}
    finished = TypeAdapter(TurnEvent).validate_python(
        {"type": "finished", "finishReason": "tool-calls", "usage": {"inputTokens": 1, "outputTokens": 2}}
    )
    assert isinstance(finished, Finished) and finished.usage.output_tokens == 2
    with pytest.raises(ValidationError):
        TypeAdapter(TurnEvent).validate_python({"type": "finished", "finishReason": "other"})


def test_message_role_rules():
    with pytest.raises(ValidationError):
        Message(role="tool", content="x")  # needs a tool_call_id
    with pytest.raises(ValidationError):
        Message(role="user", tool_call_id="c")
    with pytest.raises(ValidationError):
        Message(role="user", tool_calls=({"id": "a", "name": "b"},))
