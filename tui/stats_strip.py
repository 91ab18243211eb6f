"""A pane's live statistics: speed, acceptance, timing, memory, and a per-round sparkline.

Every number comes from ``engines.stats.compute_stats`` over the events shown so far, so a
pane, a race and a saved session report the same values.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline

from specdeck.engines.events import Event, Round
from specdeck.engines.formatting import (
    MISSING, byte_size, duration, percent, plural, rate, times,
)
from specdeck.engines.stats import Stats, compute_stats
from specdeck.tui.fixed_text import FixedText


def speedup(stats: Stats, baseline_tokens_per_s: float | None) -> float | None:
    """This run's tokens/s over the plain run's; None until both are known."""
    if not baseline_tokens_per_s or not stats.tokens_per_s:
        return None
    return stats.tokens_per_s / baseline_tokens_per_s


def format_stats(stats: Stats, baseline_tokens_per_s: float | None, is_baseline: bool,
                 memory_estimate: int | None = None) -> str:
    """Three short lines (a pane may be a third of the terminal wide): speed, timing and
    memory (the measured peak next to the estimate made before loading, when there is
    one), acceptance."""
    ratio = speedup(stats, baseline_tokens_per_s)
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
    """The statistics under a pane; ``update_from`` recomputes from the shown events."""

    DEFAULT_CSS = """
    StatsStrip { height: auto; }
    StatsStrip > .stats-text { height: 3; }
    """

    def __init__(self, *, is_baseline: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.is_baseline = is_baseline
        self.stats: Stats = compute_stats([])

    def compose(self) -> ComposeResult:
        yield FixedText(classes="stats-text")
        sparkline = Sparkline([], classes="stats-sparkline")
        sparkline.tooltip = "accepted drafts per round"
        yield sparkline

    def update_from(self, events: list[Event], baseline_tokens_per_s: float | None,
                    memory_estimate: int | None = None) -> Stats:
        self.stats = compute_stats(events)
        self.query_one(FixedText).text = format_stats(
            self.stats, baseline_tokens_per_s, self.is_baseline, memory_estimate
        )
        self.query_one(Sparkline).data = [
float(e.accepted) for e in events if isinstance(e, Round)
        ]
        return self.stats
