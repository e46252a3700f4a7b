"""HTTP/1.1 over a raw socket, for tests that act as clients no library would be: half-sent headers, stalled
bodies, bodies that never end (imported as ``rawhttp``; the tests folder is on sys.path)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _kernel_buffers() -> int:
    """The most a receiving and a sending TCP socket buffer may hold here (the largest sizes the kernel
    tunes them to), or 64 MiB when that cannot be read."""
    try:
        return sum(int(Path(f"/proc/sys/net/ipv4/{name}").read_text().split()[2]) for name in ("tcp_rmem", "tcp_wmem"))
    except (OSError, ValueError, IndexError):
        return 64 << 20


KERNEL_BUFFERS = _kernel_buffers()
"""What a client may have written that the server never read: the bound on top of what the server took."""


@contextlib.asynccontextmanager
async def raw(url: str) -> AsyncIterator[Conn]:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def request(path: str, token: str | None = None, method: str = "GET", extra: str = "") -> bytes:
    """A request's line and headers (``extra``: more header lines, each ending in CRLF)."""
    auth = f"authorization: Bearer {token}\r\n" if token else ""
    return f"{method} {path} HTTP/1.1\r\nhost: test\r\n{auth}{extra}\r\n".encode()


async def read_until_closed(reader: asyncio.StreamReader, timeout: float = 30) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as closed)."""
    got = b""
    with contextlib.suppress(ConnectionError):
        while chunk := await asyncio.wait_for(reader.read(65536), timeout):
            got += chunk
    return got


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One response with a Content-Length: (status, lower-cased headers, body)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if line)
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(lines[0].split()[1]), headers, body


async def send_until_stopped(writer: asyncio.StreamWriter, limit: int) -> int:
    """Write body bytes until the server stops taking them (or ``limit``); returns how many it took (what
    the two kernels' socket buffers hold included)."""
    chunk = b"x" * 65536
    sent = 0
    with contextlib.suppress(ConnectionError):
        while sent < limit:
            writer.write(chunk)
            await asyncio.wait_for(writer.drain(), 30)
            sent += len(chunk)
    return sent


async def until(predicate, timeout: float = 30) -> None:
    """Wait for ``predicate()`` (or, when it returns an awaitable, what that gives) to hold."""
    async with asyncio.timeout(timeout):
        while True:
            held = predicate()
            if inspect.isawaitable(held):
                held = await held
            if held:
                return
            await asyncio.sleep(0.01)
