"""A pane's cost of a round, live and in replays: what a target pass buys, what a draft
step and a verify pass cost in plain steps, and the speedup that predicts next to the
one measured (and the textbook's, which takes a verify pass as one step).

The numbers are ``engines.cost_model``'s, priced in the plain pane's steps; the words
adapt to the pane's width. Under plain's own pane: the step every cost is counted in,
and how far two timings of it were apart (the noise a speedup must beat).
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.widget import Widget

from specdeck.engines.core.cost_model import CostModel
from specdeck.engines.core.formatting import MISSING, duration, percent, times
from specdeck.engines.core.stats import (
    Stats, cost_model, plain_step_seconds, speedup, speedup_noise, spread, within_noise,
)
from specdeck.tui.stats_strip import SEPARATOR, Figure, pack_figures

#: From this many columns the strip says it in words; below ``SHORT`` in the fewest.
WIDE, SHORT = 64, 46


def baseline_text(step: float | None, runs: list[float], repeats: int, width: int) -> str:
    """Under plain's pane: the step every cost is counted in and how far its timed runs
    were apart, in the fewest words where the most do not fit, each figure whole (a
    figure that does not fit is left out, never its number)."""
    apart = f"{percent(spread(runs))} apart" if len(runs) > 1 else ""
    how = "timed twice" if repeats == 1 else f"median of {len(runs)}"
    for unit, note in ((f"plain step = {duration(step)} (the unit of every cost)",
                        f"{how}: {apart}"),
                       (f"plain step = {duration(step)}", f"{how}: {apart}"),
                       (f"step {duration(step)}", f"{len(runs)} runs {apart}")):
        figures = [Figure(text, cell_len(text)) for text, shown in
                   ((unit, step), (note, apart)) if shown]
        packed = pack_figures(figures, width, max_lines=1)
        if packed and packed[0] == SEPARATOR.join(f.text for f in figures):
            return packed[0]
    return packed[0] if packed else ""


def cost_text(stats: Stats, model: CostModel | None, measured: float | None,
              noise: float | None, width: int) -> str:
    """Two lines for a speculative pane ``width`` columns wide (one while nothing was
    drafted yet)."""
    wide = width >= WIDE
    if model is None:
        return "no drafts yet: nothing to price"
    per_pass = MISSING if stats.tokens_per_round is None else f"{stats.tokens_per_round:.2f}"
    if model.baseline == "none":  # no plain step to price in: only the textbook's figure
        return (f"{per_pass} tok/pass · draft step {model.draft_step:.2f} verify passes\n"
                f"no plain step timed yet · textbook {times(model.textbook())}")
    mark = ""
    if within_noise(measured, noise):
        mark = " ≈ noise" if not wide else f" (within the noise, ±{percent(noise)})"
    elif noise is not None:
        mark = f" ±{percent(noise)}"
    if wide:
        return (f"{per_pass} tokens/pass · draft step {model.draft_step:.2f}, verify pass "
                f"{model.verify_pass:.2f} plain steps\n"
                f"predicts {times(model.predicted())} (textbook {times(model.textbook())}) · "
                f"measured {times(measured)}{mark}")
    if width < SHORT:  # a round's tokens and plain steps: their ratio is the prediction
        return (f"{model.mean_tokens():.2f} tok / {model.mean_cost():.2f} steps · "
                f"book {times(model.textbook())}\n"
                f"pred {times(model.predicted())} · meas {times(measured)}{mark}")
    return (f"{per_pass} tok/pass · draft {model.draft_step:.2f} verify "
            f"{model.verify_pass:.2f} steps\n"
            f"pred {times(model.predicted())} (book {times(model.textbook())}) · "
            f"meas {times(measured)}{mark}")


class CostStrip(Widget):
    """Under a pane's statistics; ``show`` what its shown events cost."""

    DEFAULT_CSS = """
    CostStrip { height: 2; }
    CostStrip.-baseline { height: 1; }
    """

    def __init__(self, *, is_baseline: bool = False) -> None:
        super().__init__(classes="-baseline" if is_baseline else "")
        self.is_baseline = is_baseline
        self.model: CostModel | None = None
        self._parts: tuple = ()

    def show(self, stats: Stats, baseline_tokens_per_s: float | None, runs: list[float],
             plain_runs: list[float], repeats: int) -> None:
        """Price ``stats`` in plain steps (``baseline_tokens_per_s``: the plain pane's
        speed); ``runs`` and ``plain_runs``: the timed runs' tok/s, when several."""
        step = plain_step_seconds(stats.tokens_per_s if self.is_baseline
                                  else baseline_tokens_per_s)
        self.model = None if self.is_baseline else cost_model(stats, step)
        measured = speedup(stats.tokens_per_s, baseline_tokens_per_s)
        parts = (stats.tokens_per_round, self.model, measured,
                 speedup_noise(runs, plain_runs), tuple(runs), step, repeats)
        if parts != self._parts:
            self._parts = parts
            self._stats = stats
            self.refresh()

    def render(self) -> Text:
        if not self._parts:
            return Text()
        _, model, measured, noise, runs, step, repeats = self._parts
        if self.is_baseline:
            return Text(baseline_text(step, list(runs), repeats, self.size.width))
        return Text(cost_text(self._stats, model, measured, noise, self.size.width))
