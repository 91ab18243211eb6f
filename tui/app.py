"""The playground app: one pane per strategy, live runs, races, stepping and inspection.

Live, an engine process (``specdeck.hosts.engine``) runs ``engines.compare.run_compare``
(strategies one after another, each warmed up) and streams batched events; panes show
them as they come, and rendering them cannot slow the run being measured. When the
comparison is measured, ``g`` races the panes: each replays from its own t = 0 on one
clock (``specdeck.sessions.playback``), so the eye sees the true relative speed. A saved session
opens straight into the race. Pausing freezes what the panes show (a live run goes on
being measured in the background, so its timing stays fair); ``n`` steps the focused pane
one round at a time and the inspector explains that round.

The panes' events come from a source, ``LiveSource`` (the engine) or ``ReplaySource``
(saved traces); ``phase``, ``paused``, ``speed`` and ``show_rejected`` are reactive, and
their watchers keep the race, the panes and the status line in step.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from textual.app import App, ComposeResult
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Header

from specdeck.engines.measure.machine import blas_library
from specdeck.blas import blas_advice
from specdeck.hosts.engine import HostFactory
from specdeck.hosts.group import group_size
from specdeck.sessions.playback import Playback
from specdeck.tui.live_runs import LiveRuns
from specdeck.tui.navigation import Navigation
from specdeck.tui.racing import Racing
from specdeck.tui.teaching import Teaching
from specdeck.tui.sources import LiveSource, Phase, ReplaySource
from specdeck.tui.commands import SpecdeckCommands
from specdeck.tui.fitting_footer import FittingFooter
from specdeck.tui.fixed_text import FixedText
from specdeck.tui.inspector import RoundInspector
from specdeck.tui.keys import PLAYGROUND_KEYS
from specdeck.tui.legend import Legend
from specdeck.tui.messages import FromEngine
from specdeck.tui.pane import Panes, StrategyPane, pane_detail
from specdeck.tui.prompt_line import PromptLine
from specdeck.safe_text.tui import LiteralNotify
from specdeck.tui.terminal import require_terminal, run_app_to_the_end
from specdeck.safe_text.plain import visible
from specdeck.engines.core.config import INSPECTOR_ALTERNATIVES

#: A screen shorter has no row to spare: four panes take 20 of 24.
SHORT_ROWS = 30


class SpecdeckApp(LiveRuns, Racing, Teaching, Navigation, LiteralNotify, App[None]):
    """Compare strategies live (``LiveSource``) or replay saved runs (``ReplaySource``)."""

    CSS_PATH = "app.tcss"
    TITLE = "specdeck"
    COMMANDS = App.COMMANDS | {SpecdeckCommands}
    #: Under 30 rows the header's row goes to the panes (``-short`` in app.tcss), and the
    #: status line says its brief where it has one.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT_ROWS, "-tall")]
    #: Under 110 columns the cost strips give their rows to the text (``-narrow``).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    BINDINGS = PLAYGROUND_KEYS

    #: Where the app is (its watcher stops a race that is left).
    phase: reactive[Phase] = reactive(Phase.IDLE, init=False)
    #: The panes hold still (a live run goes on being measured) and ``n`` steps them.
    paused: reactive[bool] = reactive(False, init=False)
    #: Race speed (``specdeck.sessions.playback.SPEEDS``).
    speed: reactive[float] = reactive(1.0, init=False)
    show_rejected: reactive[bool] = reactive(True, init=False)
    #: Scrolling one pane scrolls the others to the same token position.
    scroll_linked: reactive[bool] = reactive(False, init=False)
    #: The status line's message; the flags after it follow the settings above.
    status_text: reactive[str] = reactive("", init=False)

    def __init__(
        self,
        source: LiveSource | ReplaySource,
        *,
        host: HostFactory | None = None,
        wall_clock: Callable[[], float] = time.monotonic,
        title: str | None = None,
        sessions_dir: Path | None = None,
        save_sessions: bool = True,
        hint: str | None = None,
    ) -> None:
        """The panes show ``source``: live runs of its request, or a saved session.
        Live runs are measured by the host ``host`` makes (given where to post the
        engine's messages; tests make one in a thread of this process, with their model
        store and clock); by default an engine process, or a group of them where the
        request splits its target. Every live run is saved as a session into
        ``sessions_dir`` (default: the sessions folder) unless ``save_sessions`` is
        false. ``wall_clock`` drives the race, injectable so snapshots are
        deterministic. ``hint`` (a few words, e.g. how to fetch a real model) leads the
        status line of live runs, except while racing."""
        super().__init__()
        if (isinstance(source, LiveSource)
                and source.request.settings.alternatives < INSPECTOR_ALTERNATIVES):
            source = LiveSource(replace(source.request, settings=replace(
                source.request.settings, alternatives=INSPECTOR_ALTERNATIVES)))
        #: Where the panes' events come from.
        self.source = source
        #: What live runs measure; None where there are none (``specdeck replay``).
        self.request = source.request if isinstance(source, LiveSource) else None
        replayed = source if isinstance(source, ReplaySource) else None
        self._post = lambda message: self.post_message(FromEngine(message))  # noqa: E731
        #: Makes the host of live runs; None: the engine the request picks (``_engine``).
        self._host_factory = host
        self._host = host(self._post) if host is not None else self._engine()
        self.wall_clock = wall_clock
        if title:
            self.sub_title = visible(title)
        self.run_id = 0
        #: The run stopped with ``c``, until its end (and where it was saved) arrives.
        self._cancelled_run: int | None = None
        #: The last run handed to the engine, and the last one it ended (cancelled too).
        self.runs_submitted = self.runs_ended = 0
        self.playback: Playback | None = None
        self._race_timer: Timer | None = None
        self._race_last = 0.0
        #: Each pane's place in the race (by when its run ended).
        self._places: dict[str, int] = {}
        self._stats_shown_at = 0.0
        #: The tok/s of every timed run of strategies timed more than once.
        self.measured: dict[str, list[float]] = dict(replayed.measured) if replayed else {}
        #: The pane the inspector follows: the last one focused.
        self._inspected: str | None = None
        #: Decoders by target folder (read once, not on every restart; None while being
        #: read or unreadable), and the folder of the target the current run loaded.
        self._decoders: dict[str, Callable[[list[int]], str] | None] = {}
        self._target_path: str | None = None
        self._panes: dict[str, StrategyPane] = {}
        #: Each strategy's estimated peak bytes (a replay's; a live run makes its own).
        self.memory_estimates: dict[str, int] = (
            dict(replayed.memory_estimates) if replayed else {})
        self.sessions_dir = sessions_dir
        self.save_sessions = save_sessions
        #: What the status line says while the engine process is silent (None: it answers).
        self._silence: str | None = None
        #: A status text and the same in fewer words (the race's clock at 80 columns).
        self._brief: tuple[str, str] | None = None
        #: Runs whose session did not land in the sessions folder, as one line each:
        #: said again when the app closes (``run_app`` returns them).
        self.save_problems: list[str] = []
        #: A few words that lead the status line (how to fetch a real model).
        self.hint = hint

    # -- layout ------------------------------------------------------------------------

    @property
    def strategies(self) -> list[str]:
        return self.source.strategies

    def _new_panes(self) -> list[StrategyPane]:
        self._panes = {
            name: StrategyPane(name, pane_detail(name, self.source.settings))
            for name in self.strategies
        }
        for name, pane in self._panes.items():
            pane.memory_estimate = self.memory_estimates.get(name)
        return list(self._panes.values())

    @property
    def _pane_box(self) -> Panes:
        return self.query_one("#panes", Panes)

    async def _remount_panes(self) -> None:
        """New panes for new strategies; focus goes to the pane of the strategy that had
        it, else the first (a removed pane keeps the screen's focus otherwise, and every
        key, help and quit included, goes to it and dies)."""
        had_focus = self._focused_strategy()
        container = self._pane_box
        await container.remove_children()
        await container.mount_all(self._new_panes())
        container.arrange_panes()
        self.query_one(Legend).chained = "chain" in self.strategies
        for pane in self.panes:
            pane.view.show_rejected = self.show_rejected
        if self.panes:
            pane = self._panes.get(had_focus or "", self.panes[0])
            container.screen.set_focus(pane)

    def compose(self) -> ComposeResult:
        yield Header()
        yield FixedText(id="status", max_lines=2)
        yield PromptLine(self.source.prompt)
        legend = Legend()
        legend.chained = "chain" in self.strategies
        yield legend
        with Panes(id="panes"):
            yield from self._new_panes()
        yield RoundInspector(id="inspector", classes="-hidden")
        yield FittingFooter()

    @property
    def panes(self) -> list[StrategyPane]:
        """The panes in strategy order (kept, not queried: a DOM query per batch is slow)."""
        return list(self._panes.values())

    def pane(self, strategy: str) -> StrategyPane:
        return self._panes[strategy]

    async def on_mount(self) -> None:
        if isinstance(self.source, ReplaySource):
            self._replay(self.source)
        else:
            advice = blas_advice()  # once per app: the status line's flag says it short
            if advice:
                self.notify(advice, title="slow matrix products", severity="warning",
                            timeout=20)
            await self.start_run()

    def on_unmount(self) -> None:
        self._host.close()
        self._stop_race()

    #: Actions on a pane, which a session that ran no strategy has none of.
    PANE_ACTIONS = frozenset({"step", "back", "jump", "cost_view", "toggle_link"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return bool(self.panes) or action not in self.PANE_ACTIONS

    # -- the status line and what it follows ----------------------------------------------

    def _show_status(self) -> None:
        flags = [f"race {self.speed:g}x"] + (["PAUSED"] if self.paused else [])
        if not self.show_rejected:
            flags.append("rejected hidden")
        group = self.request.group if self.request is not None else None
        if group is not None:
            flags.append(f"{group.shard} split over {group_size(group)}")
        if self.scroll_linked:
            flags.append("scroll linked")
        if self.request is not None and sys.platform == "linux":
            # Live runs on Linux: say whether matrix products go through OpenBLAS.
            flags.append("OpenBLAS" if blas_library() else "no OpenBLAS")
        text = self._silence or self.status_text
        lead = f"{self.hint} · " if self.hint and self.phase not in (Phase.RACING, Phase.RACED) else ""
        status = self.query_one("#status", FixedText)
        status.text = visible(f"{lead}{text}")
        # A brief for this very text only (any other message is said whole), and only
        # where rows are short: there a second status row crowds the panes.
        short = self.size.height < SHORT_ROWS
        brief = self._brief[1] if self._brief is not None and self._brief[0] == text else ""
        status.brief = visible(f"{lead}{brief}") if brief and short else ""
        status.tail = visible(f"[{' · '.join(flags)}]")  # whole, however narrow the line

    def watch_status_text(self) -> None:
        self._show_status()

    def on_resize(self) -> None:
        # After App's own handler: it is that one that sets the new size.
        self.call_next(self._show_status)

    def watch_phase(self, old: Phase, new: Phase) -> None:
        if old is Phase.RACING:
            self._stop_race()

    def watch_speed(self, speed: float) -> None:
        if self.playback is not None:
            self.playback.speed = speed
        self._show_status()

    def watch_paused(self, paused: bool) -> None:
        if self.playback is not None:
            self.playback.paused = paused
            self._race_last = self.wall_clock()
        if self.phase in (Phase.LOADING, Phase.RUNNING, Phase.MEASURED, Phase.CANCELLED):
            for pane in self.panes:
                self._say_held(pane)
                if not paused:
                    pane.show_until(len(pane.events))
            if not paused:
                self._refresh_stats()
        self._show_status()

    def watch_show_rejected(self, show: bool) -> None:
        for pane in self.panes:
            pane.view.show_rejected = show
        self._show_status()

    def watch_scroll_linked(self, linked: bool) -> None:
        if linked:  # start from the focused pane's place
            self._follow_scroll(self.focused_pane().view)
        self._show_status()

    # -- the panes' statistics ---------------------------------------------------------

    def _refresh_stats(self) -> None:
        baseline = None
        panes = sorted(self.panes, key=lambda p: p.strategy != "plain")  # plain first
        plain_runs = self.measured.get("plain", [])
        repeats = self.request.repeats if self.request is not None else 1
        for pane in panes:
            pane.runs = self.measured.get(pane.strategy, [])
            stats = pane.refresh_stats(baseline, plain_runs, repeats)
            if pane.strategy == "plain":
                baseline = stats.tokens_per_s
        self._pane_box.level_strips()
        self._refresh_inspector()


def run_app(
    source: LiveSource | ReplaySource,
    *,
    title: str | None = None,
    sessions_dir: Path | None = None,
    save_sessions: bool = True,
    hint: str | None = None,
) -> list[str]:
    """Open the playground on a live comparison or on a saved session (``specdeck
    replay``). Returns a line for each run whose session did not land in the sessions
    folder, to say again once the terminal is back. Refused without a terminal
    (``require_terminal``)."""
    require_terminal()
    app = SpecdeckApp(source, title=title, sessions_dir=sessions_dir,
                      save_sessions=save_sessions, hint=hint)
    run_app_to_the_end(app)
    return app.save_problems
