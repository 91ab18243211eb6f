"""The race: every pane replayed from its own t = 0 on one clock."""

from __future__ import annotations

from specdeck.engines.core.events import Trace
from specdeck.engines.core.formatting import duration, ordinal, percent, times
from specdeck.engines.core.stats import Verdict, verdicts
from specdeck.safe_text.plain import visible
from specdeck.sessions.playback import Playback, Schedule, finish_places, next_speed, stretch_for
from specdeck.tui.pane import StrategyPane
from specdeck.tui.sources import Phase, ReplaySource


#: Race frames per second.
RACE_FPS = 30


def _clause(v: Verdict, first: bool, brief: bool) -> str:
    """One strategy's part of ``race_sentence``: its outcome, speedup and acceptance
    (the first clause says what the figures are, the others follow it)."""
    name, ratio = visible(v.strategy, 40), times(v.speedup)
    if v.acceptance is None:
        drafts = "no drafts" if brief else "it drafted nothing"
    else:
        what = " accepted" if brief else " of its drafts accepted"
        drafts = percent(v.acceptance) + (what if first else "" if brief else " accepted")
    if brief:  # a run that drafted nothing neither won nor lost by its guesses
        return f"{name} {'' if v.acceptance is None else v.outcome + ' '}{ratio}, {drafts}"
    if v.outcome == "tied":
        return f"{name} tied with plain at {ratio} (within the noise), {drafts}"
    return f"{name} {v.outcome} at {ratio}{' plain' if first else ''}, {drafts}"


def race_sentence(found: list[Verdict]) -> tuple[str, str]:
    """Why each strategy won or lost against plain, in one sentence from its own
    figures (``verdicts``, fastest first), and that in fewer words for a status line of
    80 columns: the fastest and the slowest only."""
    ends = found if len(found) < 3 else [found[0], found[-1]]
    return ("; ".join(_clause(v, i == 0, brief=False) for i, v in enumerate(found)),
            "; ".join(_clause(v, i == 0, brief=True) for i, v in enumerate(ends)))


class Racing:
    """The app's race, driven by a timer on the panes' container. Mixed into ``SpecdeckApp``
    (``tui.app``), whose state it shares."""

    def action_race(self) -> None:
        if self.phase.streaming:
            self.notify("wait until every strategy is measured (or c to cancel)")
            return
        if not any(pane.events for pane in self.panes):
            self.notify("nothing to race yet")
            return
        self.start_race()

    def start_race(self) -> None:
        """Replay every pane from its own t = 0 on one clock (slowed down, all alike, when
        the slowest run is shorter than ``MIN_RACE_SECONDS``). A race starts running:
        panes paused to step through a run are let go."""
        self._stop_race()
        self.paused = False
        traces = {p.strategy: Trace(p.strategy, p.events) for p in self.panes}
        schedule = Schedule.of(traces)
        self.playback = Playback(schedule, speed=self.speed,
                                 stretch=stretch_for(schedule.duration))
        self._places = finish_places(schedule.ends)
        for pane in self.panes:
            pane.reset(keep_events=True)
            if pane.events:  # a pane whose strategy did not run keeps saying so
                pane.status = "racing"
        self.phase = Phase.RACING
        self._race_last = self.wall_clock()
        # Owned by the panes' container, so the timer dies with the screen on exit.
        self._race_timer = self.query_one("#panes").set_interval(1 / RACE_FPS, self.race_tick)
        self._show_due(self.playback.seek(0.0), rewind=True)

    def race_tick(self) -> None:
        """Advance the race by the wall time since the last tick."""
        if self.playback is None:
            return
        now = self.wall_clock()
        due = self.playback.advance(now - self._race_last)
        self._race_last = now
        self._show_due(due, rewind=False)
        if self.playback.finished:
            self.phase = Phase.RACED
            # The winner only: every pane's border says its own place and time, and a
            # 24-row terminal has one status line to spare.
            ends = self.playback.schedule.ends
            first = min(ends, key=ends.get, default=None)  # None: a session with no rounds
            again = ("g or r: race again" if isinstance(self.source, ReplaySource)
                     else "g: race again · r: measure again")
            won = (f"1st {visible(first, 40)} {duration(ends[first])}" if first is not None
                   else "nothing ran")
            found = verdicts({p.strategy: p.stats for p in self.panes if p.events},
                             self.measured)
            if found:  # why each won or lost, rather than who came first
                won, brief = race_sentence(found)
            else:
                brief = f"raced: {won} · g: again · i: inspect"
            text = f"race finished: {won} · {again} · i: inspect"
            self._brief = text, brief
            self.status_text = text

    def seek_race(self, position: float) -> None:
        """Jump the race to ``position`` seconds (snapshots and tests use this)."""
        if self.playback is not None:
            self._show_due(self.playback.seek(position), rewind=True)

    def _show_due(self, due: dict[str, int], rewind: bool) -> None:
        playback = self.playback
        for pane in self.panes:
            count = due.get(pane.strategy, 0)
            if rewind or count > pane.shown:  # steps taken while paused are kept
                pane.show_until(count)
            self._finish_line(pane)
        self._refresh_stats()
        slowed = (f" · shown {playback.stretch:.3g}x slower than real time"
                  if playback.stretch > 1 else "")
        clock = f"{playback.position:.2f} s of {playback.schedule.duration:.2f} s"
        text = f"race: each strategy from its own t=0 · {clock}{slowed}"
        # At 80 columns the whole line takes two rows, and four panes no longer fit 24.
        brief = f" · {playback.stretch:.3g}x slowed" if playback.stretch > 1 else ""
        self._brief = text, f"race: {clock}{brief}"
        self.status_text = text

    def _finish_line(self, pane: StrategyPane) -> None:
        """A pane that reached its end in the race says when, and in which place."""
        end = self.playback.schedule.ends.get(pane.strategy) if self.playback else None
        if end is None:
            return
        if pane.complete:
            place = self._places[pane.strategy]
            reason = pane.status if pane.status not in ("racing", "length", "stop") else ""
            if not pane.status.startswith(ordinal(place)):
                pane.status = (f"{ordinal(place)} · finished at {duration(end)}"
                               + (f" · {reason}" if reason else ""))
        elif self.phase is Phase.RACING:
            pane.status = "racing"

    def _stop_race(self) -> None:
        if self._race_timer is not None:
            self._race_timer.stop()
            self._race_timer = None

    def action_faster(self) -> None:
        self.speed = next_speed(self.speed, faster=True)

    def action_slower(self) -> None:
        self.speed = next_speed(self.speed, faster=False)
