"""One strategy's pane: its streamed text, statistics, and a display cursor over its events.

A pane keeps every event it received and shows a prefix of them. Live, the prefix follows
the stream; paused, it stays put and steps one round at a time; in a race, the playback
schedule moves it. The text, the statistics and the inspector all read the same prefix.
Within it one round may be *selected* (stepped back to, jumped to, or clicked): the
inspector explains that round instead of the last one shown.
"""

from __future__ import annotations

import re

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.message import Message
from textual.widgets import Static

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.events import Done, Event, Round
from specdeck.engines.core.stats import Stats
from specdeck.engines.core.strategies import OWN
from specdeck.safe_text.rich_text import literal
from specdeck.tui.cost_strip import CostStrip
from specdeck.tui.stats_strip import StatsStrip
from specdeck.tui.token_view import TokenView, round_tokens

#: A strategy name that can stand in a widget id as it is.
_ID_SAFE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
#: Characters of a status (a run's error) shown in the pane's bottom border.
STATUS_CHARS = 200
#: Panes narrower than this (columns, borders included) are stacked instead: at 40, every
#: figure of a strip still fits in a few lines.
MIN_PANE_WIDTH = 40


def pane_detail(strategy: str, settings: DecodeSettings | None) -> str:
    """The setting that defines a strategy, for its pane title; none while the settings
    are unknown (a session that does not record them). A pane named with its own drafts
    (``draft@grow``) says only what its name does not."""
    if settings is None:
        return ""
    if OWN in strategy:
        return f"n={settings.ngram_n}" if strategy.startswith(f"ngram{OWN}") else ""
    return {"draft": f"k={settings.num_draft_tokens}", "mtp": f"depth={settings.mtp_depth}",
            "ngram": f"n={settings.ngram_n} k={settings.ngram_k}",
            "chain": f"n={settings.ngram_n} k={settings.num_draft_tokens}"}.get(strategy, "")


def pane_id(strategy: str) -> str:
    """A widget id for a strategy's pane. A session may name strategies anything
    (``my draft``, ``dräft``): those are hex-encoded behind ``pane--`` (never the
    start of a plain name's id), so every name gets a distinct, valid id."""
    if _ID_SAFE.fullmatch(strategy):
        return f"pane-{strategy}"
    return f"pane--{strategy.encode('utf-8', 'surrogatepass').hex()}"


class StrategyPane(Vertical, can_focus=True):
    """Text and statistics of one strategy; focus a pane to step, inspect or scroll it."""

    BINDINGS = [
        Binding("up", "scroll_lines(-1)", "Scroll up", show=False, id="pane.line_up"),
        Binding("down", "scroll_lines(1)", "Scroll down", show=False, id="pane.line_down"),
        Binding("pageup", "scroll_pages(-1)", "Page up", show=False, id="pane.page_up"),
        Binding("pagedown", "scroll_pages(1)", "Page down", show=False, id="pane.page_down"),
        Binding("home", "scroll_home", "Start of the text", show=False, id="pane.home"),
        Binding("end", "scroll_end", "End of the text (and follow it)", show=False,
                id="pane.end"),
    ]

    class RoundPicked(Message):
        """A token of round ``number`` (from 0) was clicked in ``pane``."""

        def __init__(self, pane: "StrategyPane", number: int) -> None:
            super().__init__()
            self.pane = pane
            self.number = number

    def __init__(self, strategy: str, detail: str = "") -> None:
        super().__init__(id=pane_id(strategy), classes="pane")
        self.strategy = strategy
        self.events: list[Event] = []
        #: The rounds among ``events``, in order (round n is ``rounds[n]``).
        self.rounds: list[Round] = []
        self.shown = 0
        #: Rounds among the events shown.
        self.rounds_shown = 0
        #: The round the inspector explains, when not the last one shown.
        self.selected: int | None = None
        self.detail = detail
        self._status = ""
        self.status = "waiting"
        self._note = ""
        #: Estimated peak bytes (``engines.memory``), shown next to the measured peak.
        self.memory_estimate: int | None = None
        #: Decode tok/s of each timed run, when the strategy was timed more than once.
        self.runs: list[float] = []

    def compose(self) -> ComposeResult:
        yield Static(classes="pane-note")
        yield TokenView()
        yield StatsStrip(is_baseline=self.strategy == "plain")
        yield CostStrip(is_baseline=self.strategy == "plain")

    def on_resize(self, event: events.Resize) -> None:
        size = self.content_size
        self.strip.fit(size.width, size.height)
        if isinstance(self.parent, Panes):
            self.parent.level_strips()

    # -- scrolling the text (the view posts TokenView.Scrolled: linked panes follow) ----

    def action_scroll_lines(self, lines: int) -> None:
        view = self.view
        view.scroll_to(y=view.scroll_y + lines, animate=False, immediate=True)

    def action_scroll_pages(self, pages: int) -> None:
        view = self.view
        page = max(view.scrollable_content_region.height - 1, 1)
        view.scroll_to(y=view.scroll_y + pages * page, animate=False, immediate=True)

    def action_scroll_home(self) -> None:
        self.view.scroll_to(y=0, animate=False, immediate=True)

    def action_scroll_end(self) -> None:
        self.view.anchor()  # the end, and follow it from there

    @property
    def view(self) -> TokenView:
        return self.query_one(TokenView)

    @property
    def strip(self) -> StatsStrip:
        return self.query_one(StatsStrip)

    @property
    def stats(self) -> Stats:
        """The statistics of the events shown."""
        return self.strip.stats

    @property
    def detail(self) -> str:
        """The setting that defines the strategy (k=2, depth=1...), shown in the title."""
        return self._detail

    @detail.setter
    def detail(self, text: str) -> None:
        self._detail = text
        self.border_title = literal(f"{self.strategy} {text}".strip(), one_line=True)

    @property
    def status(self) -> str:
        """How the run stands (waiting, running, its finish reason or error), shown in
        the bottom border."""
        return self._status

    @status.setter
    def status(self, text: str) -> None:
        if text != self._status:  # setting the subtitle re-lays out the screen
            self._status = text
            self.border_subtitle = literal(text, one_line=True, limit=STATUS_CHARS)

    @property
    def note(self) -> str:
        """Why the strategy was not run (empty: it was, or will be), above the text."""
        return self._note

    @note.setter
    def note(self, text: str) -> None:
        self._note = text
        note = self.query_one(".pane-note", Static)
        note.update(literal(text))
        note.set_class(bool(text), "-shown")

    @property
    def complete(self) -> bool:
        """Every event received is shown and the run has ended."""
        return self.shown == len(self.events) and any(isinstance(e, Done) for e in self.events)

    def receive(self, events: list[Event]) -> None:
        """Keep new events of the run; showing them is the caller's choice."""
        self.events.extend(events)
        self.rounds.extend(e for e in events if isinstance(e, Round))

    def replace_events(self, events: list[Event]) -> None:
        """Hold another run of the strategy instead (its median repetition), shown whole."""
        self.reset(keep_events=False)
        self.receive(events)
        self.show_until(len(self.events))

    def reset(self, *, keep_events: bool) -> None:
        """Show nothing again; drop the events too unless they are to be replayed."""
        if not keep_events:
            self.events = []
            self.rounds = []
        self.shown = self.rounds_shown = 0
        self.selected = None
        self.view.clear()
        self.strip.clear()

    def show_until(self, count: int) -> bool:
        """Show the first ``count`` events; True when that changed what is shown."""
        count = max(0, min(count, len(self.events)))
        if count == self.shown:
            return False
        if count < self.shown:
            self.reset(keep_events=True)
        view = self.view
        new = self.events[self.shown : count]
        self.strip.add(new)
        for event in new:
            if isinstance(event, Round):
                view.append(round_tokens(event, self.strategy == "chain"), self.rounds_shown)
                self.rounds_shown += 1
            elif isinstance(event, Done):
                if event.tail:
                    view.append([(event.tail, "target")])
                self.status = event.reason + (f": {event.error}" if event.error else "")
        self.shown = count
        return True

    def step(self) -> bool:
        """Show one more round (and the end of the run right after the last one)."""
        rest = self.events[self.shown :]
        next_round = next((i for i, e in enumerate(rest) if isinstance(e, Round)), None)
        if next_round is None:
            return self.show_until(len(self.events))
        count = self.shown + next_round + 1
        if count < len(self.events) and isinstance(self.events[count], Done):
            count += 1
        return self.show_until(count)

    def current_number(self) -> int | None:
        """The number (from 0) of the round the inspector explains: the selected one, else
        the last one shown; None while no round is shown."""
        if self.selected is not None and self.selected < self.rounds_shown:
            return self.selected
        return self.rounds_shown - 1 if self.rounds_shown else None

    def current_round(self) -> Round | None:
        """The round the inspector explains."""
        number = self.current_number()
        return None if number is None else self.rounds[number]

    def show_round(self, number: int) -> None:
        """Select round ``number`` (from 0), showing the events up to it first when it is
        not shown yet, its tokens scrolled into view."""
        if number >= self.rounds_shown:
            target = self.rounds[number]
            self.show_until(next(i for i, e in enumerate(self.events) if e is target) + 1)
        self.selected = number
        self.view.bring_into_view(number)

    @on(TokenView.Picked)
    def _picked(self, message: TokenView.Picked) -> None:
        message.stop()
        self.post_message(self.RoundPicked(self, message.round))

    def refresh_stats(self, baseline_tokens_per_s: float | None,
                      plain_runs: list[float] = (), repeats: int = 1) -> Stats:
        """Draw the statistics of the events shown and what their rounds cost
        (``baseline``: plain's tokens/s; ``plain_runs``: its timed runs' tok/s)."""
        stats = self.strip.show(baseline_tokens_per_s, self.memory_estimate)
        self.query_one(CostStrip).show(stats, baseline_tokens_per_s, self.runs,
                                       list(plain_runs), repeats)
        return stats


class Panes(Container):
    """The panes side by side, or stacked (class ``-stacked``) where side by side would
    leave each narrower than ``MIN_PANE_WIDTH``; scrolling (``-crowded``) where sharing
    the height would leave each shorter than its min-height (app.tcss)."""

    def on_resize(self, event: events.Resize) -> None:
        self.arrange_panes()

    def arrange_panes(self) -> None:
        count = len(self.children)
        stacked = count > 1 and self.size.width < count * MIN_PANE_WIDTH
        self.set_class(stacked, "-stacked")
        least = max((pane.styles.min_height.value for pane in self.children
                     if pane.styles.min_height is not None), default=0)
        crowded = self.size.height < (count if stacked else 1) * least
        self.set_class(crowded, "-crowded")
        self.level_strips()
        if crowded:
            self.call_after_refresh(self._show_marked)

    def _show_marked(self) -> None:
        """Scrolled (``-crowded``), keep in view the pane whose round the inspector marks,
        else the focused one: opening the inspector is what crowds them."""
        panes = [pane for pane in self.children if isinstance(pane, StrategyPane)]
        shown = (next((p for p in panes if p.view.selected is not None), None)
                 or next((p for p in panes if p.has_focus_within), None))
        if shown is not None:
            self.scroll_to_widget(shown, animate=False)

    def level_strips(self) -> None:
        """Side by side, every strip takes as many lines as the tallest needs, so the
        same figure sits on the same row in every pane; stacked, each its own."""
        strips = [pane.strip for pane in self.children if isinstance(pane, StrategyPane)]
        level = 0 if self.has_class("-stacked") else max((s.needed for s in strips), default=0)
        for strip in strips:
            strip.level_with(level)
