"""The session switcher: a modal list of your sessions by title, filtered as you type, plus "new session".

The filter box has the focus: typing narrows the list (titles containing what is typed, any case), Up and Down
move the highlight, Enter opens the highlighted session. The highlight starts on a session, never on "new
session", so Enter alone never makes an empty chat: a new one is made only by choosing that entry.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from server.domain.models import Session

NEW = "__new__"


def matches(session: Session, text: str) -> bool:
    """Whether ``session`` stays in the list for the filter ``text`` (its title, or its id's start)."""
    wanted = text.strip().casefold()
    title = (session.title or "(untitled)").casefold()
    return not wanted or wanted in title or session.id.startswith(wanted)


class SessionSwitcher(ModalScreen[str | None]):
    """Dismisses with the chosen session id, :data:`NEW`, or None (escape)."""

    DEFAULT_CSS = """
    SessionSwitcher { align: center middle; }
    SessionSwitcher > Vertical { width: 80%; height: 70%; border: thick $accent; background: $surface; }
    """
    BINDINGS: ClassVar = [
        Binding("escape", "dismiss(None)", "Close"),
        Binding("down", "move(1)", "Next", show=False, priority=True),
        Binding("up", "move(-1)", "Previous", show=False, priority=True),
    ]

    def __init__(self, sessions: list[Session], current: str | None) -> None:
        super().__init__()
        self.sessions = sessions
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Sessions (type to filter, enter to open, escape to close)")
            yield Input(placeholder="filter by title", id="filter")
            yield OptionList(*self._options(""), id="sessions")

    def on_mount(self) -> None:
        self._highlight_first()
        self.query_one("#filter", Input).focus()

    def _options(self, text: str) -> list[Option]:
        options = []
        for s in self.sessions:
            if not matches(s, text):
                continue
            mark = "▸ " if s.id == self.current else "  "
            title = (s.title or "(untitled)", "bold")
            options.append(Option(Text.assemble(mark, title, f"  ·  {s.status}", (f"  {s.id[:8]}", "dim")), id=s.id))
        options.append(Option(Text("+ new session", style="bold"), id=NEW))
        return options

    def _highlight_first(self) -> None:
        self.query_one("#sessions", OptionList).highlighted = 0  # a session when any matches, else "new"

    def on_input_changed(self, event: Input.Changed) -> None:
        options = self.query_one("#sessions", OptionList)
        options.set_options(self._options(event.value))
        self._highlight_first()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        options = self.query_one("#sessions", OptionList)
        if options.highlighted is not None:
            self.dismiss(options.get_option_at_index(options.highlighted).id)

    def action_move(self, step: int) -> None:
        options = self.query_one("#sessions", OptionList)
        if step > 0:
            options.action_cursor_down()
        else:
            options.action_cursor_up()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
