"""The help screen: every key of the playground, read from the app's own bindings."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specdeck.tui.glossary import glossary_table

INTRO = (
    "Strategies run one after another (each with the machine to itself, after a warm-up) "
    "and stream live. Press g to race them: all panes replay in sync from their own "
    "start, so what you see is their real relative speed (a race shorter than 8 s is "
    "slowed down, every pane alike, and the status line says by how much).\n"
    "Token styles: underline = accepted draft, strike-through = rejected draft (shown "
    "where it was proposed), bold = correction, bold italic = bonus, plain = target.\n"
    "Noise: one run can be lucky. Each strategy is timed once and plain a second time "
    "after the others; a speedup within the spread of plain's two timings is marked as "
    "noise. Settings → repeats N times each strategy N times, taking turns, keeps its "
    "median run and shows the spread.\n"
    "Teaching: i opens the inspector on the focused pane's round; n and b step, j jumps, "
    "a click on a token inspects its round; k shows why this k wins or loses."
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
        with VerticalScroll(id="help-body"):
            yield Static("specdeck — keys", classes="dialog-title")
            yield Static(INTRO, classes="help-intro")
            yield Static(bindings_table(self.listed))
            yield Static("Glossary (w opens it alone)", classes="dialog-title help-glossary")
            yield Static(glossary_table())
