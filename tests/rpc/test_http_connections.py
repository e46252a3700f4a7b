"""What a plain HTTP connection may cost (rpc/uvicorn_http.py), on a real server over raw sockets: a request's
headers and body have deadlines; an answer given before a body ended reads at most CHATSYNC_HTTP_DRAIN_BYTES
more of it; past CHATSYNC_MAX_HTTP_CONNECTIONS a connection waiting for nothing makes room, and when every one
is busy the new one is answered 503 and closed."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
from rawhttp import KERNEL_BUFFERS, raw, read_response, read_until_closed, request, send_until_stopped, until

from server import metrics
from server.rpc.uvicorn_http import http_gate

DRAIN = 64 * 1024


async def start(server_factory, sqlite_url, **overrides):
    settings = {
        "http_header_timeout_seconds": 0.5,
        "http_body_timeout_seconds": 0.5,
        "http_drain_bytes": DRAIN,
        "max_http_connections": 6,
        **overrides,
    }
    return await server_factory(sqlite_url, users=("alice",), **settings)


@pytest.fixture
async def server(server_factory, sqlite_url):
    return await start(server_factory, sqlite_url)


async def test_unfinished_headers_are_answered_408_and_closed(server):
    before = metrics.sample("chatsync_http_closes_total", {"reason": "header-timeout"})
    async with raw(server.url) as (reader, writer), raw(server.url) as (silent, _):
        writer.write(b"GET /healthz HTTP/1.1\r\nhost: te")
        answer = await read_until_closed(reader)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert orjson.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "TIMEOUT"
        assert (await read_until_closed(silent)).startswith(b"HTTP/1.1 408 ")  # one that never sent a byte
    assert metrics.sample("chatsync_http_closes_total", {"reason": "header-timeout"}) == before + 2
    async with httpx.AsyncClient(base_url=server.url) as http:
        scraped = (await http.get("/metrics")).text
    assert f'chatsync_http_closes_total{{reason="header-timeout"}} {before + 2}' in scraped


async def test_headers_in_time_are_served_on_a_kept_alive_connection(server):
    async with raw(server.url) as (reader, writer):
        for _ in range(3):
            writer.write(request("/healthz"))
            status, _headers, body = await read_response(reader)
            assert status == 200 and orjson.loads(body) == {"status": "ok"}


async def test_a_stalled_body_is_answered_408_and_the_app_sees_the_client_leave(server):
    token = server.tokens["alice"]
    async with raw(server.url) as (reader, writer):
        writer.write(request("/trpc/session.create", token, "POST", "content-length: 100\r\n") + b'{"title": "x')
        answer = await read_until_closed(reader)
    assert answer.startswith(b"HTTP/1.1 408 ")
    async with server.client("alice") as c:
        assert (await c.query("session.list", {}))["items"] == []  # the half-sent call changed nothing


async def test_a_body_sent_slowly_but_steadily_is_served(server_factory, sqlite_url):
    server = await start(server_factory, sqlite_url, http_body_timeout_seconds=2.0)
    token = server.tokens["alice"]
    body = orjson.dumps({"title": "slow but steady"})
    async with raw(server.url) as (reader, writer):
        writer.write(request("/trpc/session.create", token, "POST", f"content-length: {len(body)}\r\n"))
        for i in range(0, len(body), 3):  # longer than the deadline in all, each gap well inside it
            writer.write(body[i : i + 3])
            await asyncio.sleep(0.3)
        status, _headers, reply = await read_response(reader)
    assert status == 200 and orjson.loads(reply)["result"]["data"]["title"] == "slow but steady"


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_an_early_answer_reads_at_most_the_drain_bound_then_closes(server, framing):
    """An unauthenticated upload of a huge body: 401 at once, and the body is not read on and on."""
    extra = "content-length: 10000000000\r\n" if framing == "content-length" else "transfer-encoding: chunked\r\n"
    async with raw(server.url) as (reader, writer):
        writer.write(request("/files", None, "POST", extra + "content-type: multipart/form-data; boundary=b\r\n"))
        if framing == "chunked":
            writer.write(b"7fffffff\r\n")  # one chunk of 2 GiB
        answer = asyncio.create_task(read_until_closed(reader))
        sent = await send_until_stopped(writer, 1 << 30)
        got = await answer
    assert got.startswith(b"HTTP/1.1 401 ")
    assert sent < DRAIN + KERNEL_BUFFERS  # without a bound the server reads all 1 GiB (and on, for ever)


async def test_a_short_rest_is_drained_and_the_connection_carries_on(server):
    async with raw(server.url) as (reader, writer):
        body = b"x" * (DRAIN // 2)
        writer.write(request("/files", None, "POST", f"content-length: {len(body)}\r\n") + body)
        status, _headers, _body = await read_response(reader)
        assert status == 401
        writer.write(request("/healthz"))
        status, _headers, _body = await read_response(reader)
        assert status == 200


async def test_past_the_connection_bound_an_idle_connection_makes_room_and_a_busy_one_does_not(
    server_factory, sqlite_url
):
    server = await start(server_factory, sqlite_url, http_header_timeout_seconds=30, http_body_timeout_seconds=1)
    token = server.tokens["alice"]
    async with contextlib.AsyncExitStack() as stack:
        # Six connections that never finish their headers: each new one past the bound closes the oldest.
        idle = [await stack.enter_async_context(raw(server.url)) for _ in range(6)]
        for _reader, writer in idle:
            writer.write(b"GET / HTTP/1.1\r\n")
        async with raw(server.url) as (reader, writer):
            writer.write(request("/healthz"))
            assert (await read_response(reader))[0] == 200
        assert await read_until_closed(idle[0][0]) == b""  # the oldest made room: closed without an answer

        # Six requests whose bodies are on their way: nobody can make room, so the next is refused.
        for _reader, writer in idle[1:]:
            writer.close()
        busy = [await stack.enter_async_context(raw(server.url)) for _ in range(6)]
        for _reader, writer in busy:
            writer.write(request("/trpc/session.create", token, "POST", "content-length: 10\r\n") + b"{")
        gate = http_gate(server.server.config.http)
        await until(lambda: len(gate.live) == 6 and not gate.waiting)  # all six are busy with their requests
        async with raw(server.url) as (reader, writer):
            writer.write(request("/healthz"))
            status, headers, body = await read_response(reader)
            assert status == 503 and headers["retry-after"] == "2" and headers["connection"] == "close"
            assert orjson.loads(body)["error"]["code"] == "SERVICE_UNAVAILABLE"
            assert await read_until_closed(reader) == b""
        for reader, _writer in busy:  # their bodies never come: the deadline ends them
            assert (await read_until_closed(reader)).startswith(b"HTTP/1.1 408 ")
        async with raw(server.url) as (reader, writer):  # and there is room again
            writer.write(request("/healthz"))
            assert (await read_response(reader))[0] == 200


async def test_an_ordinary_client_reads_the_early_answer_to_a_long_upload(server):
    """A client that writes its whole body before reading (httpx) still reads the answer, though the server
    stops reading the rest: it flushes the answer and shuts its side first, and the client reads it when its
    write fails. (An asyncio-based client cannot: its transport closes itself on the failed write.)"""

    def post() -> httpx.Response:
        return httpx.post(f"{server.url}/files", content=b"x" * (64 << 20), timeout=30)

    reply = await asyncio.to_thread(post)
    assert reply.status_code == 401 and reply.json()["error"]["code"] == "UNAUTHORIZED"


async def test_an_answer_the_client_stops_reading_ends_its_connection(server):
    """A download nobody reads does not hold its connection (and its open file) for ever."""
    token = server.tokens["alice"]
    size = 16 << 20
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        uploaded = await http.post(
            "/files", files={"file": ("big.bin", b"\x01" * size)}, headers={"authorization": f"Bearer {token}"}
        )
    file_id = uploaded.json()["id"]
    before = metrics.sample("chatsync_http_closes_total", {"reason": "send-timeout"})
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # so the kernel does not take it all for us
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (urlsplit(server.url).hostname, urlsplit(server.url).port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
    try:
        writer.write(request(f"/files/{file_id}", token))
        await until(lambda: metrics.sample("chatsync_http_closes_total", {"reason": "send-timeout"}) == before + 1)
        got = await read_until_closed(reader)
    finally:
        writer.close()
    assert got.startswith(b"HTTP/1.1 200 ") and len(got) < size
