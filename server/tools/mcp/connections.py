"""MCP sessions of this process: one per (server, user), started on first use, shared by every run.

Each :class:`Connection` has a supervisor task that owns the SDK's ``Client`` (entered and left in that task, as
the SDK's task groups require) and keeps it up:

* a stdio server whose process exits, or an HTTP server that drops the session, is reconnected — at once the
  first time, then after 0.25 s, 0.5 s, … up to ``MAX_BACKOFF_SECONDS`` while it keeps failing;
* the tool list is cached and fetched again after a ``tools/list_changed`` (a ``subscriptions/listen`` stream,
  or the notification of servers on older protocol versions);
* a call that finds the server down fails at once with :class:`McpUnavailable` (the model gets an error result).

Calls are made from the run loops' tasks. A call cancelled (Stop, the timeout) is cancelled at the server too:
the SDK sends the MCP cancellation; the session stays up for other calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AsyncExitStack, suppress
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import httpx2

from .config import ServerConfig

if TYPE_CHECKING:
    # The SDK is imported where a session is opened (``_client_for``): it is about half of the server's import
    # time, and a process whose sessions enable no MCP server never needs it.
    from mcp import Client
    from mcp.shared.dispatcher import ProgressFnT as ProgressFn  # async (progress, total, message) -> None
    from mcp.types import Tool

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 20.0
MAX_TOOLS = 256
MAX_LIST_PAGES = 10


class McpUnavailable(Exception):
    """The server cannot be reached now (its message is for the model and the user: no secrets in it)."""


class Connection:
    """The MCP session of one (server, user), kept up by its supervisor task (module docstring)."""

    def __init__(self, name: str, config: ServerConfig) -> None:
        self.name = name
        self.config = config
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._wake = asyncio.Event()  # close, or the connection broke: the supervisor reconnects or ends
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._tools: list[Tool] | None = None
        self._tools_lock = asyncio.Lock()
        self._failures = 0  # attempts in a row that ended (0: the next one is made at once)
        self._retry_at = 0.0  # monotonic time before which a new attempt is not made
        self._failed_attempts = 0  # attempts that never got a session
        self._pulse = asyncio.Event()  # set (and replaced) at every change of state
        self.last_error: str | None = None
        self.connects = 0  # how many sessions were opened (a restart adds one)
        self.last_used = time.monotonic()
        self.calls = 0  # calls and listings under way (an idle session is one with none for a while)

    # --- the supervisor -------------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")

    async def _supervise(self) -> None:
        while not self._closing:
            delay = self._retry_at - time.monotonic()
            if delay > 0:
                self._wake.clear()
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
                if self._closing:
                    break
            self._wake.clear()
            connected = False
            try:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(await self._client_for(stack))
                    self.connects += 1
                    self._client, self._tools, self._failures, self.last_error = client, None, 0, None
                    connected = True
                    self._ready.set()
                    self._notify()
                    async with anyio.create_task_group() as group:
                        group.start_soon(self._listen, client)
                        await self._wake.wait()
                        group.cancel_scope.cancel()
            except Exception as exc:  # the server went away or never came: reconnect with backoff
                self.last_error = type(exc).__name__
                log.warning("MCP server %s: connection ended (%s)", self.name, type(exc).__name__)
            finally:
                self._client = None
                self._ready.clear()
                self._failed_attempts += 0 if connected else 1
                self._notify()
            if not self._closing:
                self._retry_at = time.monotonic() + (
                    0.0 if self._failures == 0 else min(0.25 * 2 ** (self._failures - 1), MAX_BACKOFF_SECONDS)
                )
                self._failures += 1

    async def _client_for(self, stack: AsyncExitStack) -> Client:
        from mcp import Client, StdioServerParameters
        from mcp.client.streamable_http import streamable_http_client
        from mcp.types import Implementation

        cfg = self.config
        info = Implementation(name="chatsync", version="1")
        if cfg.command is not None:
            params = StdioServerParameters(
                command=cfg.command[0], args=cfg.command[1:], env=cfg.env or None, cwd=cfg.cwd
            )
            return Client(params, client_info=info, cache=None, message_handler=self._on_message)
        assert cfg.url is not None
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=cfg.http_headers(), timeout=httpx2.Timeout(30.0, read=300.0))
        )
        transport = streamable_http_client(cfg.url, http_client=http)
        return Client(transport, client_info=info, cache=None, message_handler=self._on_message)

    async def _listen(self, client: Client) -> None:
        """Mark the tool list stale on every ``tools/list_changed``. A server that does not take the stream
        (older protocol versions, or it refuses it) is left be: its calls tell when it goes away."""
        listening = False
        try:
            async with client.listen(tools_list_changed=True) as sub:
                listening = True
                async for _event in sub:
                    self._tools = None
        except Exception:
            if listening:
                raise  # the stream broke: the connection is gone
            log.info("MCP server %s: no tools/list_changed stream", self.name)
        await anyio.sleep_forever()

    async def _on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            self._tools = None
        await anyio.lowlevel.checkpoint()

    def _notify(self) -> None:
        self._pulse.set()
        self._pulse = asyncio.Event()

    def _broken(self, client: Client) -> None:
        """``client``'s session is gone: calls from now on wait for the new one the supervisor opens (a failure
        seen on an older session, already replaced, changes nothing)."""
        if client is not self._client:
            return
        self._client = None
        self._ready.clear()
        self._wake.set()

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 5)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
                with suppress(BaseException):
                    await self._task

    # --- use -------------------------------------------------------------------------------------------------

    async def client(self, wait: float = CONNECT_TIMEOUT_SECONDS) -> Client:
        """The live client, connecting (or waiting for the reconnection under way) for at most ``wait`` seconds."""
        self._start()
        self.last_used = time.monotonic()
        down = McpUnavailable(f"The MCP server {self.name!r} is not reachable now.")
        if self._client is None and self._failures >= 2 and time.monotonic() < self._retry_at:
            raise down  # it failed again on reconnecting: do not wait out the backoff
        deadline, failed = time.monotonic() + wait, self._failed_attempts
        while True:
            client = self._client
            if client is not None and self._ready.is_set():
                return client
            remaining = deadline - time.monotonic()
            if self._failed_attempts > failed or remaining <= 0 or self._closing:
                raise down
            try:
                # Not ``asyncio.wait_for``: on Python 3.11 it returns normally when the caller is cancelled (Stop,
                # the call's timeout) just as the session comes up, and the caller would go on to call the tool.
                async with asyncio.timeout(remaining):
                    await self._pulse.wait()
            except TimeoutError:
                raise down from None

    async def tools(self) -> list[Tool]:
        """The server's tools (cached until it says the list changed, or the session is new)."""
        self.last_used = time.monotonic()
        cached = self._tools
        if cached is not None:
            return cached
        self.calls += 1
        try:
            return await self._list_tools()
        finally:
            self.calls -= 1
            self.last_used = time.monotonic()

    async def _list_tools(self) -> list[Tool]:
        async with self._tools_lock:
            if self._tools is not None:
                return self._tools
            client = await self.client()
            found: list[Tool] = []
            cursor: str | None = None
            try:
                for _page in range(MAX_LIST_PAGES):
                    async with asyncio.timeout(30):  # not ``wait_for``: see ``client``
                        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
                    found.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None or len(found) >= MAX_TOOLS:
                        break
            except (TimeoutError, Exception) as exc:
                self._broken(client)
                raise McpUnavailable(f"The MCP server {self.name!r} did not list its tools.") from exc
            self._tools = found[:MAX_TOOLS]
            return self._tools

    async def call(self, tool: str, arguments: dict[str, Any], progress: ProgressFn | None) -> Any:
        """``tools/call``; the caller bounds the time (cancelling it cancels the call at the server)."""
        self.calls += 1
        try:
            client = await self.client()
        except BaseException:
            self.calls -= 1
            raise
        try:
            return await client.call_tool(tool, arguments, progress_callback=progress)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if _connection_lost(exc):
                self._broken(client)
                raise McpUnavailable(
                    f"The MCP server {self.name!r} stopped during the call; it is being restarted."
                ) from exc
            raise
        finally:
            self.calls -= 1
            self.last_used = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the session was last used (0 while a call is under way)."""
        return 0.0 if self.calls else time.monotonic() - self.last_used


def _connection_lost(exc: BaseException) -> bool:
    message = str(exc).lower()
    return "connection closed" in message or isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError)
