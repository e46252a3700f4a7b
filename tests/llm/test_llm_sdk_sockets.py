"""The OpenAI, Anthropic and Gemini adapters with the HTTP client each makes itself (its SDK's aiohttp
transport), against a local stand-in for the API's streaming endpoint over real sockets: what the recorded-reply
tests cannot show is that the transport streams, that its errors are classified as those of the SDK's httpx
client are, that each attempt of the retry policy is one request, that a stream cut off mid-answer is an error,
not a short answer, and (through a server) that a session's sampling options reach each API as it takes them and
that a stream that goes silent ends its run with ``timeout`` (``CHATSYNC_PROVIDER_IDLE_TIMEOUT_SECONDS``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest
from aiohttp import web
from llm_replay import ANTHROPIC_REFUSED, collect, fixture_bytes, simple_request

from server.llm import ErrorEvent, Finished, TextDelta
from server.llm.convert import to_anthropic_request
from server.llm.providers.anthropic import AnthropicProvider
from server.llm.providers.base import Provider
from server.llm.providers.google import GoogleProvider
from server.llm.providers.openai import OpenAIProvider
from tests.engine.engine_helpers import FAST, idle, subscribe

Handler = Callable[[web.Request], Any]


@dataclass(frozen=True)
class Api:
    """One provider's endpoint as the stand-in serves it, and what its recorded text stream holds."""

    name: str
    path: str
    authorized: Callable[[web.Request], bool]
    make: Callable[[str, Any], Provider]  # (base URL, retry policy) -> the adapter, with the client it makes
    # The model and the conversation of a streaming request as the API documents it, or None if it is not one.
    conversation: Callable[[web.Request, dict[str, Any]], tuple[Any, Any] | None]
    # Gives the adapter's client a timeout of that many seconds.
    time_out: Callable[[Any, float], None]
    # The sampling options of a request body, in OpenAI's names.
    sampling: Callable[[dict[str, Any]], dict[str, Any]]
    text_stream: str  # a recorded fixture
    text: str  # the answer it streams
    cut_after: int  # events sent before the connection drops: some text, not all
    rate_limited: dict[str, Any]  # a 429's body
    refused: tuple[str, ...] = ()  # body keys the API answers with a 400 invalid_request_error
    filler: bytes = b""  # an event with the text "~" that may follow the first ``cut_after`` events of text_stream


def chat_conversation(request: web.Request, body: dict[str, Any]) -> tuple[Any, Any] | None:
    """Chat Completions and Messages: the model and the messages in the body, ``stream: true``."""
    return (body.get("model"), body.get("messages")) if body.get("stream") is True else None


def gemini_conversation(request: web.Request, body: dict[str, Any]) -> tuple[Any, Any] | None:
    """streamGenerateContent: the model in the path, server-sent events asked for with ``alt=sse``, and the
    conversation in ``contents``, each turn a user's or the model's."""
    contents = body.get("contents")
    if request.query.get("alt") != "sse" or not isinstance(contents, list):
        return None
    if not all(isinstance(c, dict) and c.get("role") in ("user", "model") for c in contents):
        return None
    return request.match_info["model"], contents


def sdk_time_out(p: Any, seconds: float) -> None:
    p.client = p.client.with_options(timeout=seconds)


def gemini_time_out(p: Any, seconds: float) -> None:
    # genai.Client has no with_options; its HttpOptions.timeout (milliseconds) is read at each request.
    p.client._api_client._http_options.timeout = int(seconds * 1000)


def top_level_sampling(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in ("temperature", "top_p") if k in body}


def gemini_sampling(body: dict[str, Any]) -> dict[str, Any]:
    config = body.get("generationConfig", {})
    return {k: config[g] for k, g in (("temperature", "temperature"), ("top_p", "topP")) if g in config}


OPENAI = Api(
    "openai",
    "/v1/chat/completions",
    lambda r: r.headers.get("Authorization") == "Bearer sk-test",
    lambda url, policy: OpenAIProvider(api_key="sk-test", base_url=url + "/v1", retry_policy=policy),
    chat_conversation,
    sdk_time_out,
    top_level_sampling,
    "openai_text.sse",
    "Hello, world!",
    2,
    {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
    filler=b'data: {"id":"chatcmpl-9zTm2","object":"chat.completion.chunk","created":1724600000,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{"content":"~"},"logprobs":null,"finish_reason":null}],"usage":null}',
)
ANTHROPIC = Api(
    "anthropic",
    "/v1/messages",
    # The key in x-api-key, or as a bearer token (what this SDK version sends).
    lambda r: r.headers.get("x-api-key") == "sk-test" or r.headers.get("Authorization") == "Bearer sk-test",
    lambda url, policy: AnthropicProvider(api_key="sk-test", base_url=url, retry_policy=policy),
    chat_conversation,
    sdk_time_out,
    top_level_sampling,
    "anthropic_text.sse",
    "Hello!",
    4,
    {"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded"}},
    ANTHROPIC_REFUSED,
    filler=b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"~"}}',
)
GOOGLE = Api(
    "google",
    "/v1/models/{model}:streamGenerateContent",  # v1: the API version the SDK speaks (google-genai 3.6's default)
    lambda r: r.headers.get("x-goog-api-key") == "sk-test",
    lambda url, policy: GoogleProvider(api_key="sk-test", base_url=url, retry_policy=policy),
    gemini_conversation,
    gemini_time_out,
    gemini_sampling,
    "google_text.sse",
    "Hello, world!",
    2,
    {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED"},
    filler=b'data: {"candidates": [{"content": {"parts": [{"text": "~"}],"role": "model"},"index": 0}]}',
)
APIS = [OPENAI, ANTHROPIC, GOOGLE]


class StandIn:
    """The API's streaming endpoint on 127.0.0.1, answering each request with the next of ``replies`` (a
    handler) after checking it the way the service documents: its key header, a streaming request naming the
    model and a conversation that is not empty, with none of the body keys the API refuses."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.replies: list[Handler] = []
        self.bodies: list[dict[str, Any]] = []
        self.conversations: list[tuple[str, list[dict[str, Any]]]] = []  # (model, messages) of each body
        self.url = ""
        self.closing = asyncio.Event()  # set when the test is over: a handler that holds a request returns

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not self.api.authorized(request):
            return web.json_response({"error": {"message": "no key", "type": "authentication_error"}}, status=401)
        body = await request.json()
        model, messages = self.api.conversation(request, body) or (None, None)
        if not isinstance(model, str) or not isinstance(messages, list) or not messages:
            return web.json_response({"error": {"message": "bad body", "type": "invalid_request_error"}}, status=400)
        extra = [k for k in self.api.refused if k in body]
        if extra:
            error = {"message": f"{extra[0]}: Extra inputs are not permitted", "type": "invalid_request_error"}
            return web.json_response({"type": "error", "error": error}, status=400)
        self.bodies.append(body)
        self.conversations.append((model, messages))
        result: web.StreamResponse = await self.replies.pop(0)(request)
        return result

    def provider(self, retry_policy: Any) -> Provider:
        return self.api.make(self.url, retry_policy)


@contextlib.asynccontextmanager
async def serving(api: Api) -> AsyncIterator[StandIn]:
    server = StandIn(api)
    app = web.Application()
    app.router.add_post(server.api.path, server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        server.closing.set()
        await runner.cleanup()


@pytest.fixture(params=APIS, ids=lambda api: api.name)
async def stand_in(request: pytest.FixtureRequest) -> AsyncIterator[StandIn]:
    async with serving(request.param) as server:
        yield server


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


async def test_an_answer_streams_over_the_default_client(stand_in: StandIn, retry_policy: Any) -> None:
    stand_in.replies = [stream_of(stand_in.api.text_stream)]
    p = stand_in.provider(retry_policy)
    try:
        events = await collect(p.stream(simple_request(max_tokens=300)))
    finally:
        await p.aclose()
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == stand_in.api.text, events
    assert isinstance(events[-1], Finished) and events[-1].finish_reason == "stop"
    model, messages = stand_in.conversations[0]
    assert model == "test-model"
    assert messages[-1]["role"] == "user"  # the history went, not the SDK's placeholder
    assert len(messages) > 2


async def test_a_rate_limit_is_retried_after_the_time_the_server_asks(
    stand_in: StandIn, retry_policy: Any, sleeps: Any
) -> None:
    stand_in.replies = [
        status(429, stand_in.api.rate_limited, {"Retry-After": "3"}),
        stream_of(stand_in.api.text_stream),
    ]
    p = stand_in.provider(retry_policy)
    try:
        events = await collect(p.stream(simple_request()))
    finally:
        await p.aclose()
    assert isinstance(events[-1], Finished) and events[-1].finish_reason == "stop"
    assert len(stand_in.bodies) == 2 and sleeps.waits == [3.0]


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_refused_connection_is_a_retryable_connection_error(api: Api, retry_policy: Any) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = api.make(f"http://127.0.0.1:{port}", retry_policy)
    try:
        events = await collect(p.stream(simple_request()))
    finally:
        await p.aclose()
    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert events[0].code == "connection_error" and events[0].retryable


async def test_a_connection_dropped_before_the_answer_is_retried_by_the_policy_alone(
    stand_in: StandIn, retry_policy: Any, sleeps: Any
) -> None:
    """Each attempt of the retry policy is one request: no SDK retries on its own (google-genai's aiohttp
    transport does, after sleeping 1-10 s, unless the adapter sets its retry options)."""

    async def drop(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.abort()  # the request was read; no answer comes
        return web.Response(status=204)

    stand_in.replies = [drop] * 3
    p = stand_in.provider(retry_policy)
    try:
        events = await collect(p.stream(simple_request()))
    finally:
        await p.aclose()
    assert len(events) == 1 and isinstance(events[0], ErrorEvent), events
    assert events[0].code == "connection_error" and events[0].retryable
    assert len(sleeps.waits) == 2 and len(stand_in.bodies) == 3


async def test_a_stream_cut_off_mid_answer_is_an_error_after_what_arrived(
    stand_in: StandIn, retry_policy: Any, sleeps: Any
) -> None:
    stand_in.replies = [stream_of(stand_in.api.text_stream, cut_after=stand_in.api.cut_after)]
    p = stand_in.provider(retry_policy)
    try:
        events = await collect(p.stream(simple_request()))
    finally:
        await p.aclose()
    text = "".join(e.delta for e in events if isinstance(e, TextDelta))
    assert text and text != stand_in.api.text  # some text came, not all of it
    assert isinstance(events[-1], ErrorEvent) and events[-1].code == "connection_error", events[-1]
    assert events[-1].retryable and len(stand_in.bodies) == 1  # partial output: not retried


async def test_a_server_that_never_answers_is_a_timeout(stand_in: StandIn, retry_policy: Any, sleeps: Any) -> None:
    async def silent(request: web.Request) -> web.StreamResponse:
        await stand_in.closing.wait()  # no answer while the client waits
        return web.Response(status=204)

    stand_in.replies = [silent] * 3  # every attempt the retry policy makes (no output yet: retryable)
    p: Any = stand_in.provider(retry_policy)
    stand_in.api.time_out(p, 0.2)
    try:
        events = await collect(p.stream(simple_request()))
    finally:
        await p.aclose()
    assert len(events) == 1 and isinstance(events[0], ErrorEvent), events
    # Retried as the policy says (two waits between three attempts); how many of the requests the stand-in read
    # before the client gave up depends on the machine's load, so that is not counted.
    assert events[0].code == "timeout" and events[0].retryable and len(sleeps.waits) == 2


# What makes a server's adapter talk to the stand-in at ``url``.
SERVER_ENV = {
    "openai": lambda url: {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": url + "/v1"},
    "anthropic": lambda url: {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": url},
    "google": lambda url: {"GOOGLE_API_KEY": "sk-test", "CHATSYNC_GOOGLE_BASE_URL": url},
}


async def test_a_session_with_temperature_and_top_p_gets_its_answer(
    stand_in: StandIn, live: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a server: the session's sampling options go to OpenAI and Gemini and are left out of Anthropic's
    request, which its API refuses with them."""
    for name, value in SERVER_ENV[stand_in.api.name](stand_in.url).items():
        monkeypatch.setenv(name, value)
    stand_in.replies = [stream_of(stand_in.api.text_stream)]
    async with live.client() as c:
        s = await c.mutation(
            "session.create",
            {"provider": stand_in.api.name, "model": "test-model", "defaults": {"temperature": 0.7, "topP": 0.9}},
        )
        await c.mutation("message.send", {"sessionId": s["id"], "content": "hi"})
        snap = await idle(c, s["id"])
    answer = snap["messages"][-1]
    assert (answer["status"], answer["content"], answer["error"]) == ("complete", stand_in.api.text, None), answer
    sampling = stand_in.api.sampling(stand_in.bodies[0])
    assert sampling == ({} if stand_in.api.refused else {"temperature": 0.7, "top_p": 0.9})


async def test_the_anthropic_stand_in_refuses_sampling_options(retry_policy: Any) -> None:
    """As the API does in the version the SDK speaks: a body with any of them is a 400 invalid_request_error,
    whatever the value, so an adapter that sends one fails here."""
    async with serving(ANTHROPIC) as server:
        p: Any = server.provider(retry_policy)
        try:
            for key, value in (("temperature", 1.0), ("top_p", 0.9), ("top_k", 40)):
                server.replies = [stream_of(ANTHROPIC.text_stream)]
                body = {**to_anthropic_request(simple_request()), "stream": True}
                with pytest.raises(anthropic.BadRequestError) as err:
                    await p.client.messages.create(**body, extra_body={key: value})
                assert err.value.body["error"]["type"] == "invalid_request_error"
                assert key in err.value.body["error"]["message"]
        finally:
            await p.aclose()
        assert server.bodies == []


def events_of(name: str) -> list[bytes]:
    return [e + b"\n\n" for e in fixture_bytes(name).split(b"\n\n") if e.strip()]


def closed(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


def silent_after(stand_in: StandIn, hung_up: asyncio.Event) -> Handler:
    """The first ``cut_after`` events of the text stream (some text), then nothing, the connection held open until
    the client closes it (then ``hung_up`` is set) or the test ends."""

    async def reply(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for event in events_of(stand_in.api.text_stream)[: stand_in.api.cut_after]:
            await response.write(event)
        while not closed(request) and not stand_in.closing.is_set():
            await asyncio.sleep(0.02)
        if closed(request):
            hung_up.set()
        return response

    return reply


async def idle_limited(server_factory: Any, sqlite_url: str, api: Api, url: str, mp: Any, seconds: float) -> Any:
    """A server whose adapters talk to the stand-in at ``url``, with an idle limit of ``seconds``."""
    for name, value in SERVER_ENV[api.name](url).items():
        mp.setenv(name, value)
    return await server_factory(sqlite_url, provider_idle_timeout_seconds=seconds, **FAST)


@contextlib.asynccontextmanager
async def asking(live: Any, api: Api, **options: Any) -> AsyncIterator[tuple[Any, str, Any]]:
    """A client of ``live`` that asked a new session on ``api``'s provider (with ``options``) a question: (client,
    session id, the session's events)."""
    async with live.client() as c:
        s = await c.mutation("session.create", {"provider": api.name, "model": "test-model", **options})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": "hi"})
        yield c, s["id"], st


async def test_a_stream_that_goes_silent_fails_its_run_with_a_timeout(
    stand_in: StandIn, server_factory: Any, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider sends some text, then nothing, keeping the connection open: after the idle limit the run fails
    with a retryable ``timeout``, the text that came kept, the queue paused, and the stream's connection closed."""
    live = await idle_limited(server_factory, sqlite_url, stand_in.api, stand_in.url, monkeypatch, 1)
    hung_up = asyncio.Event()
    stand_in.replies = [silent_after(stand_in, hung_up)]
    async with asking(live, stand_in.api) as (c, sid, st):
        await c.mutation("message.send", {"sessionId": sid, "content": "queued meanwhile"})
        failed = await st.until(lambda e: e["type"] == "run-failed")
        snap = await idle(c, sid)
    error = {"code": "timeout", "message": failed["error"]["message"], "retryable": True}
    assert failed["error"] == error, failed
    answer = snap["messages"][-1]
    assert (answer["status"], answer["finishReason"], answer["error"]) == ("error", "error", error), answer
    partial = answer["content"]
    assert partial and stand_in.api.text.startswith(partial) and partial != stand_in.api.text, partial
    assert st.text_of(answer["id"]) == partial
    assert snap["session"]["queuePaused"] is True and [q["content"] for q in snap["queue"]] == ["queued meanwhile"]
    await asyncio.wait_for(hung_up.wait(), 10)  # the client closed the stream's connection
    assert len(stand_in.bodies) == 1  # text came: not retried


async def test_a_blocking_call_whose_provider_goes_silent_fails_with_a_timeout(
    stand_in: StandIn, server_factory: Any, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session with streaming disabled makes the same call and reads the same stream: the idle limit counts
    the same events."""
    live = await idle_limited(server_factory, sqlite_url, stand_in.api, stand_in.url, monkeypatch, 1)
    hung_up = asyncio.Event()
    stand_in.replies = [silent_after(stand_in, hung_up)]
    async with asking(live, stand_in.api, disableStreaming=True) as (c, sid, st):
        failed = await st.until(lambda e: e["type"] == "run-failed")
        snap = await idle(c, sid)
    assert (failed["error"]["code"], failed["error"]["retryable"]) == ("timeout", True), failed
    answer = snap["messages"][-1]
    assert (answer["status"], answer["content"], answer["error"]) == ("error", "", failed["error"]), answer
    await asyncio.wait_for(hung_up.wait(), 10)


async def test_a_stream_that_keeps_sending_is_not_cut_however_long(
    stand_in: StandIn, server_factory: Any, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each event comes within the idle limit, the whole answer takes longer than it: the answer completes."""
    limit, gap, fillers = 1.5, 0.3, 8  # the fillers alone take 2.4 s, past the limit; each gap well within it
    events = events_of(stand_in.api.text_stream)
    head, tail = events[: stand_in.api.cut_after], events[stand_in.api.cut_after :]

    async def slow(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for event in head:
            await response.write(event)
        for _ in range(fillers):
            await asyncio.sleep(gap)  # the provider generating the next token
            await response.write(stand_in.api.filler + b"\n\n")
        for event in tail:
            await response.write(event)
        await response.write_eof()
        return response

    live = await idle_limited(server_factory, sqlite_url, stand_in.api, stand_in.url, monkeypatch, limit)
    stand_in.replies = [slow]
    async with asking(live, stand_in.api) as (c, sid, st):
        finished = await st.until(lambda e: e["type"] in ("run-finished", "run-failed"), timeout=30)
        snap = await idle(c, sid)
    assert finished["type"] == "run-finished" and finished["finishReason"] == "stop", finished
    answer = snap["messages"][-1]
    assert (answer["status"], answer["error"]) == ("complete", None), answer
    assert "~" * fillers in answer["content"] and answer["content"].replace("~", "") == stand_in.api.text


async def test_an_abort_while_the_provider_is_silent_is_an_abort(
    stand_in: StandIn, server_factory: Any, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = await idle_limited(server_factory, sqlite_url, stand_in.api, stand_in.url, monkeypatch, 30)
    hung_up = asyncio.Event()
    stand_in.replies = [silent_after(stand_in, hung_up)]
    async with asking(live, stand_in.api) as (c, sid, st):
        await st.until_type("text-delta")
        assert (await c.mutation("run.abort", {"sessionId": sid})) == {"aborted": True}
        ended = await st.until(lambda e: e["type"] in ("run-aborted", "run-failed"))
        snap = await idle(c, sid)
    assert ended["type"] == "run-aborted", ended
    answer = snap["messages"][-1]
    assert (answer["status"], answer["finishReason"], answer["error"]) == ("interrupted", "aborted", None), answer
    assert answer["content"] and stand_in.api.text.startswith(answer["content"])
    await asyncio.wait_for(hung_up.wait(), 10)
