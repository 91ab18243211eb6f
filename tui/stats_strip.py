"""A pane's live statistics: speed, acceptance, timing, memory, and a per-round sparkline.

Every number comes from an ``engines.stats.StatsAccumulator`` fed the events as the pane
shows them (``compute_stats`` is the same fold), so a pane, a race and a saved session
report the same values, and a frame costs the same at the end of a long run as at its
start.
"""

from __future__ import annotations

from typing import Iterable

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline

from specdeck.engines.events import Event, Round
from specdeck.engines.formatting import (
    MISSING, byte_size, duration, percent, plural, rate, times,
)
from specdeck.engines.stats import Stats, StatsAccumulator, speedup
from specdeck.tui.fixed_text import FixedText


#: The sparkline keeps at most this many points, so drawing it stays cheap however long
#: the run: past that, each point stands for the most drafts accepted in 2, 4, ...
#: consecutive rounds (the sparkline's own summary of a bar is the maximum too).
SPARKLINE_POINTS = 512


class RoundSeries:
    """Accepted drafts per round for the sparkline, halved (the larger of each pair)
    whenever it outgrows ``SPARKLINE_POINTS``."""

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


def format_stats(stats: Stats, baseline_tokens_per_s: float | None, is_baseline: bool,
                 memory_estimate: int | None = None) -> str:
    """Three short lines (a pane may be a third of the terminal wide): speed, timing and
    memory (the measured peak next to the estimate made before loading, when there is
    one), acceptance."""
    ratio = speedup(stats.tokens_per_s, baseline_tokens_per_s)
    versus = "baseline" if is_baseline else (MISSING if ratio is None else f"{times(ratio)} plain")
    lines = [
        f"{rate(stats.tokens_per_s)} · {versus} · rounds {stats.rounds}",
        f"ttft {duration(stats.ttft_seconds)} · peak {byte_size(stats.peak_memory_bytes)}"
        + ("" if memory_estimate is None else f" / est {byte_size(memory_estimate)}")
        + f" · {plural(stats.generated_tokens, 'token')}",
    ]
    if stats.proposed:
        by_position = " ".join(f"{p * 100:.0f}" for p in stats.acceptance_by_position)
        mean = MISSING if stats.mean_accepted is None else f"{stats.mean_accepted:.2f}"
        lines.append(
            f"accept {percent(stats.acceptance_rate)} · mean len {mean} · by pos {by_position} %"
        )
    else:
        lines.append("no drafts")
    return "\n".join(lines)


class StatsStrip(Vertical):
    """The statistics under a pane: ``add`` the events the pane shows, ``show`` the
    numbers (as often as they can be read)."""

    DEFAULT_CSS = """
    StatsStrip { height: auto; }
    StatsStrip > .stats-text { height: 3; }
    """

    def __init__(self, *, is_baseline: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.is_baseline = is_baseline
        self.clear()

    def compose(self) -> ComposeResult:
        yield FixedText(classes="stats-text")
        sparkline = Sparkline([], classes="stats-sparkline")
        sparkline.tooltip = "accepted drafts per round"
        yield sparkline

    @property
    def stats(self) -> Stats:
        """The statistics of the events added so far."""
        return self._accumulator.stats

    def clear(self) -> None:
        """Forget every event (the pane shows none again)."""
        self._accumulator = StatsAccumulator()
        self._series = RoundSeries()

    def add(self, events: Iterable[Event]) -> None:
        for event in events:
            self._accumulator.add(event)
            if isinstance(event, Round):
                self._series.add(float(event.accepted))

    def show(self, baseline_tokens_per_s: float | None,
             memory_estimate: int | None = None) -> Stats:
        stats = self.stats
        self.query_one(FixedText).text = format_stats(
            stats, baseline_tokens_per_s, self.is_baseline, memory_estimate
        )
        self.query_one(Sparkline).data = self._series.points
        return stats
