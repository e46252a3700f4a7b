"""The terminal chat reports its presence: another device sees it open the session, type in the prompt and
leave (docs/devices.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from devices_kit import others, until
from textual.widgets import Input

from chatsync_client import ChatClient, TrpcClient
from chatsync_client.tui import ChatApp

pytestmark = pytest.mark.timeout(60)


async def test_the_terminal_reports_open_typing_and_leaving(
    server_factory: Callable[..., Any], sqlite_url: str
) -> None:
    server = await server_factory(sqlite_url)
    phone = await server.services.auth.create_token("alice", "phone")
    async with ChatClient(server.url, server.tokens["alice"]) as chat, TrpcClient(server.url, phone) as other:
        sid = (await chat.create_session()).id
        watch = await other.subscribe("presence.watch", {"sessionId": sid})
        await until(watch, lambda i: others(i) == [])
        app = ChatApp(server.url, server.tokens["alice"], sid)
        async with app.run_test(size=(100, 30)) as pilot:
            seen = await until(watch, lambda i: bool(others(i)))
            assert others(seen)[0]["visible"] and others(seen)[0]["deviceName"] == "first token"
            prompt = app.query_one("#prompt", Input)
            prompt.focus()
            await pilot.press("h", "i")
            await until(watch, lambda i: bool(others(i)) and others(i)[0]["typing"])
        await until(watch, lambda i: others(i) == [])  # the app quit: it left the session
