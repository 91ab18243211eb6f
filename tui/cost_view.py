"""Why this k: the focused pane's rounds priced per draft position (key ``k``).

A round of k drafts costs k draft steps and one verify pass of k + 1 tokens, in plain
steps; it brings 1 + s_1 + ... + s_k tokens, where s_i, the survival at position i, is the
share of rounds whose first i drafts all lived (``engines.cost_model``). Under the
measured costs each position costs the same plain steps, so the view draws, per
position, the survival as a bar and the cost line across the bars: a position whose
survival stays above the line pays for itself, and where the bars fall below it is the
best k. Beside each bar: the tokens per pass, the cost and the speedup the run's own
figures predict had k stopped there; under it, the predicted and the textbook speedup
against k (the sweep chart's Braille plot, break-even at 1.00x).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from specdeck.engines.core.cost_model import BASELINE_WORDS, CostModel
from specdeck.engines.core.formatting import percent, plural, times
from specdeck.safe_text.rich_text import literal
from specdeck.tui.speedup_chart import SpeedupChart

#: Eighths of a cell, for bars with a smooth end.
_EIGHTHS = " ▏▎▍▌▋▊▉"
#: Columns around the bar: k (4), the survival and the three figures of the row (31),
#: and the marks ("  ◀ best, deepest drafted": 25).
_AROUND = 60


def summary(model: CostModel, measured: float | None) -> str:
    """The run's round in words: what it drafts and verifies, what that costs and buys,
    the prediction next to the measured and the textbook's speedup, and why they part."""
    drafts = plural(model.k, "token") if abs(model.drafts - model.k) < 0.05 else (
        f"up to {plural(model.k, 'token')} ({model.drafts:.3g} on average)")
    gap = model.gap_words()
    lines = [
        f"{'A drafting' if model.idle_share else 'A'} round drafts {drafts} at "
        f"{model.draft_step:.2f} plain steps each, then "
        f"verifies them and one more in one target pass of {model.verify_pass:.2f} plain "
        f"steps: {model.round_cost():.2f} plain steps buy {model.expected_tokens():.2f} "
        "tokens.",
        f"Predicted {times(model.predicted())} plain"
        + (f", measured {times(measured)}" if measured is not None else "")
        + f". {gap[0].upper()}{gap[1:]}.",
        f"Plain steps timed from {BASELINE_WORDS[model.baseline]}.",
    ]
    if model.idle_share:
        lines.append(f"{percent(model.idle_share)} of rounds drafted nothing (one token for "
                     f"{model.idle_pass:.2f} plain steps each): each speedup here counts them "
                     f"in; the drafting rounds alone run {times(drafting_speed(model))} plain.")
    return "\n".join(lines)


def drafting_speed(model: CostModel, k: int | None = None) -> float:
    """The speedup of the drafting rounds alone, the rounds that drafted nothing left out."""
    return model.expected_tokens(k) / model.round_cost(k)


def position_words(model: CostModel, chosen: bool = False) -> str:
    """What the cost line is and where it crosses; with ``chosen`` (a policy chose each
    round's k) how to see deeper is a fixed k, not ``]``."""
    best = model.best_k()
    text = (
        f"Each draft position costs {model.position_cost:.2f} plain steps (a draft step "
        f"{model.draft_step:.2f} + {model.verify_slope:.2f} more to verify, on the line from a "
        f"one-token pass at 1 step to the pass measured). At the best k's speed "
        f"({times(model.predicted(best))}) that time makes {model.cost_line():.2f} tokens: a "
        f"position pays while its survival stays right of │. Best k here: {best}"
    )
    deeper = ("set a fixed k in the settings (s)" if chosen else "raise k with ]")
    if best == model.k and model.k > 1:
        text += (f" (the last position measured: a larger k may be better still; {deeper} "
                 "to see)")
    elif model.k == 1:
        text += f" (only one position was measured: {deeper} to see past it)"
    alone = drafting_speed(model, best)
    if alone < 1.0 and times(alone) == times(1.0):  # slower, by less than it shows
        text += (f". Its rounds run no faster than plain steps ({times(alone)}): no k "
                 "gains here")
    elif alone < 1.0:
        text += (f". Even so its rounds run {times(alone)} plain: no k pays here, plain "
                 "steps (k = 0) are faster")
    return text + "."


def bar(share: float, width: int, line_at: int) -> Text:
    """A survival bar ``width`` cells wide, the cost line drawn at cell ``line_at``."""
    eighths = round(max(0.0, min(1.0, share)) * width * 8)
    cells = ["█"] * (eighths // 8) + ([_EIGHTHS[eighths % 8]] if eighths % 8 else [])
    cells += [" "] * (width - len(cells))
    text = Text()
    for i, ch in enumerate(cells):
        if i == line_at:
            text.append("│", "bold yellow")
        else:
            text.append(ch, "cyan")
    return text


def position_rows(model: CostModel, width: int, chosen: bool = False) -> Text:
    """A row per draft position: k, the survival bar across the cost line, the survival,
    and the tokens per pass, cost and predicted speedup had the run stopped at that k.
    The deepest row is the run's k, or (``chosen``: a policy chose each round's k, so no
    one row is the run) the deepest it drafted."""
    bar_width = max(10, min(40, width - _AROUND))
    line_at = min(bar_width - 1, round(model.cost_line() * bar_width))
    best = model.best_k()
    head = f"{'k':>2}  {'survival':<{bar_width}} {'':>4}  {'tok/pass':>8} {'cost':>6} {'predicts':>8}"
    out = Text(head + "\n", style="bold")
    for k in range(1, model.k + 1):
        row = Text(f"{k:>2}  ")
        row.append_text(bar(model.survival[k - 1], bar_width, line_at))
        row.append(f" {percent(model.survival[k - 1]):>4}  {model.expected_tokens(k):>8.2f} "
                   f"{model.round_cost(k):>6.2f} {times(model.predicted(k)):>8}")
        ran = "deepest drafted" if chosen else "this run"
        marks = [m for m, on in (("best", k == best), (ran, k == model.k)) if on]
        if marks:
            row.append("  ◀ " + ", ".join(marks), "bold")
        out.append_text(row)
        out.append("\n")
    return out


def speedup_series(model: CostModel) -> dict[str, list[tuple[int, float]]]:
    """Predicted and textbook speedup at k = 1, 2, 4, ... and the last k measured (the
    chart's x axis is logarithmic)."""
    ks = sorted({2**i for i in range(5) if 2**i <= model.k} | {model.k})
    return {
        "predicted, verify as measured": [(k, model.predicted(k)) for k in ks],
        "textbook, verify = 1 plain step": [(k, model.textbook(k)) for k in ks],
    }


class PositionTable(Widget):
    """The rows of ``position_rows``, drawn to the widget's width."""

    DEFAULT_CSS = "PositionTable { height: auto; }"

    def __init__(self, model: CostModel, chosen: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.model, self.chosen = model, chosen

    def get_content_height(self, container, viewport, width: int) -> int:
        return self.model.k + 1

    def render(self) -> Text:
        return position_rows(self.model, self.size.width, self.chosen)


class CostScreen(ModalScreen[None]):
    """The cost of the focused pane's rounds, per draft position; escape, q or k closes."""

    BINDINGS = [Binding("escape,q,k", "dismiss", "Close", id="cost.close")]

    def __init__(self, title: str, model: CostModel | None, measured: float | None,
                 rounds: int, chosen: bool = False) -> None:
        super().__init__(id="cost")
        self.heading = title
        self.model = model
        self.measured = measured
        self.rounds = rounds
        #: Whether a policy (``auto``, ``grow``, ``pmin``) chose the rounds' k.
        self.chosen = chosen

    def compose(self) -> ComposeResult:
        model = self.model
        with VerticalScroll(id="cost-body"):
            yield Static(literal(f"{self.heading} · why this k · from {self.rounds} rounds "
                                 "(escape closes)", one_line=True), classes="dialog-title")
            if model is None:
                yield Static("Nothing drafted in the rounds shown: there is nothing to price. "
                             "Focus a speculative pane (tab) once it has rounds, and press k.",
                             id="cost-summary")
                return
            yield Static(summary(model, self.measured), id="cost-summary")
            yield Static("Per draft position: survival and the cost line",
                         classes="cost-heading")
            yield Static(position_words(model, self.chosen), classes="cost-words")
            yield PositionTable(model, self.chosen, id="cost-positions")
            yield Static("Speedup against k, from this run's survival and costs",
                         classes="cost-heading")
            yield SpeedupChart(speedup_series(model), plot_height=8, id="cost-chart")
