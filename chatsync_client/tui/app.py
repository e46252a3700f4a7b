"""``chatsync chat``: a full-screen terminal chat, a :class:`SessionView` consumer.

The screen is redrawn from the view's state, never from events one by one: a listener marks the state dirty and a
timer (15 Hz) reconciles the widgets with it (new messages mounted, changed ones redrawn, the queue and approval
bar refreshed). So a resync, a session switch and a thousand deltas a second all take the same path, and a burst
of deltas costs one redraw per frame, not one per delta.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from contextlib import suppress
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import Footer, Input, Label

from .. import ChatClient, ConnectionLost, SessionView, TrpcError, UploadedFile
from ..cli_sessions import to_cli_error
from ..view import Change
from .switcher import NEW, SessionSwitcher
from .widgets import ApprovalBar, MessageView, QueueList, StatusLine, message_key

PLACEHOLDER = "Message · enter sends (queued while the model answers) · /attach PATH adds a file"
EDIT_PLACEHOLDER = "Editing a queued message · enter saves · escape cancels"
TYPING_SECONDS = 3.0  # typing shows on the other devices until this long after the last key


def _reference(attachment: dict[str, Any]) -> dict[str, Any]:
    """A shown attachment as an input takes it again: an uploaded file by id, a path item as it is."""
    return {"fileId": attachment["fileId"]} if "fileId" in attachment else attachment


class ChatApp(App[None]):
    """The terminal chat. ``session_id`` None opens your newest session (a new one when you have none)."""

    TITLE = "chatsync"
    CSS = """
    #main { height: 1fr; }
    #history { width: 1fr; padding: 0 1; }
    #side { width: 40; border-left: solid $primary; padding: 0 1; }
    #queue { height: 1fr; border: none; }
    #queue-title { text-style: bold; }
    #queue-help { color: $text-muted; }
    """
    BINDINGS: ClassVar = [
        Binding("ctrl+x", "abort", "Abort", priority=True),
        Binding("ctrl+o", "switch", "Sessions", priority=True),
        Binding("ctrl+y", "approve(True)", "Approve", priority=True),
        Binding("ctrl+d", "approve(False)", "Deny", priority=True),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("escape", "cancel_edit", "Cancel edit", show=False),
    ]

    def __init__(self, url: str, token: str | None, session_id: str | None = None) -> None:
        super().__init__()
        self.url = url
        self.token = token
        self.initial_session = session_id
        self.chat: ChatClient | None = None
        self.view: SessionView | None = None
        self.editing: str | None = None  # id of the queued message the input is editing
        self.attached: list[UploadedFile] = []  # uploaded by /attach, sent with the next message
        self.error: str | None = None  # why the app could not start (printed by run_chat)
        self._widgets: dict[str, MessageView] = {}
        self._dirty = True
        self._timer: Timer | None = None
        # Presence (docs/devices.md): the open session is reported, refreshed, and typing in the prompt shown.
        self._presence: asyncio.Task[None] | None = None
        self._typing_until = 0.0

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        with Horizontal(id="main"):
            yield VerticalScroll(id="history")
            with Vertical(id="side"):
                yield Label("Queue (0)", id="queue-title")
                yield QueueList(id="queue")
                yield Label("e edit · d remove · j/k move", id="queue-help")
        yield ApprovalBar(id="approval")
        yield Input(placeholder=PLACEHOLDER, id="prompt")
        yield Footer()

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def on_mount(self) -> None:
        # Kept, not queried each frame: while the switcher is open, queries look at its screen, not this one.
        self._history = self.query_one("#history", VerticalScroll)
        self._queue = self.query_one("#queue", QueueList)
        self._queue_title = self.query_one("#queue-title", Label)
        self._approval = self.query_one("#approval", ApprovalBar)
        self._status = self.query_one("#status", StatusLine)
        self._prompt = self.query_one("#prompt", Input)
        self.chat = ChatClient(self.url, self.token, connect_timeout=5)
        try:
            await self.chat.connect()
            session_id = self.initial_session
            if session_id is None:
                newest = await self.chat.list_sessions(limit=1)
                session_id = newest[0].id if newest else (await self.chat.create_session()).id
            await self.open_session(session_id)
        except (TrpcError, ConnectionLost, TimeoutError) as exc:
            self.error = _describe(exc, self.url)
            self.exit(return_code=_exit_code(exc))
            return
        self._timer = self.set_interval(1 / 15, self.sync)
        self._prompt.focus()

    async def on_unmount(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        await self._stop_presence()
        if self.view is not None:
            await self.view.close()
        if self.chat is not None:
            await self.chat.close()

    async def open_session(self, session_id: str) -> None:
        """Show another session (the switcher's choice)."""
        assert self.chat is not None
        view = await self.chat.open_session(session_id)
        if self.view is not None:
            await self._stop_presence()
            await self.view.close()
        self.view = view
        self._presence = asyncio.create_task(self._report_presence(session_id))
        self.editing = None
        self._widgets.clear()
        await self._history.remove_children()
        view.add_listener(self._on_change)
        self._dirty = True
        self.sync()

    def _on_change(self, change: Change) -> None:
        self._dirty = True

    # --- presence ---------------------------------------------------------------------------------------

    async def _report_presence(self, session_id: str) -> None:
        """Report the open session until another is opened, refreshing it as the server asks; typing in the
        prompt shows as typing for a few seconds after the last key."""
        assert self.chat is not None
        typing = False
        while True:
            try:
                wait = await self.chat.report_presence(session_id, typing=typing)
            except Exception:  # offline or refused: presence is best effort, try again shortly
                wait = 5.0
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                now_typing = time.monotonic() < self._typing_until
                if now_typing != typing:
                    typing = now_typing
                    break
                await asyncio.sleep(0.25)

    async def _stop_presence(self) -> None:
        task, self._presence = self._presence, None
        if task is None:
            return
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        if self.chat is not None and self.view is not None:
            with suppress(Exception):
                await self.chat.leave_presence(self.view.session_id)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "prompt" and event.value:
            self._typing_until = time.monotonic() + TYPING_SECONDS

    # --- drawing ------------------------------------------------------------------------------------------

    def sync(self) -> None:
        """Bring the widgets in line with the view's state (only when something changed)."""
        view = self.view
        if not self._dirty or view is None:
            return
        self._dirty = False
        history = self._history
        at_end = history.scroll_y >= history.max_scroll_y - 1
        ids = {m.id for m in view.messages}
        for mid in [mid for mid in self._widgets if mid not in ids]:
            self._widgets.pop(mid).remove()
        new: list[MessageView] = []
        for m in view.messages:
            widget = self._widgets.get(m.id)
            if widget is None:
                servers = view.session.mcp_servers if view.session is not None else []
                widget = self._widgets[m.id] = MessageView(m, servers)
                new.append(widget)
            elif widget.key != message_key(m):
                widget.show(m)
        if new:
            history.mount_all(new)
        if at_end:
            history.call_after_refresh(history.scroll_end, animate=False)
        self._queue.show(view.queue)
        paused = " · paused" if view.session is not None and view.session.queue_paused else ""
        self._queue_title.update(f"Queue ({len(view.queue)}){paused}")
        self._approval.show(view)
        self._status.show(view, view.connection)
        self.sub_title = view.session.title if view.session is not None else ""

    # --- actions ------------------------------------------------------------------------------------------

    def _call(self, coro: Awaitable[Any], done: str | None = None) -> None:
        """Run a call in the background; a failure is a notification, never a crash."""

        async def run() -> None:
            try:
                await coro
            except (TrpcError, ConnectionLost, TimeoutError) as exc:
                self.notify(_describe(exc, self.url), severity="error")
            else:
                if done:
                    self.notify(done)

        self.run_worker(run(), group="calls")

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text or self.view is None or self.chat is None:
            return
        event.input.value = ""
        if text == "/detach":
            self.attached = []
            self._show_attached()
            return
        if text == "/attach" or text.startswith("/attach "):
            await self._attach_file(text.removeprefix("/attach").strip())
            return
        if self._version_command(text):
            return
        sid = self.view.session_id
        attached, self.attached = self.attached, []
        self._show_attached()
        if self.editing is not None:
            mid, self.editing = self.editing, None
            item = next((q for q in self.view.queue if q.id == mid), None)
            kept: list[Any] = [_reference(a) for a in item.attachments] if item is not None else []
            self._call(self.chat.update_queued(sid, mid, text, kept + attached if attached else None))
        else:
            self._call(self.chat.send(sid, text, attachments=attached))

    def _version_command(self, text: str) -> bool:
        """Versions and branches (docs/api.md): ``/edit TEXT`` (a new version of the last message you sent),
        ``/regenerate [PROVIDER MODEL]``, ``/continue``, ``/prev`` and ``/next`` (the previous or next version of
        the last answer, or of the last message you sent), ``/fork``. True when ``text`` was one of them."""
        assert self.view is not None and self.chat is not None
        command, _, rest = text.partition(" ")
        if command not in ("/edit", "/regenerate", "/continue", "/prev", "/next", "/fork"):
            return False
        sid, path = self.view.session_id, self.view.messages
        users = [m for m in path if m.role == "user"]
        if command == "/edit":
            if not users or not rest.strip():
                self.notify("/edit TEXT replaces the last message you sent", severity="warning")
            else:
                self._call(self.chat.edit_message(sid, users[-1].id, rest.strip()))
        elif command == "/regenerate":
            provider, _, model = rest.strip().partition(" ")
            self._call(self.chat.regenerate(sid, provider=provider or None, model=model.strip() or None))
        elif command == "/continue":
            self._call(self.chat.continue_answer(sid))
        elif command == "/fork":
            if path:
                self._call(self.chat.fork_session(sid, path[-1].id), "Forked into a new session (ctrl+o)")
        else:
            with_versions = [m for m in path if m.versions is not None and m.versions.count > 1 and m.sibling_ids]
            if not with_versions:
                self.notify("no other versions here", severity="warning")
                return True
            target = with_versions[-1]
            assert target.versions is not None and target.sibling_ids is not None
            step = -1 if command == "/prev" else 1
            index = target.versions.index + step
            if 0 <= index < target.versions.count:
                self._call(self.chat.switch_branch(sid, target.sibling_ids[index]))
        return True

    async def _attach_file(self, path: str) -> None:
        """``/attach PATH``: upload a local file now; the next message (or queued edit) carries it."""
        assert self.chat is not None
        if not path:
            self.notify("/attach PATH uploads a file for the next message; /detach drops them", severity="warning")
            return
        target = Path(path).expanduser()  # noqa: ASYNC240 (one stat of a local path the user typed)
        if not target.is_file():
            self.notify(f"no such file: {target}", severity="error")
            return
        try:
            uploaded = await self.chat.upload(target)
        except (TrpcError, ConnectionLost, TimeoutError, OSError) as exc:
            self.notify(f"could not attach {target.name}: {getattr(exc, 'message', exc)}", severity="error")
            return
        self.attached.append(uploaded)
        self._show_attached()

    def _show_attached(self) -> None:
        names = ", ".join(f.name for f in self.attached)
        self._prompt.placeholder = (
            f"Message · attached: {names} · /detach drops them"
            if self.attached
            else EDIT_PLACEHOLDER
            if self.editing is not None
            else PLACEHOLDER
        )

    def on_queue_list_act(self, event: QueueList.Act) -> None:
        if self.view is None or self.chat is None:
            return
        sid = self.view.session_id
        if event.action == "remove":
            self._call(self.chat.remove_queued(sid, event.message_id))
        elif event.action == "move":
            ids = [q.id for q in self.view.queue]
            if event.message_id in ids:
                to = max(0, min(len(ids) - 1, ids.index(event.message_id) + event.delta))
                if to != ids.index(event.message_id):
                    self._call(self.chat.move_queued(sid, event.message_id, to))
        elif event.action == "edit":
            item = next((q for q in self.view.queue if q.id == event.message_id), None)
            if item is not None:
                self.editing = item.id
                prompt = self._prompt
                prompt.value = item.content
                prompt.placeholder = EDIT_PLACEHOLDER
                prompt.focus()

    def action_cancel_edit(self) -> None:
        if self.editing is not None:
            self.editing = None
            prompt = self._prompt
            prompt.value = ""
            self._show_attached()

    def action_abort(self) -> None:
        if self.view is not None and self.chat is not None:
            self._call(self.chat.abort(self.view.session_id))

    def action_approve(self, approved: bool) -> None:
        bar = self._approval
        if self.view is not None and self.chat is not None and bar.call_id is not None:
            self._call(self.chat.approve(self.view.session_id, bar.call_id, approved))

    async def action_switch(self) -> None:
        if self.chat is None:
            return
        try:
            sessions = await self.chat.list_sessions(limit=100)
        except (TrpcError, ConnectionLost, TimeoutError) as exc:
            self.notify(_describe(exc, self.url), severity="error")
            return
        current = self.view.session_id if self.view is not None else None

        async def chosen(choice: str | None) -> None:
            if choice is None or choice == current or self.chat is None:
                return
            try:
                if choice == NEW:
                    choice = (await self.chat.create_session()).id
                await self.open_session(choice)
            except (TrpcError, ConnectionLost, TimeoutError) as exc:
                self.notify(_describe(exc, self.url), severity="error")

        self.push_screen(SessionSwitcher(sessions, current), chosen)


def _describe(exc: BaseException, url: str) -> str:
    return str(to_cli_error(exc, url))


def _exit_code(exc: BaseException) -> int:
    return to_cli_error(exc, "").code
