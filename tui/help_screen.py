"""The help screen: every key of the playground, read from the app's own bindings."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

INTRO = (
    "Strategies run one after another (each with the machine to itself, after a warm-up) "
    "and stream live. Press g to race them: all panes replay in sync from their own "
    "start at true speed, so what you see is their real relative speed.\n"
    "Token styles: underline = accepted draft, strike-through = rejected draft (shown "
    "where it was proposed), bold = correction, bold italic = bonus, plain = target."
)


def bindings_table(bindings: list[Binding]) -> Table:
    table = Table(box=None, show_header=False, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for binding in bindings:
        table.add_row(binding.key_display or binding.key, binding.description)
    return table


class HelpScreen(ModalScreen[None]):
    """Keys and what the panes show; any of escape, q or ? closes it."""

    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close"),
    ]

    def __init__(self, bindings: list[Binding]) -> None:
        super().__init__(id="help")
        self.listed = bindings

    def compose(self) -> ComposeResult:
        with Vertical(id="help-body"):
            yield Static("specdeck — keys", classes="dialog-title")
            yield Static(INTRO, classes="help-intro")
            yield Static(bindings_table(self.listed))
