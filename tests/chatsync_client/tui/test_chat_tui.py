"""The terminal chat in Textual's headless harness, against a real server, next to a second client."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Label, OptionList

from chatsync_client import ChatClient
from chatsync_client.tui import ChatApp
from chatsync_client.tui.widgets import ApprovalBar, MessageView, QueueList, StatusLine

pytestmark = pytest.mark.timeout(60)

PARAGRAPH = (
    "Day one: take the morning train to Lyon, leave the bags at the hotel near Bellecour and walk up "
    "to Fourvière before lunch. In the afternoon, the traboules of the old town, then dinner in a bouchon. "
)
LONG = " ".join((PARAGRAPH * 9).split()[:300])
SIZE = (110, 32)
# Regenerate the screenshot in docs/ with CHATSYNC_SCREENSHOT_DIR=docs (it is written only when that is set).
SHOTS = os.environ.get("CHATSYNC_SCREENSHOT_DIR")


@pytest.fixture
async def paced(server_factory: Callable[..., Any], sqlite_url: str) -> Any:
    """Echo at 10 ms a word: a 300-word answer streams for 3 s."""
    return await server_factory(sqlite_url, echo_delay=0.01, sweep_seconds=0.2, stream_flush_seconds=0.2)


async def until(pilot: Pilot[Any], pred: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await pilot.pause(0.02)


async def submit(pilot: Pilot[Any], text: str) -> None:
    prompt = pilot.app.query_one("#prompt", Input)
    prompt.focus()
    prompt.value = text
    await pilot.press("enter")


def streaming(app: ChatApp) -> bool:
    return app.view is not None and any(
        m.role == "assistant" and m.status == "streaming" and m.content for m in app.view.messages
    )


def shown(app: ChatApp, role: str) -> list[str]:
    """Texts of the history widgets of one role, as drawn."""
    assert app.view is not None
    by_id = {m.id: m for m in app.view.messages}
    return [
        by_id[w.message_id].content
        for w in app.query(MessageView)
        if w.message_id in by_id and by_id[w.message_id].role == role
    ]


async def test_typing_while_streaming_is_queued_then_sent(
    server_factory: Callable[..., Any], sqlite_url: str, tmp_path: Path
) -> None:
    # 40 ms a word (12 s for the answer): the harness's key presses wait for a quiet screen, so typing is
    # slow while text streams, and slower still on a loaded machine; the answer must outlast the typing.
    slow = await server_factory(sqlite_url, echo_delay=0.04, sweep_seconds=0.2, stream_flush_seconds=0.2)
    async with ChatClient(slow.url, slow.tokens["alice"]) as chat:
        s = await chat.create_session(title="Trip planning")
        app = ChatApp(slow.url, slow.tokens["alice"], s.id)
        async with app.run_test(size=SIZE) as pilot:
            await submit(pilot, LONG)
            await until(pilot, lambda: streaming(app))
            await pilot.press(*"next")
            await pilot.press("enter")
            queue = app.query_one("#queue", QueueList)
            title = app.query_one("#queue-title", Label)
            # the widgets are redrawn on a later refresh than the view's state: wait for what is drawn too
            await until(
                pilot, lambda: [q.content for q in queue.items] == ["next"] and str(title.render()) == "Queue (1)"
            )
            assert app.view is not None and app.view.run is not None, "the answer ended before the queueing"
            assert app.query_one("#prompt", Input).value == ""  # the input stayed usable
            for path in [tmp_path, *([Path(SHOTS)] if SHOTS else [])]:
                app.save_screenshot("chat.svg", str(path))
            svg = (tmp_path / "chat.svg").read_text()
            assert "Trip" in svg and "Queue" in svg
            # sent by the server when the first answer finishes, with no key pressed
            await until(pilot, lambda: shown(app, "assistant") == [LONG, "next"], timeout=40)
            assert shown(app, "user") == [LONG, "next"]
            assert queue.items == []
        stored = await chat.get_session(s.id)
        assert [m.content for m in stored.messages if m.role == "user"] == [LONG, "next"]


async def test_queue_edit_move_remove_show_in_another_client(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as other:
        s = await other.create_session(queue_paused=True)
        for text in ("one", "two", "three"):
            await other.enqueue(s.id, text)
        watcher = await other.open_session(s.id)
        async with watcher:
            app = ChatApp(paced.url, paced.tokens["alice"], s.id)
            async with app.run_test(size=SIZE) as pilot:
                queue = app.query_one("#queue", QueueList)
                await until(pilot, lambda: len(queue.items) == 3)
                queue.focus()
                queue.highlighted = 0
                await pilot.press("d")
                await watcher.wait_until(lambda v: [q.content for q in v.queue] == ["two", "three"])
                await until(pilot, lambda: [q.content for q in queue.items] == ["two", "three"])
                queue.highlighted = 0
                await pilot.press("j")
                await watcher.wait_until(lambda v: [q.content for q in v.queue] == ["three", "two"])
                await until(pilot, lambda: [q.content for q in queue.items] == ["three", "two"])
                queue.highlighted = 1
                await pilot.press("e")
                prompt = app.query_one("#prompt", Input)
                assert prompt.value == "two" and app.editing is not None
                prompt.value = "two, edited"
                await pilot.press("enter")
                await watcher.wait_until(lambda v: [q.content for q in v.queue] == ["three", "two, edited"])
                # another client's change appears live
                await other.clear_queue(s.id)
                title = app.query_one("#queue-title", Label)
                await until(pilot, lambda: queue.items == [] and str(title.render()) == "Queue (0) · paused")


async def test_connection_indicator_shows_reconnecting_then_resumed(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as other:
        s = await other.create_session(queue_paused=True)
        app = ChatApp(paced.url, paced.tokens["alice"], s.id)
        async with app.run_test(size=SIZE) as pilot:
            status = app.query_one("#status", StatusLine)
            await until(pilot, lambda: "● connected" in status.plain)
            seen: list[str] = []
            assert app.view is not None
            app.view.add_listener(lambda c: seen.append(app.view.connection) if c.kind == "connection" else None)
            assert app.chat is not None
            await app.chat.trpc.drop_connection()
            await until(pilot, lambda: "● resumed" in status.plain)
            assert seen == ["reconnecting", "resumed"]
            await other.enqueue(s.id, "after the drop")  # still live after the resume
            queue = app.query_one("#queue", QueueList)
            await until(pilot, lambda: [q.content for q in queue.items] == ["after the drop"])


async def test_approve_a_tool_from_the_terminal(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session(tools=[{"name": "current_time", "requiresApproval": True}])
        app = ChatApp(paced.url, paced.tokens["alice"], s.id)
        async with app.run_test(size=SIZE) as pilot:
            await submit(pilot, "what time is it\n/tool current_time {}")
            bar = app.query_one("#approval", ApprovalBar)
            await until(pilot, lambda: bar.has_class("pending") and bar.call_id is not None)
            assert app.view is not None and app.view.status == "requires-action"
            await pilot.press("ctrl+y")
            await until(
                pilot,
                lambda: (
                    app.view is not None
                    and app.view.run is None
                    and app.view.messages[-1].status == "complete"
                    and app.view.messages[-1].role == "assistant"
                    # the bar is redrawn on a later refresh than the view's state
                    and not bar.has_class("pending")
                ),
            )
        snap = await chat.get_session(s.id)
        tool = [m for m in snap.messages if m.role == "tool"]
        assert len(tool) == 1 and "denied" not in tool[0].content.lower()
        assert "current_time" in snap.messages[-1].content


async def test_deny_a_tool_from_the_terminal(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session(tools=[{"name": "current_time", "requiresApproval": True}])
        app = ChatApp(paced.url, paced.tokens["alice"], s.id)
        async with app.run_test(size=SIZE) as pilot:
            await submit(pilot, "/tool current_time {}")
            bar = app.query_one("#approval", ApprovalBar)
            await until(pilot, lambda: bar.has_class("pending"))
            await pilot.press("ctrl+d")
            await until(pilot, lambda: app.view is not None and app.view.run is None and not bar.has_class("pending"))
        snap = await chat.get_session(s.id)
        tool = [m for m in snap.messages if m.role == "tool"]
        assert len(tool) == 1 and "denied" in tool[0].content.lower()


async def test_abort_key_stops_the_answer(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session()
        app = ChatApp(paced.url, paced.tokens["alice"], s.id)
        async with app.run_test(size=SIZE) as pilot:
            await submit(pilot, LONG)
            await until(pilot, lambda: streaming(app))
            await pilot.press("ctrl+x")
            await until(
                pilot,
                lambda: app.view is not None and app.view.run is None and app.view.messages[-1].status == "interrupted",
            )
            status = app.query_one("#status", StatusLine)
            await until(pilot, lambda: "queue paused" in status.plain)
            partial = shown(app, "assistant")[0]
            assert partial and partial != LONG and LONG.startswith(partial)
        snap = await chat.get_session(s.id)
        assert snap.messages[-1].status == "interrupted" and snap.messages[-1].content == partial


async def test_session_switcher_lists_titles_and_opens_one(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        first = await chat.create_session(title="First one")
        second = await chat.create_session(title="Second one")
        app = ChatApp(paced.url, paced.tokens["alice"])  # no id: the newest
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.view is not None and app.view.session_id == second.id)
            await pilot.press("ctrl+o")
            await until(pilot, lambda: app.screen.__class__.__name__ == "SessionSwitcher")
            options = app.screen.query_one("#sessions", OptionList)
            labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
            assert "Second one" in labels[0] and "First one" in labels[1] and "new session" in labels[-1]
            await pilot.press("down")
            await pilot.press("enter")
            await until(pilot, lambda: app.view is not None and app.view.session_id == first.id)
            await until(pilot, lambda: "First one" in app.query_one("#status", StatusLine).plain)


async def test_session_switcher_filters_as_you_type_and_enter_makes_no_empty_chat(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        wanted = await chat.create_session(title="Holiday plans")
        newest = await chat.create_session(title="Tax return")
        before = len(await chat.list_sessions())
        app = ChatApp(paced.url, paced.tokens["alice"], newest.id)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.view is not None and app.view.session_id == newest.id)
            # Enter straight away: the highlight is on a session (this one), not on "new session".
            await pilot.press("ctrl+o")
            await until(pilot, lambda: app.screen.__class__.__name__ == "SessionSwitcher")
            await pilot.press("enter")
            await until(pilot, lambda: app.screen.__class__.__name__ != "SessionSwitcher")
            assert len(await chat.list_sessions()) == before and app.view.session_id == newest.id
            # Typing filters the list; Enter opens the one left.
            await pilot.press("ctrl+o")
            await until(pilot, lambda: app.screen.__class__.__name__ == "SessionSwitcher")
            for key in "HOLI":
                await pilot.press(key)
            options = app.screen.query_one("#sessions", OptionList)
            await until(pilot, lambda: options.option_count == 2)  # the match and "new session"
            assert "Holiday plans" in str(options.get_option_at_index(0).prompt)
            await pilot.press("enter")
            await until(pilot, lambda: app.view is not None and app.view.session_id == wanted.id)
        assert len(await chat.list_sessions()) == before


async def test_attach_a_file_then_send(live: Any, tmp_path: Path) -> None:
    """``/attach PATH`` uploads a local file and the next message carries it."""
    notes = tmp_path / "notes.txt"
    notes.write_text("remember the milk\n")
    async with ChatClient(live.url, live.tokens["alice"]) as chat:
        s = await chat.create_session(title="errands")
        app = ChatApp(live.url, live.tokens["alice"], s.id)
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one("#prompt", Input)
            await submit(pilot, f"/attach {tmp_path / 'missing.txt'}")
            await submit(pilot, f"/attach {notes}")
            await until(pilot, lambda: "notes.txt" in str(prompt.placeholder))
            assert app.attached and app.attached[0].name == "notes.txt"
            await submit(pilot, "what is on this list?")
            await until(
                pilot,
                lambda: (
                    app.view is not None
                    and any(m.role == "user" and m.attachments for m in app.view.messages)
                    # the messages are drawn on a later refresh than the view's state
                    and any("📎 notes.txt (text/plain, 18 bytes)" in str(w.render()) for w in app.query(MessageView))
                ),
            )
            assert app.attached == [] and "notes.txt" not in str(prompt.placeholder)
        stored = await chat.get_session(s.id)
        sent = [m for m in stored.messages if m.role == "user"]
        assert [m.content for m in sent] == ["what is on this list?"]
        assert [(a["name"], a["mediaType"], a["size"]) for a in sent[0].attachments] == [
            ("notes.txt", "text/plain", 18)
        ]
        assert await chat.download(sent[0].attachments[0]["fileId"]) == b"remember the milk\n"


async def test_edit_regenerate_and_versions_from_the_terminal(paced: Any) -> None:
    """``/edit``, ``/prev`` and ``/next``, ``/regenerate`` and ``/continue`` from the prompt; the history shows
    the active path and "< i / n >" on a message with versions."""
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session(title="Versions")
        app = ChatApp(paced.url, paced.tokens["alice"], s.id)
        async with app.run_test(size=SIZE) as pilot:
            await submit(pilot, "one two three\n/length after=1")
            await until(pilot, lambda: shown(app, "assistant") == ["one"])
            await submit(pilot, "/continue")
            await until(pilot, lambda: shown(app, "assistant") == ["one two three"])
            await submit(pilot, "/edit four five")
            await until(pilot, lambda: shown(app, "assistant") == ["four five"])
            await until(pilot, lambda: "< 2 / 2 >" in str(app.query(MessageView).first().render()))
            await submit(pilot, "/prev")
            await until(pilot, lambda: shown(app, "user") == ["one two three\n/length after=1"])
            await submit(pilot, "/next")
            await until(pilot, lambda: shown(app, "user") == ["four five"])
            await submit(pilot, "/regenerate")
            await until(pilot, lambda: app.view is not None and not app.view.busy and len(app.view.messages) == 2)
            await until(pilot, lambda: "< 2 / 2 >" in str(list(app.query(MessageView))[-1].render()))
        stored = await chat.get_session(s.id)
        assert [m.content for m in stored.messages] == ["four five", "four five"]
        assert stored.messages[1].versions is not None and stored.messages[1].versions.count == 2
