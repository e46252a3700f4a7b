"""The session switcher: a modal list of your sessions by title, plus "new session"."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from ..domain.models import Session

NEW = "__new__"


class SessionSwitcher(ModalScreen[str | None]):
    """Dismisses with the chosen session id, :data:`NEW`, or None (escape)."""

    DEFAULT_CSS = """
    SessionSwitcher { align: center middle; }
    SessionSwitcher > Vertical { width: 80%; height: 70%; border: thick $accent; background: $surface; }
    """
    BINDINGS: ClassVar = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, sessions: list[Session], current: str | None) -> None:
        super().__init__()
        self.sessions = sessions
        self.current = current

    def compose(self) -> ComposeResult:
        options = [Option(Text("+ new session", style="bold"), id=NEW)]
        for s in self.sessions:
            mark = "▸ " if s.id == self.current else "  "
            options.append(
                Option(
                    Text.assemble(
                        mark, (s.title or "(untitled)", "bold"), f"  ·  {s.status}", (f"  {s.id[:8]}", "dim")
                    ),
                    id=s.id,
                )
            )
        with Vertical():
            yield Label("Sessions (enter to open, escape to close)")
            yield OptionList(*options, id="sessions")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
