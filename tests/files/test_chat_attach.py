"""``chatsync chat``: ``/attach PATH`` uploads a local file and the next message carries it."""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from server.client import ChatClient
from server.tui import ChatApp
from server.tui.widgets import MessageView

pytestmark = pytest.mark.timeout(60)


async def _until(pilot: Pilot[Any], pred: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await pilot.pause(0.02)


async def _submit(pilot: Pilot[Any], text: str) -> None:
    prompt = pilot.app.query_one("#prompt", Input)
    prompt.focus()
    prompt.value = text
    await pilot.press("enter")


async def test_attach_then_send(live: Any, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("remember the milk\n")
    async with ChatClient(live.url, live.tokens["alice"]) as chat:
        s = await chat.create_session(title="errands")
        app = ChatApp(live.url, live.tokens["alice"], s.id)
        async with app.run_test(size=(110, 32)) as pilot:
            prompt = app.query_one("#prompt", Input)
            await _submit(pilot, f"/attach {tmp_path / 'missing.txt'}")
            await _submit(pilot, f"/attach {notes}")
            await _until(pilot, lambda: "notes.txt" in str(prompt.placeholder))
            assert app.attached and app.attached[0].name == "notes.txt"
            await _submit(pilot, "what is on this list?")
            await _until(pilot, lambda: app.view is not None and any(
                m.role == "user" and m.attachments for m in app.view.messages))
            assert app.attached == [] and "notes.txt" not in str(prompt.placeholder)
            drawn = [str(w.render()) for w in app.query(MessageView)]
            assert any("📎 notes.txt (text/plain, 18 bytes)" in text for text in drawn)
        stored = await chat.get_session(s.id)
        sent = [m for m in stored.messages if m.role == "user"]
        assert [m.content for m in sent] == ["what is on this list?"]
        assert [(a["name"], a["mediaType"], a["size"]) for a in sent[0].attachments] == [("notes.txt", "text/plain", 18)]
        assert await chat.download(sent[0].attachments[0]["fileId"]) == b"remember the milk\n"
