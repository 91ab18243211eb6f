"""A pane's live statistics: speed, acceptance, timing, memory, and a per-round sparkline.

Every number comes from an ``engines.stats.StatsAccumulator`` fed the events as the pane
shows them (``compute_stats`` is the same fold), so a pane, a race and a saved session
report the same values, and a frame costs the same at the end of a long run as at its
start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline

from specdeck.engines.core.events import Event, Round
from specdeck.engines.core.formatting import (
    MISSING, byte_size, duration, percent, plural, rate, times,
)
from specdeck.engines.core.stats import Stats, StatsAccumulator, speedup
from specdeck.tui.fixed_text import FixedText


#: The sparkline keeps at most this many points, so drawing it stays cheap however long
#: the run: past that, each point stands for the most drafts accepted in 2, 4, ...
#: consecutive rounds (the sparkline's own summary of a bar is the maximum too).
SPARKLINE_POINTS = 512
#: A short pane gives its text at least this many lines before the strip takes more.
MIN_TEXT_LINES = 3
#: Between two figures on a line.
SEPARATOR = " · "


class RoundSeries:
    """A number per round for a sparkline (accepted drafts; the drafts ``auto`` chose),
    halved (the larger of each pair) whenever it outgrows ``SPARKLINE_POINTS``."""

    def __init__(self, limit: int = SPARKLINE_POINTS) -> None:
        self.limit = limit
        self._points: list[float] = []
        #: Rounds per point, and the point still filling (its rounds so far).
        self._span = 1
        self._open: float | None = None
        self._open_rounds = 0

    def add(self, accepted: float) -> None:
        self._open = accepted if self._open is None else max(self._open, accepted)
        self._open_rounds += 1
        if self._open_rounds == self._span:
            self._points.append(self._open)
            self._open, self._open_rounds = None, 0
            if len(self._points) > self.limit:
                pairs = self._points
                if len(pairs) % 2:  # the odd one out starts the next, wider point
                    self._open, self._open_rounds = pairs.pop(), self._span
                self._points = [max(a, b) for a, b in zip(pairs[::2], pairs[1::2])]
                self._span *= 2

    @property
    def points(self) -> list[float]:
        """A new list (the sparkline repaints when its data changes)."""
        return self._points + ([] if self._open is None else [self._open])


@dataclass(frozen=True)
class Figure:
    """One figure of the strip: its text, and the widest it is expected to get. Lines are
    packed by the widest, so they do not reflow as numbers grow; ``breakable`` (the
    acceptance by position, k numbers) may go on over more than one line."""

    text: str
    widest: int
    breakable: bool = False


def _figure(text: str, widest: str, breakable: bool = False) -> Figure:
    return Figure(text, max(cell_len(text), cell_len(widest)), breakable)


def stats_figures(stats: Stats, baseline_tokens_per_s: float | None, is_baseline: bool,
                  memory_estimate: int | None = None, *, sampled: bool = False,
                  chosen_k: int | None = None, policy: str = "auto") -> list[Figure]:
    """What a pane's strip says, most important first: speed, speedup and acceptance
    come first, so the first line (all a short pane has room for) holds them. A
    ``sampled`` run (temperature > 0) shows beside its acceptance what mlx-lm's
    exact-match rule would have kept of the same drafts; one under a draft-length
    ``policy`` the k it chose last."""
    ratio = speedup(stats.tokens_per_s, baseline_tokens_per_s)
    versus = "baseline" if is_baseline else (MISSING if ratio is None else f"{times(ratio)} plain")
    figures = [_figure(rate(stats.tokens_per_s), "9999.9 tok/s"),
               _figure(versus, "99.99x plain")]
    if stats.proposed:
        positions = stats.acceptance_by_position
        by_position = " ".join(f"{p * 100:.0f}" for p in positions)
        mean = MISSING if stats.mean_accepted is None else f"{stats.mean_accepted:.2f}"
        figures.append(_figure(f"accept {percent(stats.acceptance_rate)}", "accept 100%"))
        if sampled and stats.exact_match_acceptance_rate is not None:
            figures.append(_figure(
                f"mlx-lm rule {percent(stats.exact_match_acceptance_rate)}",
                "mlx-lm rule 100%"))
        figures += [
            _figure(f"mean len {mean}", "mean len 16.00"),
            _figure(f"by pos {by_position} %", "by pos " + "100 " * len(positions) + "%",
                    breakable=True),
        ]
    else:
        figures.append(_figure("no drafts", ""))
    if chosen_k is not None:
        figures.append(_figure(f"{policy} k {chosen_k}", f"{policy} k 16"))
    figures += [
        _figure(f"ttft {duration(stats.ttft_seconds)}", "ttft 999 ms"),
        # The measured peak next to the estimate made before loading, when there is one.
        _figure(f"peak {byte_size(stats.peak_memory_bytes)}" + (
            "" if memory_estimate is None else f" / est {byte_size(memory_estimate)}"),
            "peak 999.9 MiB" + ("" if memory_estimate is None else " / est 999.9 MiB")),
    ]
    figures += [_figure(plural(stats.generated_tokens, "token"), "9,999 tokens"),
                _figure(f"rounds {stats.rounds:,}", "rounds 9,999")]
    return figures


def _pieces(figure: Figure, width: int) -> list[Figure]:
    """A figure wider than a line: a breakable one in parts that each fit (by the widest
    number), any other cut short with ``…``."""
    if figure.widest <= width:
        return [figure]
    if not figure.breakable:
        text = figure.text if cell_len(figure.text) <= width else (
            figure.text[: max(width - 1, 0)] + "…")
        return [Figure(text, width)]
    words, parts, line = figure.text.split(" "), [], ""
    per_word = max(cell_len(w) for w in figure.text.split(" ")) if figure.text else 0
    per_word = max(per_word, 3)
    for word in words:
        if line and cell_len(line) + 1 + per_word > width:
            parts.append(Figure(line, width))
            line = ""
        line = f"{line} {word}" if line else word
    return parts + [Figure(line, width)]


def pack_figures(figures: list[Figure], width: int,
                 max_lines: int | None = None) -> list[str]:
    """The figures on lines of at most ``width`` cells, in order, `` · `` between figures
    on one line, never a figure cut in two (but for a breakable one wider than a line);
    at most ``max_lines`` lines (the figures after them left out)."""
    lines: list[list[Figure]] = [[]]
    used = 0
    for figure in figures:
        for piece in _pieces(figure, max(width, 1)):
            need = piece.widest + (len(SEPARATOR) if lines[-1] else 0)
            if lines[-1] and used + need > width:
                lines.append([])
                used, need = 0, piece.widest
            lines[-1].append(piece)
            used += need
    texts = [SEPARATOR.join(f.text for f in line) for line in lines if line]
    return texts[:max_lines] if max_lines is not None else texts


class StatsStrip(Vertical):
    """The statistics under a pane: ``add`` the events the pane shows, ``show`` the
    numbers (as often as they can be read). ``fit`` gives it the pane's room: its lines
    adapt to the width (every figure at 36 columns and more), and a short pane keeps the
    first lines (speed, speedup, acceptance) and leaves the text at least
    ``MIN_TEXT_LINES``; the sparklines go first (accepted drafts per round, and under it,
    for ``auto``, the drafts chosen per round)."""

    DEFAULT_CSS = """
    StatsStrip { height: auto; }
    StatsStrip > .stats-text { height: 1; }
    """

    def __init__(self, *, is_baseline: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.is_baseline = is_baseline
        self._width = 0
        self._room: int | None = None
        self._figures: list[Figure] = []
        #: The widest of each figure the lines were last packed by: while they hold,
        #: a new frame repaints without laying out the screen.
        self._packed_by: list[tuple[int, bool]] | None = None
        self._max_lines: int | None = None
        self._height = 1
        #: Lines the figures need at this width, and the fewest to show (strips side by
        #: side take the same height, so their lines stay level).
        self.needed = 0
        self._floor = 0
        self.clear()

    def compose(self) -> ComposeResult:
        yield FixedText(classes="stats-text")
        sparkline = Sparkline([], classes="stats-sparkline")
        sparkline.tooltip = "accepted drafts per round"
        yield sparkline
        chosen = Sparkline([], classes="stats-k-sparkline")
        chosen.tooltip = "drafts auto chose per round (0: a plain step)"
        chosen.display = False
        yield chosen

    @property
    def stats(self) -> Stats:
        """The statistics of the events added so far."""
        return self._accumulator.stats

    @property
    def lines(self) -> list[str]:
        """The lines shown now."""
        return self.query_one(FixedText).text.split("\n")

    def clear(self) -> None:
        """Forget every event (the pane shows none again)."""
        self._accumulator = StatsAccumulator()
        self._series = RoundSeries()
        #: The drafts its policy chose per round (``pmin``: drafted), and the last
        #: (None: a fixed k).
        self._chosen = RoundSeries()
        self._auto_k: int | None = None
        self._policy = "auto"
        #: Whether a round drew uniforms (temperature > 0): the acceptance rules differ.
        self._sampled = False

    def add(self, events: Iterable[Event]) -> None:
        for event in events:
            self._accumulator.add(event)
            if isinstance(event, Round):
                self._series.add(float(event.accepted))
                self._sampled = self._sampled or event.uniforms is not None
                if event.length is not None:
                    self._policy = event.length.policy
                    self._auto_k = (len(event.drafted) if self._policy == "pmin"
                                    else event.length.k)
                    self._chosen.add(float(self._auto_k))

    def fit(self, width: int, room: int) -> None:
        """The pane's inner ``width`` and height (``room``) changed: lay the lines out
        again."""
        if (width, room) != (self._width, self._room):
            self._width, self._room = width, room
            self._packed_by = None
            self._draw()

    def level_with(self, lines: int) -> None:
        """Take at least ``lines`` lines (room permitting), as the strips beside it do."""
        if lines != self._floor:
            self._floor = lines
            self._packed_by = None
            self._draw()

    def show(self, baseline_tokens_per_s: float | None,
             memory_estimate: int | None = None) -> Stats:
        stats = self.stats
        self._figures = stats_figures(stats, baseline_tokens_per_s, self.is_baseline,
                                      memory_estimate, sampled=self._sampled,
                                      chosen_k=self._auto_k, policy=self._policy)
        self._draw()
        self.query_one(".stats-sparkline", Sparkline).data = self._series.points
        if self._auto_k is not None:
            self.query_one(".stats-k-sparkline", Sparkline).data = self._chosen.points
        return stats

    def _draw(self) -> None:
        if not self._width or self._room is None:
            return  # not laid out yet
        shape = [(f.widest, f.breakable) for f in self._figures]
        if shape != self._packed_by:
            self._packed_by = shape
            self.needed = len(pack_figures(self._figures, self._width))
            wanted = max(self.needed, self._floor)
            spark = self._room >= wanted + 1 + MIN_TEXT_LINES
            # Under it, the drafts auto chose, where there is room for a second one.
            chosen = self._auto_k is not None and self._room >= wanted + 2 + MIN_TEXT_LINES
            self._max_lines = wanted if spark else max(1, min(wanted,
                                                             self._room - MIN_TEXT_LINES))
            if self._height != self._max_lines:  # a new height lays out the screen
                self._height = self._max_lines
                self.query_one(FixedText).styles.height = self._max_lines
            self.query_one(".stats-sparkline", Sparkline).display = spark
            self.query_one(".stats-k-sparkline", Sparkline).display = chosen
        self.query_one(FixedText).text = "\n".join(
            pack_figures(self._figures, self._width, self._max_lines))
