"""The offline echo model: streaming pace and every directive of its documented syntax."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from llm_replay import collect

from server.llm import (
    ChatRequest,
    ErrorEvent,
    Finished,
    Message,
    RequestOptions,
    RetryPolicy,
    TextDelta,
    TextDone,
    ToolCall,
    ToolCallEvent,
    ToolCallStart,
    ToolDefinition,
    get_provider,
)
from server.llm.providers.echo import EchoProvider, parse_directives

pytestmark = pytest.mark.fast


def req(*messages: Message) -> ChatRequest:
    return ChatRequest(messages=messages, options=RequestOptions(model="echo"))


def user(text: str) -> Message:
    return Message(role="user", content=text)


@pytest.fixture
def echo() -> EchoProvider:
    return EchoProvider(delay=0)


async def test_streams_the_last_user_message_word_by_word(echo):
    events = await collect(
        echo.stream(req(user("first"), Message(role="assistant", content="x"), user("hello  big\nworld")))
    )
    deltas = [e.delta for e in events if isinstance(e, TextDelta)]
    assert deltas == ["hello", "  big", "\nworld"]
    assert events[-2] == TextDone(text="hello  big\nworld")
    assert events[-1].finish_reason == "stop" and events[-1].usage.output_tokens == 3


async def test_tool_directives_make_parallel_calls(echo):
    events = await collect(echo.stream(req(user('Checking.\n/tool get_weather {"city": "Paris"}\n/tool now'))))
    assert TextDone(text="Checking.") in events
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(s.name, s.index) for s in starts] == [("get_weather", 0), ("now", 1)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Paris"}), ("now", {})]
    assert len({c.id for c in calls}) == 2
    assert events[-1].finish_reason == "tool-calls"


async def test_tool_round_trip_ends_with_stop_quoting_the_output(echo):
    first = await echo.complete(req(user("/tool get_time {}")))
    (tc,) = first.tool_calls
    history = (
        user("/tool get_time {}"),
        Message(role="assistant", tool_calls=(tc,)),
        Message(role="tool", tool_call_id=tc.id, content="12:00 UTC"),
    )
    second = await echo.complete(req(*history))
    assert second.finish_reason == "stop" and second.tool_calls == ()
    assert "get_time" in second.text and "12:00 UTC" in second.text


async def test_fail_directive_non_retryable(echo):
    events = await collect(echo.stream(req(user("/fail quota gone"))))
    assert events == [ErrorEvent(code="echo_failure", message="quota gone", retryable=False)]


async def test_fail_after_words_is_a_mid_stream_error(echo):
    events = await collect(echo.stream(req(user("one two three four\n/fail retryable after=2"))))
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["one", " two"]
    assert events[-1] == ErrorEvent(code="echo_failure", message=events[-1].message, retryable=True)
    assert not any(isinstance(e, Finished) for e in events)


async def test_fail_times_recovers_through_the_retry_policy():
    waits: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    echo = EchoProvider(delay=0, retry_policy=RetryPolicy(max_retries=2, sleep=no_sleep, rand=lambda: 1.0))
    events = await collect(echo.stream(req(user("answer\n/fail retryable times=1"))))
    assert events[-1].finish_reason == "stop" and TextDone(text="answer") in events
    assert waits == [0.5]


async def test_length_directive(echo):
    events = await collect(echo.stream(req(user("cut here\n/length"))))
    assert events[-2] == TextDone(text="cut here") and events[-1].finish_reason == "length"


async def test_describe_directive_names_the_model_prompt_and_tools(echo):
    tool = ToolDefinition(name="calculator", description="adds")
    asked = ChatRequest(
        messages=(user("Hi\n/describe"),),
        options=RequestOptions(model="echo-big", system_prompt="Answer in French."),
        tools=(tool,),
    )
    events = await collect(echo.stream(asked))
    assert events[-2] == TextDone(text="Hi [model echo-big; system prompt: Answer in French.; tools: calculator]")
    bare = await collect(echo.stream(req(user("/describe"))))
    assert bare[-2] == TextDone(text="[model echo; system prompt: none; tools: none]")


async def test_malformed_tool_directive_is_an_invalid_request(echo):
    events = await collect(echo.stream(req(user("/tool calc [1, 2]"))))
    assert events[-1].code == "invalid_request" and not events[-1].retryable


async def test_pace_is_configurable_and_cancellable():
    slow = EchoProvider(delay=0.02)
    started = time.perf_counter()
    events = await collect(slow.stream(req(user("a b c d e"))))
    assert time.perf_counter() - started >= 0.09 and len([e for e in events if isinstance(e, TextDelta)]) == 5

    async def consume() -> None:
        async for _ in EchoProvider(delay=10).stream(req(user("never ends"))):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # an abort stops the stream promptly


def test_directive_parser():
    d = parse_directives("hi\n  /tool x {\"a\": 1}\n/fail retryable after=3 times=2 slow down\n/length\nbye")
    assert d.text == "hi\nbye" and d.tools == [("x", '{"a": 1}')]
    assert (d.fail, d.fail_retryable, d.fail_after, d.fail_times, d.fail_message) == (True, True, 3, 2, "slow down")
    assert d.length
    assert parse_directives("/failure is not a directive").text == "/failure is not a directive"


def test_registry_builds_echo_by_default():
    provider = get_provider("echo", delay=0)
    assert isinstance(provider, EchoProvider) and provider.delay == 0
    assert ToolCall(id="a", name="b").arguments == "{}"
