"""A task cancelled in the same turn of the loop as the thing it waits for completes stays cancelled.

On Python 3.11, ``asyncio.wait_for`` returns the result instead of raising when the cancel lands just as the
awaited work completes: the caller would go on as if nothing had happened (a Stop'd run calling its tool, a send
whose client left sending, a transaction committing for a task that is to stop). Each wait below is cancelled
exactly then; the cancellation must reach the caller."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from server.services import unread
from server.services.runs import RunService
from server.services.titles import TitleService
from server.tools.mcp.config import ServerConfig
from server.tools.mcp.connections import Connection

pytestmark = pytest.mark.fast


async def cancel_as_it_completes(work: Awaitable[Any], entered: asyncio.Event, complete: Callable[[], None]) -> None:
    """Start ``work``; once it waits (``entered``), complete what it waits for and cancel it in the same turn."""
    task = asyncio.ensure_future(work)
    await asyncio.wait_for(entered.wait(), 5)
    complete()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class Answer:
    """An awaitable answer the test gives when it chooses; ``entered`` is set once someone waits for it."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def wait(self, *_args: Any, **_kwargs: Any) -> Any:
        self.entered.set()
        return await self.future

    def give(self, value: Any) -> Callable[[], None]:
        return lambda: self.future.set_result(value)


async def test_a_presence_check_cancelled_as_it_answers() -> None:
    answer = Answer()
    await cancel_as_it_completes(unread._in_view(answer.wait, "u", "s"), answer.entered, answer.give(True))


async def test_a_model_title_cancelled_as_the_model_answers() -> None:
    answer = Answer()
    provider = SimpleNamespace(complete=answer.wait)
    titles = TitleService(None, "model", lambda _pid: provider)  # type: ignore[arg-type]
    completion = SimpleNamespace(error=None, text="A title")
    await cancel_as_it_completes(titles.ask_model("p", "m", "hello", None), answer.entered, answer.give(completion))


async def test_a_wait_for_a_run_to_stop_cancelled_as_it_stops() -> None:
    class Done(asyncio.Event):
        entered = asyncio.Event()

        async def wait(self) -> bool:  # type: ignore[override]
            self.entered.set()
            return await super().wait()

    loop = SimpleNamespace(done=Done())
    driver = SimpleNamespace(abort_local=lambda _sid: loop)
    runs = RunService(None, driver, queue=None, run_lease_seconds=1, max_content_chars=10)  # type: ignore[arg-type]
    await cancel_as_it_completes(runs.wait_interrupted("s", time.monotonic() + 30), loop.done.entered, loop.done.set)


async def test_a_tool_call_waiting_for_its_mcp_session_cancelled_as_it_comes_up() -> None:
    """Stop (or the call's timeout) cancels a tool call that waits for the MCP session just as the session comes
    up: the call must not go on to call the tool."""
    conn = Connection("srv", ServerConfig(command=["true"]))
    conn._start = lambda: None  # type: ignore[method-assign]  # no supervisor: the test brings the session up
    pulse = conn._pulse
    entered = asyncio.Event()
    real_wait = pulse.wait

    async def wait() -> bool:
        entered.set()
        return await real_wait()

    pulse.wait = wait  # type: ignore[method-assign]

    def up() -> None:
        conn._client = object()  # type: ignore[assignment]
        conn._ready.set()
        conn._notify()

    await cancel_as_it_completes(conn.client(wait=30), entered, up)


async def test_a_tool_listing_cancelled_as_the_page_arrives() -> None:
    """A run stopped while it lists an MCP server's tools, just as the page arrives, stays stopped."""
    conn = Connection("srv", ServerConfig(command=["true"]))
    conn._start = lambda: None  # type: ignore[method-assign]
    answer = Answer()
    conn._client = SimpleNamespace(list_tools=answer.wait)  # type: ignore[assignment]
    conn._ready.set()
    page = SimpleNamespace(tools=[], next_cursor=None)
    await cancel_as_it_completes(conn.tools(), answer.entered, answer.give(page))
