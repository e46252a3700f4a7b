"""The OpenAI adapter with the HTTP client it makes itself (the SDK's aiohttp transport), against a local stand-in
for the Chat Completions endpoint over real sockets: what the recorded-reply tests cannot show is that the
transport streams, that its errors are classified as the SDK's default client's were, and that a stream cut
off mid-answer is an error, not a short answer."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from llm_replay import collect, fixture_bytes, simple_request

from server.llm import ErrorEvent, Finished, TextDelta, Usage
from server.llm.providers.openai import OpenAIProvider

Handler = Callable[[web.Request], Any]


class StandIn:
    """``POST /v1/chat/completions`` on 127.0.0.1, answering each request with the next of ``replies`` (a
    handler) after checking it the way the service documents: a bearer key and a JSON body naming the model and
    the messages."""

    def __init__(self) -> None:
        self.replies: list[Handler] = []
        self.bodies: list[dict[str, Any]] = []
        self.url = ""
        self.closing = asyncio.Event()  # set when the test is over: a handler that holds a request returns

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer sk-test":
            return web.json_response({"error": {"message": "no key", "type": "invalid_request_error"}}, status=401)
        body = await request.json()
        if not isinstance(body.get("model"), str) or not body.get("messages"):
            return web.json_response({"error": {"message": "bad body", "type": "invalid_request_error"}}, status=400)
        self.bodies.append(body)
        result: web.StreamResponse = await self.replies.pop(0)(request)
        return result


@pytest.fixture
async def stand_in() -> AsyncIterator[StandIn]:
    server = StandIn()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.url = f"http://127.0.0.1:{port}/v1"
    yield server
    server.closing.set()
    await runner.cleanup()


def stream_of(name: str, *, cut_after: int | None = None) -> Handler:
    """A 200 event stream of the recorded fixture, one event per write; ``cut_after``: the connection is closed
    after that many events, with no end of the chunked body."""

    async def reply(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        events = [e + b"\n\n" for e in fixture_bytes(name).split(b"\n\n") if e.strip()]
        for n, event in enumerate(events):
            if cut_after is not None and n == cut_after:
                assert request.transport is not None
                request.transport.abort()  # the connection drops mid-answer
                return response
            await response.write(event)
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    return reply


def status(code: int, error: dict[str, Any], headers: dict[str, str] | None = None) -> Handler:
    async def reply(request: web.Request) -> web.StreamResponse:
        return web.json_response({"error": error}, status=code, headers=headers)

    return reply


def provider(url: str, retry_policy: Any) -> OpenAIProvider:
    return OpenAIProvider(api_key="sk-test", base_url=url, retry_policy=retry_policy)


async def test_an_answer_streams_over_the_default_client(stand_in: StandIn, retry_policy: Any) -> None:
    stand_in.replies = [stream_of("openai_text.sse")]
    p = provider(stand_in.url, retry_policy)
    try:
        events = await collect(p.stream(simple_request(temperature=0.2)))
    finally:
        await p.aclose()
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["Hello", ", world", "!"]
    assert events[-1] == Finished(finish_reason="stop", usage=Usage(input_tokens=17, output_tokens=4))
    body = stand_in.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "test-model" and body["temperature"] == 0.2
    assert [m["role"] for m in body["messages"]][-1] == "user"  # the history went, not the SDK's placeholder


async def test_a_rate_limit_is_retried_after_the_time_the_server_asks(
    stand_in: StandIn, retry_policy: Any, sleeps: Any
) -> None:
    error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
    stand_in.replies = [status(429, error, {"Retry-After": "3"}), stream_of("openai_text.sse")]
    p = provider(stand_in.url, retry_policy)
    try:
        events = await collect(p.stream(simple_request()))
    finally:
        await p.aclose()
    assert isinstance(events[-1], Finished) and events[-1].finish_reason == "stop"
    assert len(stand_in.bodies) == 2 and sleeps.waits == [3.0]


async def test_a_refused_connection_is_a_retryable_connection_error(retry_policy: Any) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = provider(f"http://127.0.0.1:{port}/v1", retry_policy)
    try:
        events = await collect(p.stream(simple_request()))
    finally:
        await p.aclose()
    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert events[0].code == "connection_error" and events[0].retryable


async def test_a_stream_cut_off_mid_answer_is_an_error_after_what_arrived(
    stand_in: StandIn, retry_policy: Any, sleeps: Any
) -> None:
    stand_in.replies = [stream_of("openai_text.sse", cut_after=2)]
    p = provider(stand_in.url, retry_policy)
    try:
        events = await collect(p.stream(simple_request()))
    finally:
        await p.aclose()
    deltas = [e.delta for e in events if isinstance(e, TextDelta)]
    assert deltas and "".join(deltas) != "Hello, world!"  # some text came, not all of it
    assert isinstance(events[-1], ErrorEvent) and events[-1].code == "connection_error", events[-1]
    assert events[-1].retryable and len(stand_in.bodies) == 1  # partial output: not retried


async def test_a_server_that_never_answers_is_a_timeout(stand_in: StandIn, retry_policy: Any) -> None:
    async def silent(request: web.Request) -> web.StreamResponse:
        await stand_in.closing.wait()  # no answer while the client waits
        return web.Response(status=204)

    stand_in.replies = [silent] * 3  # every attempt the retry policy makes (no output yet: retryable)
    p = provider(stand_in.url, retry_policy)
    p.client = p.client.with_options(timeout=0.2)
    try:
        events = await collect(p.stream(simple_request()))
    finally:
        await p.aclose()
    assert len(events) == 1 and isinstance(events[0], ErrorEvent), events
    assert events[0].code == "timeout" and events[0].retryable and len(stand_in.bodies) == 3


def test_the_recorded_stream_has_text_after_the_cut() -> None:
    """The cut-off test closes the connection after two events: the recorded stream has text after them."""
    events = [e for e in fixture_bytes("openai_text.sse").split(b"\n\n") if e.strip()]
    contents = [(json.loads(e[6:])["choices"] or [{}])[0].get("delta", {}).get("content") for e in events[:-1]]
    assert any(contents[2:])
