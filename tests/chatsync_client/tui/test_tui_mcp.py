"""MCP tools in the terminal chat: the approval bar and the history name the MCP server and the tool, the status
line shows the progress a tool reports, and ctrl+y approves the call (the server then makes it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp_kit import log_lines, stdio, write_config
from test_chat_tui import until
from textual.widgets import Input

from chatsync_client import ChatClient
from chatsync_client.tui import ChatApp
from chatsync_client.tui.widgets import ApprovalBar, MessageView, StatusLine

pytestmark = pytest.mark.timeout(90)


async def test_mcp_tool_approved_from_the_terminal_with_progress(
    server_factory: Callable[..., Any], sqlite_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    config = write_config(tmp_path / "mcp.json", {"tools": stdio(log, approval="ask")})
    live = await server_factory(sqlite_url, echo_delay=0.001, sweep_seconds=0.2, mcp_servers=config)
    async with ChatClient(live.url, live.tokens["alice"]) as chat:
        s = await chat.create_session(mcpServers=["tools"])
        app = ChatApp(live.url, live.tokens["alice"], s.id)
        async with app.run_test(size=(110, 32)) as pilot:
            prompt = app.query_one("#prompt", Input)
            prompt.focus()
            prompt.value = '/tool tools__progress {"steps": 3, "delay": 0.5}'
            await pilot.press("enter")
            bar = app.query_one("#approval", ApprovalBar)
            # the bar's class and its text may be drawn on different refreshes
            await until(
                pilot,
                lambda: bar.has_class("pending") and "Tool wants to run: MCP tools · progress" in str(bar.render()),
                timeout=30,
            )
            assert log_lines(log) == []
            await pilot.press("ctrl+y")
            status = app.query_one("#status", StatusLine)
            await until(pilot, lambda: "⚙ MCP tools · progress" in status.plain)
            assert "/3 step" in status.plain
            await until(pilot, lambda: app.view is not None and app.view.run is None)
            shown = '⚙ MCP tools · progress {"steps": 3'
            await until(pilot, lambda: any(shown in str(w.render()) for w in app.query(MessageView)))
            await until(pilot, lambda: "⚙ MCP" not in status.plain)  # the progress goes with the result
    assert [line[0] for line in log_lines(log)] == ["progress"]
