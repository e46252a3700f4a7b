"""Stalled and hostile HTTP clients cannot lock users out: a real ``chatsync serve`` whose descriptor limit is
lowered (soft 128, hard 256), hundreds of connections with half-sent headers and uploads whose bodies stall.
The server raises its soft limit and says so; every such connection is closed by a deadline or to make room;
a stalled upload leaves no file row and no bytes behind; a normal user is answered throughout; and a stranger's
never-ending upload is answered 401 and closed after at most the drain bound."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import httpx
import pytest
from rawhttp import KERNEL_BUFFERS, raw, read_until_closed, request, send_until_stopped
from servers import ServerProcess
from testkit import need

HALF_OPEN = 300
STALLED_UPLOADS = 20
DRAIN = 64 * 1024
BOUNDARY = "b0undary"


def stalled_upload_head(token: str) -> bytes:
    """An upload that declares 1 MiB and sends its headers and the first 200 KiB of the file."""
    preamble = (
        f'--{BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="big.bin"\r\n'
        "content-type: application/octet-stream\r\n\r\n"
    ).encode()
    extra = f"content-type: multipart/form-data; boundary={BOUNDARY}\r\ncontent-length: {1 << 20}\r\n"
    return request("/files", token, "POST", extra) + preamble + b"\x01" * (200 * 1024)


def uploads_in_progress(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT count(*) FROM file_blobs").fetchone()[0]


async def wait_for(predicate, what: str, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while not await asyncio.to_thread(predicate):
            await asyncio.sleep(0.05)


async def test_stalled_clients_are_closed_and_users_are_answered_throughout(tmp_path: Path) -> None:
    prlimit = need("prlimit", "the test lowers the server's descriptor limit with it")
    with ServerProcess(
        tmp_path,
        users=("alice",),
        command_prefix=(prlimit, "--nofile=128:256", "--"),
        LOG_LEVEL="info",
        HTTP_HEADER_TIMEOUT_SECONDS="2",
        HTTP_BODY_TIMEOUT_SECONDS="3",
        HTTP_DRAIN_BYTES=str(DRAIN),
        FILES_URL=str(tmp_path / "files"),
        MAX_UPLOADS_IN_FLIGHT_PER_USER=str(STALLED_UPLOADS),  # one user stalls them all
    ) as server:
        assert "open file descriptor limit 256 (raised from 128): up to 128 client connections" in server.log_tail(
            100_000
        )
        token = server.tokens["alice"]
        db = tmp_path / "db.sqlite"
        async with contextlib.AsyncExitStack() as stack, httpx.AsyncClient(base_url=server.url, timeout=30) as user:

            async def answered() -> None:
                """A normal user's request, on a connection of its own."""
                reply = await user.get(
                    "/trpc/session.list", headers={"authorization": f"Bearer {token}", "connection": "close"}
                )
                assert reply.status_code == 200, reply.text

            uploads = [await stack.enter_async_context(raw(server.url)) for _ in range(STALLED_UPLOADS)]
            for _reader, writer in uploads:
                writer.write(stalled_upload_head(token))
            await wait_for(lambda: uploads_in_progress(db) == STALLED_UPLOADS, "the uploads to begin")
            await answered()

            half_open = []
            for _batch in range(HALF_OPEN // 30):
                for _ in range(30):
                    conn = await stack.enter_async_context(raw(server.url))
                    conn[1].write(b"POST /files HTTP/1.1\r\nhost: test\r\ncontent-le")
                    half_open.append(conn)
                await answered()  # with the descriptor limit full of stalled clients, a user still gets in

            # Every one of them is closed: half-sent headers by their deadline (408) or to make room (no answer),
            # the stalled uploads by the body deadline (408).
            closed = await asyncio.gather(*(read_until_closed(reader) for reader, _writer in half_open))
            assert all(got == b"" or got.startswith(b"HTTP/1.1 408 ") for got in closed)
            assert any(got.startswith(b"HTTP/1.1 408 ") for got in closed)  # the last ones waited for the deadline
            stalled = await asyncio.gather(*(read_until_closed(reader) for reader, _writer in uploads))
            assert all(got.startswith(b"HTTP/1.1 408 ") for got in stalled)
            await answered()

        # The stalled uploads cleaned up after themselves: no file row, no bytes.
        await wait_for(lambda: uploads_in_progress(db) == 0, "the stalled uploads to be discarded")
        tmp = tmp_path / "files" / "tmp"
        assert not tmp.exists() or not any(tmp.iterdir())

        # A stranger's upload that never ends: 401 at once, and the server reads at most the drain bound more.
        async with raw(server.url) as (reader, writer):
            writer.write(request("/files", None, "POST", "transfer-encoding: chunked\r\n") + b"7fffffff\r\n")
            answer = asyncio.create_task(read_until_closed(reader))
            sent = await send_until_stopped(writer, 1 << 30)
            assert (await answer).startswith(b"HTTP/1.1 401 ")
        assert sent < DRAIN + KERNEL_BUFFERS


@pytest.mark.parametrize("public_url", [None, "https://chat.example"])
def test_serving_beyond_loopback_without_a_public_url_is_warned_about(tmp_path: Path, public_url: str | None) -> None:
    extra = {"PUBLIC_URL": public_url} if public_url else {}
    with ServerProcess(tmp_path, HOST="0.0.0.0", **extra) as server:
        warned = "without CHATSYNC_PUBLIC_URL" in server.log_tail(100_000)
    assert warned == (public_url is None)
