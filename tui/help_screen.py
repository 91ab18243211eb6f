"""The help screen: every key of the playground, read from the app's own bindings (each
binding's tooltip is its help line) and ``FOCUS_KEYS``. It scrolls (arrows, page keys,
home, end), so it reads whole at 80x24."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specdeck.tui.glossary import glossary_table
from specdeck.tui.fitting_footer import FittingFooter

#: What the panes show, under the keys (what a person pressing ? looks for first).
PANES = (
    "Strategies run one after another (each with the machine to itself, after a warm-up) "
    "and stream live. Press g to race them: all panes replay in sync from their own "
    "start, so what you see is their real relative speed (a race shorter than 8 s is "
    "slowed down, every pane alike, and the status line says by how much). A finish "
    "time counts the prompt's prefill too; the speedups count decoding only, so the "
    "two differ a little.\n"
    "Token styles: underline = accepted draft, strike-through = rejected draft (shown "
    "where it was proposed), bold = correction, bold italic = bonus, plain = target.\n"
    "Noise: one run can be lucky. Each strategy is timed once and plain a second time "
    "after the others; a speedup within the spread of plain's two timings is marked as "
    "noise. Settings → repeats N times each strategy N times, taking turns, keeps its "
    "median run and shows the spread.\n"
    "Teaching: i opens the inspector on the focused pane's round; n and b step, j jumps, "
    "a click on a token inspects its round; k shows why this k wins or loses."
)

#: Textual binds tab on every screen, with no help line: listed after the app's keys.
FOCUS_KEYS = [
    Binding("tab", "app.focus_next", "Next pane", tooltip="move focus to the next pane "
            "(shift+tab: the one before); n, b, i, j, k, d and the scrolling keys act on it"),
]


def bindings_table(bindings: list[Binding]) -> Table:
    """Key, name and help line of each binding (the help line wraps in its column)."""
    table = Table(box=None, show_header=False, padding=(0, 1), expand=True)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(style="dim", ratio=1)
    for binding in bindings:
        table.add_row(binding.key_display or binding.key, Text(binding.description),
                      Text(binding.tooltip))
    return table


class HelpScreen(ModalScreen[None]):
    """The keys first, then what the panes show, then the glossary; any of escape, q or ?
    closes it."""

    AUTO_FOCUS = "#help-body"  # the keys scroll it at once

    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close"),
    ]

    def __init__(self, bindings: list[Binding]) -> None:
        super().__init__(id="help")
        self.listed = bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static("specdeck — keys (esc closes; arrows, page keys scroll)",
                         classes="dialog-title")
            yield Static(bindings_table([*self.listed, *FOCUS_KEYS]))
            yield Static("What the panes show", classes="dialog-title help-section")
            yield Static(PANES, classes="help-intro")
            yield Static("Glossary (w opens it alone)",
                         classes="dialog-title help-section help-glossary")
            yield Static(glossary_table())
        yield FittingFooter()
