"""The sweep chart in the terminal: speedup over plain decoding against drafts per round,
one line per prompt and strategy, with the break-even line at 1.0.

Drawn here in Braille dots (2 x 4 per character cell) rather than with a plotting
library: the chart is a few lines of a fixed shape, and it shares its series
(``specdeck.sessions.chart.series_of``), ranges (``Axes``: log2 x, 0.25 y steps) and colours with
the SVG that ``specdeck sweep`` writes. Measured points carry a marker per series, so
lines stay apart without colour; ``auto`` (no k of its own) is a dotted level across the
plot, in its series' colour, marked ``a`` at its leftmost cell no series drew.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text
from textual.widget import Widget

from specdeck.sessions.chart import COLOURS, Axes, colour_index
from specdeck.safe_text.plain import visible

#: One marker per series (cycled), drawn on each measured point.
MARKERS = "●■▲◆✚★○□△◇"
#: Braille dot bits by (column, row) within a character cell.
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
BREAK_EVEN = "┄"
#: An ``auto`` level across the plot.
AUTO_LEVEL = "┈"
#: Width of the y-axis labels ("1.25 ┤").
_LABEL = 6


@dataclass
class TextChart:
    """The chart as character rows; ``owners`` names the series index that drew each
    plot cell (None: empty, axis or break-even), for colouring, and ``legend_owners``
    each legend line's."""

    lines: list[str]
    owners: list[list[int | None]]
    legend: list[str]
    legend_owners: list[int | None]


def y_ticks(low: float, high: float, row_of) -> list[float]:
    """The y labels: every multiple of the finest step of 0.25, 0.5, 1, 2, 5, ... that
    gives each its own row (``row_of``), so that the labels are evenly spaced (with
    0.25 on too few rows, two shared a row and one was dropped: 2.25, then 1.75)."""
    for step in (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0):
        values = [m * step for m in range(math.ceil(low / step - 1e-9),
                                          math.floor(high / step + 1e-9) + 1)]
        if len({row_of(value) for value in values}) == len(values):
            break
    return values


def _tick(value: float) -> str:
    """A y label in the ``_LABEL - 2`` columns it has (up to ``PLOTTED_SPEEDUPS``' 100):
    2.25, 12.5, 100."""
    return f"{value:.{max(0, _LABEL - 3 - len(str(int(value))))}f}"


def plot_speedups(series: dict[str, list[tuple[int, float]]], width: int = 60,
                  height: int = 14, levels: dict[str, float] | None = None) -> TextChart:
    """Draw ``series`` (name -> (drafts, speedup) points) in a ``width`` x ``height`` plot
    area, with ``levels`` (name -> auto's speedup) across it, plus y labels (``y_ticks``)
    and x labels."""
    levels = levels or {}
    axes = Axes.of(series, levels)
    dot_w, dot_h = width * 2, height * 4
    bits = [[0] * width for _ in range(height)]
    owners: list[list[int | None]] = [[None] * width for _ in range(height)]
    glyphs: dict[tuple[int, int], str] = {}

    def dot(x: float, y: float) -> tuple[int, int]:
        return (round(axes.x_share(x) * (dot_w - 1)), round(axes.y_share(y) * (dot_h - 1)))

    def row_of(speedup: float) -> int:
        return dot(axes.xs[0], speedup)[1] // 4

    for i, points in enumerate(series.values()):
        dots = [dot(x, y) for x, y in points]
        for (c0, r0), (c1, r1) in zip(dots, dots[1:]):
            steps = max(abs(c1 - c0), abs(r1 - r0), 1)
            for s in range(steps + 1):
                c = round(c0 + (c1 - c0) * s / steps)
                r = round(r0 + (r1 - r0) * s / steps)
                bits[r // 4][c // 2] |= _DOTS[c % 2][r % 4]
                owners[r // 4][c // 2] = i
        for c, r in dots:
            glyphs[(r // 4, c // 2)] = MARKERS[i % len(MARKERS)]
            owners[r // 4][c // 2] = i

    even_row = row_of(1.0)
    labels = {row_of(value): _tick(value) for value in y_ticks(axes.y_lo, axes.y_hi, row_of)}
    labels[even_row] = "1.00"

    lines = []
    level_owners = {name: colour_index(series, levels, name) for name in levels}
    level_rows: dict[int, int] = {}  # row -> the level drawn along it
    for name, speedup in levels.items():
        row = row_of(speedup)
        owner = level_rows.setdefault(row, level_owners[name])
        free = [col for col in range(width) if owners[row][col] is None]
        if free:  # marked at its leftmost cell no series drew
            glyphs[(row, free[0])] = "a"
        if row == even_row:  # break-even shows through every other cell
            free = [col for col in free if col % 2 == 0 or (row, col) in glyphs]
        for col in free:
            owners[row][col] = owner
    for row in range(height):
        cells = []
        for col in range(width):
            if (row, col) in glyphs:
                cells.append(glyphs[(row, col)])
            elif bits[row][col]:
                cells.append(chr(0x2800 + bits[row][col]))
            elif row in level_rows and owners[row][col] is not None:
                cells.append(AUTO_LEVEL)
            else:
                cells.append(BREAK_EVEN if row == even_row else " ")
        tick = "┤" if row in labels else "│"
        lines.append(f"{labels.get(row, ''):>{_LABEL - 2}} {tick}" + "".join(cells))
    lines.append(" " * (_LABEL - 1) + "└" + "─" * width)
    x_labels = [" "] * (width + 4)
    for x in axes.xs:
        col = round(axes.x_share(x) * (dot_w - 1)) // 2
        for j, ch in enumerate(str(x)):
            x_labels[min(col + j, len(x_labels) - 1)] = ch
    lines.append(" " * _LABEL + "".join(x_labels).rstrip())
    lines.append(" " * _LABEL + "drafts per round (k, MTP depth), log scale")
    legend = [f"{MARKERS[i % len(MARKERS)]} {visible(name)}" for i, name in enumerate(series)]
    legend_owners: list[int | None] = list(range(len(series)))
    for name, speedup in levels.items():
        legend.append(f"a{AUTO_LEVEL} {visible(name)} auto: {speedup:.2f}x plain")
        legend_owners.append(level_owners[name])
    legend.append(f"{BREAK_EVEN * 2} break-even (1.00x plain): above it speculation wins")
    legend_owners.append(None)
    return TextChart(lines, owners, legend, legend_owners)


class SpeedupChart(Widget):
    """A chart of speedup series (a sweep's cells: ``specdeck.sessions.chart.series_of``), sized
    to the widget (the legend below it)."""

    DEFAULT_CSS = "SpeedupChart { height: auto; }"

    def __init__(self, series: dict[str, list[tuple[int, float]]], *, plot_height: int = 14,
                 levels: dict[str, float] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series = series
        self.levels = levels or {}
        self.plot_height = plot_height

    def chart(self, width: int) -> TextChart:
        return plot_speedups(self.series, max(20, width - _LABEL - 4), self.plot_height,
                             self.levels)

    def get_content_height(self, container, viewport, width: int) -> int:
        return self.plot_height + 3 + len(self.series) + len(self.levels) + 1

    def render(self) -> Text:
        chart = self.chart(self.size.width)
        text = Text(no_wrap=True)
        for row, line in enumerate(chart.lines):
            if row < len(chart.owners):
                plot = line[_LABEL:]
                text.append(line[:_LABEL], style="dim")
                for col, ch in enumerate(plot):
                    owner = chart.owners[row][col]
                    style = COLOURS[owner % len(COLOURS)] if owner is not None else (
                        "dim" if ch == BREAK_EVEN else "")
                    text.append(ch, style=style)
            else:
                text.append(line, style="dim")
            text.append("\n")
        for entry, owner in zip(chart.legend, chart.legend_owners):
            style = COLOURS[owner % len(COLOURS)] if owner is not None else "dim"
            text.append(entry + "\n", style=style)
        return text
