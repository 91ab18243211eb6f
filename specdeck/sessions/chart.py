"""The sweep chart: speedup over plain decoding against drafts per round, as an SVG.

Plain SVG text, no plotting library: it opens in any browser, a README or a post. The x
axis is logarithmic (k = 1, 2, 4, 8, 16 evenly spaced); the dashed line at 1.0 is
break-even with plain decoding. ``auto`` has no k of its own: its speedup is a dotted
level across the plot in its series' colour, to be read against the fixed k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from specdeck.safe_text.plain import MESSAGE_CHARS, visible

WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 64, 200, 40, 56
#: A legend entry's characters at most (a longer one is cut in the middle with "…",
#: keeping its last ``LEGEND_TAIL``, and is whole in its tooltip); the picture grows
#: right to hold entries up to this long, at about ``CHAR_WIDTH`` pixels a character of
#: 12-pixel sans-serif.
LEGEND_CHARS, LEGEND_TAIL, CHAR_WIDTH = 48, 28, 7.0
#: Where a legend entry's text starts: right of its line sample.
LEGEND_X = WIDTH - RIGHT + 46
#: Colour-blind-safe palette (Okabe-Ito), plus a dash pattern per series.
COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
DASHES = ["", "6 3", "2 3", "8 3 2 3"]
#: The points a chart can place: drafts per round and speedups no sweep measures lie
#: outside (a file may claim a speedup of 1e308, which has no row; k = 0 no log).
PLOTTED_DRAFTS, PLOTTED_SPEEDUPS = (1, 2**16), (0.0, 100.0)


def _plotted(cell: dict) -> tuple[str, int | str] | None:
    """The series a cell belongs to (prompt, strategy and temperature) and its drafts per
    round (an int, or ``auto``); None for plain decoding and cells with nothing to plot
    (or values no chart can place: ``PLOTTED_DRAFTS``, ``PLOTTED_SPEEDUPS``)."""
    x, speedup = cell["depth"] if cell["strategy"] == "mtp" else cell["k"], cell["speedup"]
    if cell["strategy"] == "plain" or speedup is None or x is None:
        return None
    if not PLOTTED_SPEEDUPS[0] <= speedup <= PLOTTED_SPEEDUPS[1] or (
            type(x) is int and not PLOTTED_DRAFTS[0] <= x <= PLOTTED_DRAFTS[1]):
        return None
    if cell.get("correct") is False:
        return None
    name = cell["strategy"] + (f" n={cell['n']}" if cell["strategy"] == "ngram" else "")
    key = f"{cell['prompt']}: {name}" + (
        f" @{cell['temperature']:g}" if cell["temperature"] else ""
    )
    return key, x


def series_of(cells: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """(drafts per round, speedup) points per prompt, strategy and temperature (cells
    with a fixed k)."""
    series: dict[str, list[tuple[int, float]]] = {}
    for cell in cells:
        plotted = _plotted(cell)
        if plotted is not None and type(plotted[1]) is int:
            series.setdefault(plotted[0], []).append((plotted[1], cell["speedup"]))
    return {k: sorted(v) for k, v in series.items()}


def auto_levels(cells: list[dict]) -> dict[str, float]:
    """``auto``'s speedup per series (named as in ``series_of``)."""
    return {plotted[0]: cell["speedup"] for cell in cells
            if (plotted := _plotted(cell)) is not None and plotted[1] == "auto"}


def colour_index(series: dict[str, list[tuple[int, float]]], levels: dict[str, float],
                 key: str) -> int:
    """Which colour (and marker) a series or an auto level draws in: an auto level in
    its series' own, one with no fixed k in the next after the series."""
    if key in series:
        return list(series).index(key)
    return len(series) + [k for k in levels if k not in series].index(key)


@dataclass(frozen=True, slots=True)
class Axes:
    """The chart's ranges: the x values (drafts per round, on a log2 scale from ``x_lo``
    to ``x_hi``) and speedups from ``y_lo`` to ``y_hi`` in steps of 0.25, break-even
    (1.0) always inside. The SVG and the app's text chart share them."""

    xs: list[int]
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float

    @classmethod
    def of(cls, series: dict[str, list[tuple[int, float]]],
           levels: dict[str, float] | None = None) -> "Axes":
        xs = sorted({x for pts in series.values() for x, _ in pts}) or [1, 2]
        ys = [y for pts in series.values() for _, y in pts] + [1.0, *(levels or {}).values()]
        return cls(
            xs=xs, x_lo=math.log2(xs[0]),
            x_hi=max(math.log2(xs[-1]), math.log2(xs[0]) + 1),
            y_lo=min(0.0, math.floor(min(ys) * 4) / 4),
            y_hi=max(1.25, math.ceil(max(ys) * 4) / 4),
        )

    def x_share(self, x: float) -> float:
        """Where ``x`` falls along the x axis, 0 (left) to 1 (right)."""
        return (math.log2(x) - self.x_lo) / (self.x_hi - self.x_lo)

    def y_share(self, y: float) -> float:
        """Where ``y`` falls down the y axis, 0 (top) to 1 (bottom)."""
        return (self.y_hi - y) / (self.y_hi - self.y_lo)


def speedup_chart_svg(cells: list[dict], title: str = "Speedup over plain decoding") -> str:
    series, levels = series_of(cells), auto_levels(cells)
    axes = Axes.of(series, levels)
    xs, y_lo, y_hi = axes.xs, axes.y_lo, axes.y_hi
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    # The plot keeps its size; the picture grows down to hold a long legend.
    height = max(HEIGHT, TOP + 18 * (len(series) + len(levels)) + 16)
    # Each legend entry's whole text, once: a series' name begins with its prompt's,
    # which comes from a file (a JSONL "name" may hold control characters, which no XML
    # may), so it is shown visibly; auto's figure follows its level's.
    entries = [visible(name) for name in series] + [
        f"{visible(name)} auto {speedup:.2f}x" for name, speedup in levels.items()]
    longest = max((min(len(entry), LEGEND_CHARS) for entry in entries), default=0)
    width = max(WIDTH, math.ceil(LEGEND_X + CHAR_WIDTH * longest + 8))

    def px(x: float) -> float:
        return LEFT + axes.x_share(x) * plot_w

    def py(y: float) -> float:
        return TOP + axes.y_share(y) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{LEFT}" y="24" font-size="15" font-weight="bold">{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="#444"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#444"/>',
    ]
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">{x}</text>')
    steps = int(round((y_hi - y_lo) / 0.25))
    for i in range(steps + 1):
        y = y_lo + i * 0.25
        out.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + plot_w}" y2="{py(y):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 8}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.2f}</text>')
    out.append(
        f'<line x1="{LEFT}" y1="{py(1.0):.1f}" x2="{LEFT + plot_w}" y2="{py(1.0):.1f}" '
        'stroke="#000" stroke-dasharray="5 4"/>'
    )
    out.append(f'<text x="{LEFT + plot_w - 4}" y="{py(1.0) - 5:.1f}" text-anchor="end">break-even</text>')
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 14}" text-anchor="middle">'
        "drafts per round (k, MTP depth), log scale</text>"
    )
    out.append(
        f'<text transform="translate(18 {TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">'
        "speedup (x plain)</text>"
    )
    for i, (name, pts) in enumerate(series.items()):
        colour, dash = COLOURS[i % len(COLOURS)], DASHES[(i // len(COLOURS)) % len(DASHES)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash_attr}/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        ly = TOP + 10 + i * 18
        out.append(
            f'<line x1="{WIDTH - RIGHT + 16}" y1="{ly}" x2="{WIDTH - RIGHT + 40}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="2"{dash_attr}/>'
        )
        out.append(legend_text(entries[i], ly))
    for j, (name, speedup) in enumerate(levels.items()):
        colour = COLOURS[colour_index(series, levels, name) % len(COLOURS)]
        y = py(speedup)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" '
                   f'stroke="{colour}" stroke-width="2" stroke-dasharray="1 4"/>')
        out.append(f'<text x="{LEFT + 4}" y="{y - 5:.1f}" fill="{colour}">auto</text>')
        ly = TOP + 10 + (len(series) + j) * 18
        out.append(
            f'<line x1="{WIDTH - RIGHT + 16}" y1="{ly}" x2="{WIDTH - RIGHT + 40}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="2" stroke-dasharray="1 4"/>'
        )
        out.append(legend_text(entries[len(series) + j], ly))
    out.append("</svg>")
    return "\n".join(out)


def legend_text(entry: str, y: float) -> str:
    """A legend entry as SVG text, cut in the middle to ``LEGEND_CHARS`` (a name may run
    to thousands of characters; the strategy and auto's figure at its end stay whole),
    and whole in a tooltip."""
    return (f'<text x="{LEGEND_X}" y="{y + 4}"><title>{escape(_cut(entry, MESSAGE_CHARS))}'
            f'</title>{escape(_cut(entry, LEGEND_CHARS))}</text>')


def _cut(text: str, limit: int) -> str:
    """``text`` cut in the middle to ``limit`` characters, its last ``LEGEND_TAIL`` kept."""
    if len(text) <= limit:
        return text
    return text[:limit - LEGEND_TAIL - 1] + "…" + text[-LEGEND_TAIL:]
