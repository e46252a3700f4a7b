"""An MCP server for the tests, built with the SDK's own server API (``MCPServer``).

``python mcp_test_server.py stdio`` serves on stdin/stdout; ``python mcp_test_server.py http`` serves Streamable
HTTP on 127.0.0.1 (a free port, printed as ``PORT <n>`` on stdout once it listens). With ``MCP_TEST_TOKEN`` set,
HTTP requests must carry ``Authorization: Bearer <token>``. Every call appends ``<tool> <pid>`` to the file
``MCP_TEST_LOG`` names (when set); a cancelled ``sleep`` appends ``cancelled <pid>``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import sys
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image
from pydantic import BaseModel, Field

# A 2x2 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="
)

server = MCPServer("chatsync-test")


def _log(line: str) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{line} {os.getpid()}\n")


class Weather(BaseModel):
    city: str
    celsius: float


@server.tool()
def text(text: str) -> str:
    """Echo the text back."""
    _log("text")
    return f"echo: {text}"


@server.tool()
def image() -> Image:
    """A small red square."""
    _log("image")
    return Image(data=PNG, format="png")


@server.tool()
def structured(city: str) -> Weather:
    """The weather of a city, as structured content."""
    _log("structured")
    return Weather(city=city, celsius=21.5)


@server.tool()
async def progress(steps: int, ctx: Context, delay: float = 0) -> str:
    """Report progress ``steps`` times (``delay`` seconds apart)."""
    _log("progress")
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await asyncio.sleep(delay)
    return f"{steps} steps done"


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    _log("sleep")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _log("cancelled")
        raise
    _log("slept")
    return "slept"


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    _log("crash")
    os._exit(3)


LONG_NAME = "lookup.records.in.the.archive.with.a.rather.long.descriptive.name"


@server.tool(name=LONG_NAME)
def lookup(count: Annotated[int, Field(gt=0, examples=[3])]) -> str:
    """A tool whose name no provider takes as it is (dots, and too long with its server's name)."""
    _log("lookup")
    return f"{count} records"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool ``fresh`` and announce the changed list."""
    _log("grow")
    server.add_tool(lambda: "fresh!", name="fresh", description="Added by grow.")
    await ctx.notify_tools_changed()
    return "grown"


def _guarded(app, token):  # an ASGI wrapper: a bearer token is required
    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app = server.streamable_http_app()
    token = os.environ.get("MCP_TEST_TOKEN")
    config = uvicorn.Config(
        _guarded(app, token) if token else app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
    )
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        serve_http()
    else:
        server.run()
        _log("exit")  # stdin closed: the client ended the session
