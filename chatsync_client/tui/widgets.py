"""Widgets of the terminal chat: one message, the queue, the tool-approval bar, the status line."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding
from textual.message import Message as TextualMessage
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from server.domain.models import Message, QueuedMessage

from .. import SessionView

ROLE_STYLES = {"user": "bold cyan", "assistant": "bold green", "system": "bold magenta", "tool": "bold yellow"}
CONNECTION_LABELS = {
    "connecting": ("◌ connecting", "yellow"),
    "connected": ("● connected", "green"),
    "reconnecting": ("◌ reconnecting…", "bold red"),
    "resumed": ("● resumed", "green"),
    "closed": ("○ closed", "red"),
}


def message_key(m: Message) -> tuple[Any, ...]:
    """What a message's rendering depends on (redraw only when it changed)."""
    versions = (m.versions.index, m.versions.count) if m.versions is not None else None
    return (m.content, m.status, tuple((c.name, c.arguments) for c in m.tool_calls or []), len(m.attachments), versions)


def tool_label(name: str, mcp_servers: list[str] | None = None) -> str:
    """A tool's name as shown: ``MCP <server> · <tool>`` for a tool of one of the session's MCP servers."""
    server, sep, tool = name.partition("__")
    if sep and server in (mcp_servers or ()):
        return f"MCP {server} · {tool}"
    return name


def attachment_label(a: dict[str, Any]) -> str:
    if "fileId" in a or "data" in a:  # an uploaded file, or an image a tool returned
        return f"📎 {a.get('name', 'file')} ({a.get('mediaType', '?')}, {a.get('size', 0)} bytes)"
    return f"📎 {a.get('relativePath') or a.get('path')}"


class MessageView(Static):
    """One message of the history; its text grows while the answer streams."""

    DEFAULT_CSS = """
    MessageView { padding: 0 1; margin-bottom: 1; }
    MessageView.user { background: $boost; }
    """

    def __init__(self, message: Message, mcp_servers: list[str] | None = None) -> None:
        super().__init__(classes=message.role)
        self.message_id = message.id
        self.key: tuple[Any, ...] = ()
        self.mcp_servers = mcp_servers or []
        self.show(message)

    def show(self, m: Message) -> None:
        self.key = message_key(m)
        text = Text()
        text.append(f"{m.role}", style=ROLE_STYLES.get(m.role, "bold"))
        if m.status != "complete":
            text.append(f"  [{m.status}{'…' if m.status == 'streaming' else ''}]", style="dim italic")
        if m.versions is not None and m.versions.count > 1:  # /prev and /next switch
            text.append(f"  < {m.versions.index + 1} / {m.versions.count} >", style="dim")
        text.append("\n")
        text.append(m.content)
        for a in m.attachments:
            text.append(f"\n{attachment_label(a)}", style="dim")
        for call in m.tool_calls or []:
            text.append(f"\n⚙ {tool_label(call.name, self.mcp_servers)} {call.arguments}", style="yellow")
        self.update(text)


class QueueList(OptionList):
    """The session's queue, in order. Keys act on the highlighted item."""

    BINDINGS: ClassVar = [
        Binding("e", "edit", "Edit"),
        Binding("d,delete", "remove", "Remove"),
        Binding("k,shift+up", "move(-1)", "Move up"),
        Binding("j,shift+down", "move(1)", "Move down"),
    ]

    class Act(TextualMessage):
        """The user asked to edit, remove or move a queued message."""

        def __init__(self, action: str, message_id: str, delta: int = 0) -> None:
            super().__init__()
            self.action = action
            self.message_id = message_id
            self.delta = delta

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.items: list[QueuedMessage] = []

    def show(self, queue: list[QueuedMessage]) -> None:
        if [(q.id, q.content, len(q.attachments)) for q in queue] == [
            (q.id, q.content, len(q.attachments)) for q in self.items
        ]:
            return
        keep = self.highlighted_option.id if self.highlighted_option is not None else None
        self.items = list(queue)
        self.set_options(
            [
                Option(
                    Text(f"{i}. {' '.join(q.content.split())}" + (f" 📎{len(q.attachments)}" if q.attachments else "")),
                    id=q.id,
                )
                for i, q in enumerate(queue, 1)
            ]
        )
        ids = [q.id for q in queue]
        if keep in ids:
            self.highlighted = ids.index(keep)
        elif queue:
            self.highlighted = 0

    def _current(self) -> str | None:
        opt = self.highlighted_option
        return opt.id if opt is not None else None

    def action_edit(self) -> None:
        if (mid := self._current()) is not None:
            self.post_message(self.Act("edit", mid))

    def action_remove(self) -> None:
        if (mid := self._current()) is not None:
            self.post_message(self.Act("remove", mid))

    def action_move(self, delta: int) -> None:
        if (mid := self._current()) is not None:
            self.post_message(self.Act("move", mid, delta))


class ApprovalBar(Static):
    """Shown while a tool call waits for approval."""

    DEFAULT_CSS = """
    ApprovalBar { display: none; background: $warning 30%; padding: 0 1; height: auto; }
    ApprovalBar.pending { display: block; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.call_id: str | None = None

    def show(self, view: SessionView) -> None:
        pending = list(view.pending_approvals.values())
        self.call_id = pending[0]["callId"] if pending else None
        self.set_class(bool(pending), "pending")
        if pending:
            p = pending[0]
            more = f"  (+{len(pending) - 1} more)" if len(pending) > 1 else ""
            servers = view.session.mcp_servers if view.session is not None else []
            self.update(
                Text.assemble(
                    ("Tool wants to run: ", "bold"),
                    f"{tool_label(p['name'], servers)} {p['arguments']}",
                    more,
                    ("   ctrl+y approve · ctrl+d deny", "dim"),
                )
            )


class StatusLine(Static):
    """Session title, status, queue state and the connection indicator."""

    DEFAULT_CSS = """
    StatusLine { height: 1; background: $panel; padding: 0 1; }
    """

    plain = ""  # what the line says, without styles (tests read it)

    def show(self, view: SessionView | None, connection: str) -> None:
        label, style = CONNECTION_LABELS.get(connection, (connection, ""))
        text = Text()
        if view is not None and view.session is not None:
            s = view.session
            text.append(s.title or "(untitled)", style="bold")
            text.append(f"  ·  {s.status}", style="yellow" if s.status != "idle" else "")
            if s.queue_paused:
                text.append("  ·  queue paused", style="red")
            text.append(f"  ·  {s.provider}/{s.model}", style="dim")
            for call_id, p in view.tool_progress.items():
                name = tool_label(view.tool_calls.get(call_id, {}).get("name", "tool"), s.mcp_servers)
                total = f"/{p['total']:g}" if p.get("total") is not None else ""
                text.append(f"  ·  ⚙ {name} {p['progress']:g}{total} {p.get('message') or ''}".rstrip(), style="cyan")
            if view.deleted:
                text.append("  ·  deleted", style="bold red")
        text.append("   ")
        text.append(label, style=style)
        self.plain = text.plain
        self.update(text)
