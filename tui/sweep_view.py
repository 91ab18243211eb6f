"""The sweep view: a saved sweep's table, its speedup chart and its recommendations.

Opened by ``specdeck replay SWEEP.json`` (as its own small app) or pushed over the
playground. It shows what ``specdeck sweep`` printed and drew, from the file alone: the
rows come from ``specdeck.sessions.sweep_file.cell_row``, the chart from the same series as the
SVG.
"""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from specdeck.sessions.chart import auto_levels, series_of
from specdeck.safe_text.rich_text import literal
from specdeck.sessions.sweep_file import COLUMNS, Sweep, cell_row, why_lines
from specdeck.safe_text.tui import LiteralNotify
from specdeck.tui.speedup_chart import SpeedupChart
from specdeck.tui.terminal import require_terminal, run_app_to_the_end
from specdeck.safe_text.plain import visible
from specdeck.tui.fitting_footer import FittingFooter


class SweepScreen(Screen[None]):
    """One sweep: table, chart, recommendations; escape closes it."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="sweep.close"),
        Binding("q", "app.quit", "Quit", id="sweep.quit"),
    ]

    def __init__(self, sweep: Sweep) -> None:
        super().__init__(id="sweep-view")
        self.sweep = sweep
        name = sweep.path.name if sweep.path else "sweep"
        self.sub_title = visible(f"sweep: {name}" + (" (partial)" if sweep.partial else ""))

    def compose(self) -> ComposeResult:
        sweep = self.sweep
        yield Header()
        with VerticalScroll(id="sweep-body"):
            where = ", ".join(str(sweep.machine[k]) for k in ("chip", "os") if sweep.machine.get(k))
            yield Static(literal(
                f"{sweep.created}" + (f" on {where}" if where else "")
                + (" · interrupted: the cells finished so far" if sweep.partial else ""),
                one_line=True,
            ), id="sweep-meta")
            table: DataTable = DataTable(id="sweep-table", zebra_stripes=True, cursor_type="row")
            table.add_columns(*COLUMNS)
            for cell in sweep.cells:
                table.add_row(*(literal(value, one_line=True) for value in cell_row(cell)))
            yield table
            yield Static("Speedup over plain decoding", classes="dialog-title")
            yield SpeedupChart(series_of(sweep.cells), levels=auto_levels(sweep.cells),
                               id="sweep-chart")
            yield Static(literal("\n".join(sweep.recommendations) or "no recommendations"),
                         id="sweep-recommendations")
            yield Static("Why: the cost model's account of each cell", classes="dialog-title",
                         id="sweep-why-title")
            yield Static(literal("\n".join(why_lines(sweep.cells)) or "no speculative cells"),
                         id="sweep-why")
        yield FittingFooter()

    def action_close(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.dismiss()
        else:
            self.app.exit()


class SweepApp(LiteralNotify, App[None]):
    """``specdeck replay SWEEP.json``: the sweep view on its own."""

    CSS_PATH = "app.tcss"
    TITLE = "specdeck"

    def __init__(self, sweep: Sweep) -> None:
        super().__init__()
        self.sweep = sweep

    def get_default_screen(self) -> Screen:
        return SweepScreen(self.sweep)


def run_sweep_view(sweep: Sweep) -> None:
    """Open a loaded sweep (``specdeck.sessions.sweep_file.load_sweep``) in the terminal (refused
    without one: ``require_terminal``)."""
    require_terminal()
    run_app_to_the_end(SweepApp(sweep))
