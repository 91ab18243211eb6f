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
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterable

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Header

from specdeck.engines.models.catalog import token_decoder
from specdeck.engines.core.config import AUTO, MAX_DRAFT_TOKENS, DecodeSettings
from specdeck.engines.core.events import Done, Event, Trace
from specdeck.engines.core.formatting import duration, ordinal, percent, plural
from specdeck.engines.core.stats import cost_model, plain_step_seconds, speedup, spread
from specdeck.engines.measure.machine import blas_library
from specdeck.engines.core.requests import CompareRequest
from specdeck.sessions.diff import diff_sessions
from specdeck.hosts.engine import (
    EngineSilent, EventBatch, Estimates, ProcessHost, Progress, RunCommand, RunEnded,
    TargetLoaded, ThreadHost,
)
from specdeck.hosts.group import GroupHost, group_size
from specdeck.sessions.playback import Playback, Schedule, finish_places, next_speed, stretch_for
from specdeck.sessions.session import SCHEMA_VERSION, Session
from specdeck.sessions.store import default_sessions_dir, why_not
from specdeck.tui.commands import SpecdeckCommands
from specdeck.tui.cost_view import CostScreen
from specdeck.tui.diff_screen import DiffScreen
from specdeck.tui.fitting_footer import FittingFooter
from specdeck.tui.fixed_text import FixedText
from specdeck.tui.glossary_screen import GlossaryScreen
from specdeck.tui.help_screen import HelpScreen
from specdeck.tui.inspector import RoundInspector
from specdeck.tui.jump_screen import JumpScreen
from specdeck.tui.legend import Legend
from specdeck.tui.messages import DecoderRead, FromEngine
from specdeck.tui.pane import Panes, StrategyPane, pane_detail
from specdeck.tui.prompt_line import PromptLine
from specdeck.safe_text.tui import LiteralNotify
from specdeck.tui.session_browser import SessionBrowser
from specdeck.tui.settings_screen import SettingsScreen
from specdeck.tui.terminal import require_terminal
from specdeck.tui.token_view import TokenView
from specdeck.safe_text.plain import visible

#: Race frames per second.
RACE_FPS = 30
#: A screen shorter has no row to spare: four panes take 20 of 24.
SHORT_ROWS = 30
#: While a run streams, statistics strips redraw at most this often: a number that
#: changes 30 times a second cannot be read, and every redraw takes CPU from the run.
LIVE_STATS_INTERVAL = 0.25
#: A streaming pane's status, running and paused.
HELD = ("running", "paused · space: resume")
#: The target's top alternatives recorded per position, for the inspector.
INSPECTOR_ALTERNATIVES = 5


def pieces_by_token(traces: dict[str, Trace]) -> dict[int, str]:
    """Text of every token id the traces show, for naming alternatives without a tokenizer."""
    known: dict[int, str] = {}
    for trace in traces.values():
        for r in trace.rounds:
            known.update(zip(r.tokens, r.pieces))
            known.update(zip(r.rejected, r.rejected_pieces))
    return known


class Phase(str, Enum):
    """Where the app is; a string enum, so it reads (and compares) as its value."""

    IDLE = "idle"
    LOADING = "loading"
    RUNNING = "running"
    MEASURED = "measured"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RACING = "racing"
    RACED = "raced"

    @property
    def streaming(self) -> bool:
        """A run is being measured: its panes follow the engine."""
        return self in (Phase.LOADING, Phase.RUNNING)


@dataclass
class LiveSource:
    """The panes show runs the engine measures for ``request``."""

    request: CompareRequest

    @property
    def strategies(self) -> list[str]:
        return list(self.request.strategies)

    @property
    def settings(self) -> DecodeSettings:
        return self.request.settings

    def _engine(self) -> ProcessHost | GroupHost:
        """The engine for the request: one process, or a group its target is split over."""
        group = self.request.group if self.request is not None else None
        return GroupHost(self._post, group) if group is not None else ProcessHost(self._post)

    @property
    def prompt(self) -> str | None:
        return self.request.prompt

    def token_text(self, token: int) -> str | None:
        return None  # the target's tokenizer names tokens (``SpecdeckApp.token_text``)

    async def restart(self, app: SpecdeckApp) -> None:
        await app.start_run()


@dataclass
class ReplaySource:
    """The panes show saved traces (a session), raced from their own timings."""

    traces: dict[str, Trace]
    #: The run's settings, which label the panes; None when the session lacks them.
    settings: DecodeSettings | None = None
    #: The prompt the run answered; None when the session lacks it.
    prompt: str | None = None

    def __post_init__(self) -> None:
        self._known = pieces_by_token(self.traces)

    @property
    def strategies(self) -> list[str]:
        return list(self.traces)

    def _engine(self) -> ProcessHost | GroupHost:
        """The engine for the request: one process, or a group its target is split over."""
        group = self.request.group if self.request is not None else None
        return GroupHost(self._post, group) if group is not None else ProcessHost(self._post)

    def token_text(self, token: int) -> str | None:
        """A token's text as the traces show it (no tokenizer needed)."""
        return self._known.get(token)

    async def restart(self, app: SpecdeckApp) -> None:
        app.start_race()


#: Keys that share one label in the footer (``n b Step/back``): sixteen bindings, each
#: with its own, did not fit 80 columns.
STEPPING = Binding.Group("Step/back")
SPEED = Binding.Group("Speed")
DRAFTS = Binding.Group("k∓1")


class SpecdeckApp(LiteralNotify, App[None]):
    """Compare strategies live (``request``) or replay saved runs (``traces``)."""

    CSS_PATH = "app.tcss"
    TITLE = "specdeck"
    COMMANDS = App.COMMANDS | {SpecdeckCommands}
    #: Under 30 rows the header's row goes to the panes (``-short`` in app.tcss), and the
    #: status line says its brief where it has one.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT_ROWS, "-tall")]
    #: Under 110 columns the cost strips give their rows to the text (``-narrow``).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    #: Each binding's tooltip is its help line (the footer's hover, the help screen and
    #: the command palette show it). The footer shows as many as fit whole, in this
    #: order (``tui.fitting_footer``): ``?`` first, then the keys that watch and teach
    #: a run; the help screen lists every one.
    BINDINGS = [
        Binding("question_mark,f1", "help", "Help", key_display="?", id="specdeck.help",
                tooltip="every key, and what the token styles mean"),
        Binding("space", "pause", "Pause", key_display="space", id="specdeck.pause",
                tooltip="hold the panes still (a live run goes on being measured)"),
        Binding("n", "step", "Step", id="specdeck.step", group=STEPPING,
                tooltip="show one more round in the focused pane (tab moves focus)"),
        Binding("b", "back", "Back", id="specdeck.back", group=STEPPING,
                tooltip="show one round fewer in the focused pane"),
        Binding("i", "inspector", "Inspect", id="specdeck.inspector",
                tooltip="the round inspector: drafts, q and p, why each was accepted, "
                "alternatives, rollback"),
        Binding("k", "cost_view", "Why this k", id="specdeck.cost_view",
                tooltip="what a round costs, the expected tokens per k and the best k"),
        Binding("x", "toggle_rejected", "Rejected", id="specdeck.toggle_rejected",
                tooltip="hide or show rejected drafts"),
        Binding("g", "race", "Race", id="specdeck.race",
                tooltip="replay every pane from its own t = 0 on one clock: their true "
                "relative speed"),
        Binding("r", "restart", "Restart", id="specdeck.restart",
                tooltip="measure every strategy again (a saved session: race it again)"),
        Binding("c", "cancel", "Cancel", id="specdeck.cancel",
                tooltip="stop the run at once, keeping what streamed (saved as a partial "
                "session), or stop the race"),
        Binding("s", "settings", "Settings", id="specdeck.settings",
                tooltip="prompt, models, strategies, k, depth, n, sampling, max tokens, seed"),
        Binding("o", "sessions", "Sessions", id="specdeck.sessions",
                tooltip="saved runs and sweeps: open, rename, delete, diff two"),
        Binding("minus", "slower", "Slower", key_display="-", id="specdeck.slower", group=SPEED,
                tooltip="race slower (down to 0.25x)"),
        Binding("plus,equals_sign", "faster", "Faster", key_display="+", id="specdeck.faster",
                group=SPEED,
                tooltip="race faster (up to 10x)"),
        Binding("left_square_bracket", "fewer_drafts", "k-1", key_display="[", group=DRAFTS,
                id="specdeck.fewer_drafts", tooltip="one draft fewer per round, and measure again"),
        Binding("right_square_bracket", "more_drafts", "k+1", key_display="]", group=DRAFTS,
                id="specdeck.more_drafts", tooltip="one draft more per round, and measure again"),
        Binding("q", "quit", "Quit", id="specdeck.quit", tooltip="leave specdeck"),
        Binding("j", "jump", "Jump to round", show=False, id="specdeck.jump",
                tooltip="go to a round by its number"),
        Binding("d", "diff_panes", "Diff panes", show=False, id="specdeck.diff_panes",
                tooltip="diff the focused pane with the first: first divergence, token "
                "edits, statistics side by side"),
        Binding("p", "toggle_prompt", "Prompt", show=False, id="specdeck.prompt",
                tooltip="show the whole prompt, or only its first line"),
        Binding("l", "toggle_link", "Link scroll", show=False, id="specdeck.link_scroll",
                tooltip="scroll every pane together, to the same token position "
                "(up, down, page up/down, home, end scroll the focused pane)"),
        Binding("w", "glossary", "Glossary", show=False, id="specdeck.glossary",
                tooltip="the words of speculative decoding, as specdeck uses them"),
        # Textual's own, given an id and a help line (it then adds none); the footer
        # shows it on its right as "^p palette".
        Binding(App.COMMAND_PALETTE_BINDING, "command_palette", "palette", show=False,
                priority=True, id="specdeck.palette",
                tooltip="every action by name, with its key and help line; the strategy "
                "presets; a screenshot"),
    ]

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
        request: CompareRequest | None = None,
        traces: dict[str, Trace] | None = None,
        *,
        settings: DecodeSettings | None = None,
        store: Any = None,
        clock: Callable[[], float] = time.perf_counter,
        wall_clock: Callable[[], float] = time.monotonic,
        title: str | None = None,
        prompt: str | None = None,
        memory_estimates: dict[str, int] | None = None,
        measured: dict[str, list[float]] | None = None,
        sessions_dir: "Path | None" = None,
        save_sessions: bool = True,
        in_process: bool = False,
        hint: str | None = None,
    ) -> None:
        """Every live run is saved as a session into ``sessions_dir`` (default: the
        sessions folder) unless ``save_sessions`` is false. Live runs are measured in an
        engine process; ``in_process`` runs them in a thread of this one instead, where a
        ``store`` of loaded models (an ``engines.loading.ModelStore``, which this module
        does not import: it loads mlx) and a ``clock`` timing the engine's events can be
        injected (tests gate the clock to hold a run mid-way). ``wall_clock`` drives the
        race, injectable so snapshots are deterministic. ``memory_estimates`` (a
        replay's, per strategy) are shown next to each pane's measured peak; a live run
        makes its own. ``hint`` (a few words, e.g. how to fetch a real model) leads the
        status line of live runs, except while racing. ``prompt`` is a replay's (a live
        run shows its request's)."""
        if (request is None) == (traces is None):
            raise ValueError("give either a request (live) or traces (replay)")
        if not in_process and (store is not None or clock is not time.perf_counter):
            raise ValueError("a model store or an engine clock works in_process only")
        super().__init__()
        if request is not None and request.settings.alternatives < INSPECTOR_ALTERNATIVES:
            request = replace(request, settings=replace(
                request.settings, alternatives=INSPECTOR_ALTERNATIVES))
        #: What live runs measure; None where there are none (``specdeck replay``).
        self.request = request
        #: Where the panes' events come from.
        self.source: LiveSource | ReplaySource = (
            LiveSource(request) if request is not None
            else ReplaySource(traces, settings, prompt))
        self._post = lambda message: self.post_message(FromEngine(message))  # noqa: E731
        self._host = ThreadHost(self._post, store, clock) if in_process else self._engine()
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
        self.measured: dict[str, list[float]] = dict(measured or {})
        #: The pane the inspector follows: the last one focused.
        self._inspected: str | None = None
        #: Decoders by target folder (read once, not on every restart; None while being
        #: read or unreadable), and the folder of the target the current run loaded.
        self._decoders: dict[str, Callable[[list[int]], str] | None] = {}
        self._target_path: str | None = None
        self._panes: dict[str, StrategyPane] = {}
        self.memory_estimates: dict[str, int] = dict(memory_estimates or {})
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
            await self.start_run()

    def on_unmount(self) -> None:
        self._host.close()
        self._stop_race()

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

    # -- live runs ---------------------------------------------------------------------

    def _drop_run(self) -> None:
        """Stop the race and the run the engine is measuring; what it still sends about
        that run is ignored (messages name their run)."""
        self._stop_race()
        self._host.cancel(self.run_id)
        self.run_id += 1

    async def start_run(self) -> None:
        """Cancel whatever runs, clear the panes and measure the request's strategies."""
        self._drop_run()
        self._target_path = None  # the target may have changed
        self.memory_estimates = {}  # the run estimates its own
        if isinstance(self.source, ReplaySource):  # back from a session opened in the browser
            self.sub_title = ""
        self.source = LiveSource(self.request)
        self.query_one(PromptLine).show(self.source.prompt)
        if list(self._panes) != self.strategies:
            await self._remount_panes()
        for pane in self.panes:
            pane.reset(keep_events=False)
            pane.detail = pane_detail(pane.strategy, self.request.settings)
            pane.status = "waiting"
            pane.memory_estimate = None
            pane.refresh_stats(None)
        self.measured = {}
        self._refresh_inspector()  # a new run: no round of the old one stays on show
        self.phase = Phase.LOADING
        self.status_text = "loading models…"
        self.runs_submitted = self.run_id
        if not isinstance(self._host, ThreadHost) and self._host.group != self.request.group:
            self._host.close()  # the target is split another way now (or not at all)
            self._host = self._engine()
        self._host.submit(RunCommand(
            self.run_id, self.request, self.save_sessions,
            str(self.sessions_dir) if self.sessions_dir is not None else None,
        ))

    def _engine(self) -> ProcessHost | GroupHost:
        """The engine for the request: one process, or a group its target is split over."""
        group = self.request.group if self.request is not None else None
        return GroupHost(self._post, group) if group is not None else ProcessHost(self._post)

    def token_text(self, token: int) -> str | None:
        text = self.source.token_text(token)
        if text is not None:
            return text
        decode = self._decoders.get(self._target_path or "")
        return decode([token]) if decode else None

    @on(FromEngine)
    def _from_engine(self, message: FromEngine) -> None:
        payload = message.payload
        if isinstance(payload, RunEnded):
            self.runs_ended = max(self.runs_ended, payload.run_id)
        if isinstance(payload, RunEnded) and payload.run_id == self._cancelled_run:
            self._cancelled_ended(payload)
        if payload.run_id != self.run_id:
            return  # a cancelled or replaced run
        handle = {EventBatch: self._events, Progress: self._progress, Estimates: self._estimates,
                  TargetLoaded: self._target_loaded, RunEnded: self._ended,
                  EngineSilent: self._engine_silent}[type(payload)]
        handle(payload)

    @property
    def engine_busy(self) -> bool:
        """A run handed to the engine has not ended yet (a cancelled one may still be
        finishing its round)."""
        return self.runs_ended < self.runs_submitted

    def _estimates(self, message: Estimates) -> None:
        self.memory_estimates = message.totals
        for pane in self.panes:
            pane.memory_estimate = message.totals.get(pane.strategy)
        self._refresh_stats()

    def _progress(self, message: Progress) -> None:
        self.status_text = message.text + "…"

    def _target_loaded(self, message: TargetLoaded) -> None:
        self._target_path = message.path
        if message.path not in self._decoders:
            self._decoders[message.path] = None  # being read
            self._read_decoder(message.path)

    @work(thread=True, group="decoder")
    def _read_decoder(self, path: str) -> None:
        """Read the target's tokenizer (no weights) to name the inspector's alternatives;
        the decoder comes back as a message."""
        self.post_message(DecoderRead(path, token_decoder(Path(path))))

    @on(DecoderRead)
    def _decoder_read(self, message: DecoderRead) -> None:
        self._decoders[message.path] = message.decode
        self._refresh_inspector(redraw=True)

    def _events(self, message: EventBatch) -> None:
        self.phase = Phase.RUNNING
        by_pane: dict[str, list[Event]] = {}
        for name, event in message.batch:
            by_pane.setdefault(name, []).append(event)
        for name, events in by_pane.items():
            pane = self.pane(name)
            pane.receive(events)
            self._say_held(pane)
            if not self.paused:
                pane.show_until(len(pane.events))
        now = time.monotonic()
        finished = any(isinstance(event, Done) for _, event in message.batch)
        if finished or now - self._stats_shown_at >= LIVE_STATS_INTERVAL:
            self._stats_shown_at = now
            self._refresh_stats()

    def _say_held(self, pane: StrategyPane) -> None:
        """A pane the run has reached says it runs, or, paused, that its text is held
        (the run may have ended: space shows the rest)."""
        if pane.events and pane.status in ("waiting", *HELD):
            pane.status = HELD[self.paused]

    def _engine_silent(self, message: EngineSilent) -> None:
        """The engine process stopped answering mid-run (or answers again): said in the
        status line while it lasts, and in a toast when it starts and ends."""
        if message.seconds is None:
            self._silence = None
            self._show_status()
            self.notify("the engine process answers again")
            return
        why = message.why or "stopped, or stuck in a long step?"
        text = (f"the engine process (pid {message.pid}) has not answered for "
                f"{message.seconds:.0f} s: {why} · c: cancel, q: quit")
        if self._silence is None:
            self.notify(text, severity="warning")
        self._silence = text
        self._show_status()

    def _save_problem(self, message: RunEnded) -> str:
        """A save that missed the sessions folder, as one line (empty: none), kept in
        ``save_problems`` and told as a toast too."""
        if not message.save_problem:
            return ""
        where = f"saved to {message.saved} instead" if message.saved else "nothing was saved"
        line = f"{message.save_problem}: {where}"
        self.save_problems.append(line)
        self.notify(line, severity="error", timeout=30)
        return line

    def _cancelled_ended(self, message: RunEnded) -> None:
        """The run cancelled with ``c`` has ended: say where its partial session went,
        in the status line while it still shows that run, else in a toast."""
        self._cancelled_run = None
        problem = self._save_problem(message)
        if problem or not message.saved:
            return
        line = f"cancelled · partial session saved to {message.saved} · r: measure again"
        if self.phase is Phase.CANCELLED:
            self.status_text = line
        else:
            self.notify(f"the cancelled run was saved as a partial session: {message.saved}")

    def _ended(self, message: RunEnded) -> None:
        self._silence = None  # the run's end is news from the engine (or of its death)
        problem = self._save_problem(message)
        # A failed save leads: it matters most, and a narrow status line cuts the end.
        lead = f"⚠ {problem} · " if problem else ""
        saved = message.saved if message.saved and not problem else None
        if message.error:
            self.phase = Phase.FAILED
            kept = f" · kept what arrived in {saved}" if saved else ""
            self.status_text = f"{lead}error: {message.error}{kept}   (s: settings, r: retry)"
            self._say_saved(saved, "partial session saved")
            for pane in self.panes:
                if pane.status in ("waiting", *HELD):
                    pane.status = "not run"
            return
        self.measured = dict(message.measured)
        for name, events in message.kept.items():  # each strategy's median repetition
            if name in self._panes:
                self.pane(name).replace_events(events)
        self.phase = Phase.MEASURED
        self._refresh_stats()
        how = (f"each timed {plural(self.request.repeats, 'time')}, its median run kept"
               if self.request.repeats > 1 else "each warmed up")
        noise = self._noise_note()
        text = (f"{lead}measured one after another, {how} · g: race them in "
                f"sync{noise and f' · {noise}: speedups within that are noise'}"
                f"{f' · saved {saved}' if saved else ''}")
        # Four panes fill 80x24 to the row: the brief keeps the line one row (the saved
        # path, left out, is said in a notification).
        self._brief = text, f"{lead}measured{noise and f' · {noise}'} · g: race"
        self.status_text = text
        self._say_saved(saved, "session saved")

    def _say_saved(self, saved: str | None, title: str) -> None:
        """Where a run was saved, whole: the status line says it at its end, which a
        narrow one cuts (80 columns did, every run); then a notification says it."""
        if saved and not self.query_one("#status", FixedText).shows(saved):
            self.notify(saved, title=title)

    def _noise_note(self) -> str:
        """How far plain's two timings were apart: the noise a speedup must beat."""
        runs = self.measured.get("plain", [])
        if len(runs) < 2 or self.request is None or self.request.repeats > 1:
            return ""
        return f"plain timed twice, {percent(spread(runs))} apart"

    def action_cancel(self) -> None:
        """Stop now: panes keep what they have; later events of the run are dropped,
        but its end says where the engine saved what it measured."""
        if self.phase.streaming:
            self._cancelled_run = self.run_id
            self._drop_run()
            self.phase = Phase.CANCELLED
            for pane in self.panes:
                if not any(isinstance(e, Done) for e in pane.events):
                    pane.status = "cancelled"
            saving = " · saving what was measured…" if self.save_sessions else ""
            self.status_text = f"cancelled{saving} · r: measure again"
        elif self.phase is Phase.RACING:
            self.phase = Phase.RACED
            self.status_text = "race stopped · g: race again"

    async def action_restart(self) -> None:
        await self.source.restart(self)

    # -- the race ----------------------------------------------------------------------

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
        the slowest run is shorter than ``MIN_RACE_SECONDS``)."""
        self._stop_race()
        traces = {p.strategy: Trace(p.strategy, p.events) for p in self.panes}
        schedule = Schedule.of(traces)
        self.playback = Playback(schedule, speed=self.speed, paused=self.paused,
                                 stretch=stretch_for(schedule.duration))
        self._places = finish_places(schedule.ends)
        for pane in self.panes:
            pane.reset(keep_events=True)
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
            first = min(ends, key=ends.get)
            again = ("g or r: race again" if isinstance(self.source, ReplaySource)
                     else "g: race again · r: measure again")
            won = f"1st {visible(first, 40)} {duration(ends[first])}"
            text = f"race finished: {won} · {again} · i: inspect"
            self._brief = text, f"raced: {won} · g: again · i: inspect"
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

    # -- teaching: pause, step, inspect ------------------------------------------------

    def action_pause(self) -> None:
        self.paused = not self.paused

    def _focused_strategy(self) -> str | None:
        """The strategy of the pane focused on the main screen (a dialog may be open)."""
        node = self._pane_box.screen.focused
        while node is not None and not isinstance(node, StrategyPane):
            node = node.parent
        return node.strategy if isinstance(node, StrategyPane) else None

    def focused_pane(self) -> StrategyPane:
        """The pane with focus on the main screen, else the one the inspector showed last
        (focus may be in the inspector), else the first."""
        return self._panes.get(self._focused_strategy() or self._inspected or "") or self.panes[0]

    def action_step(self) -> None:
        """The next round in the focused pane (pausing first): the one after the
        selected round, else one more round shown."""
        self.paused = True
        pane = self.focused_pane()
        if pane.selected is not None and pane.selected < pane.rounds_shown - 1:
            pane.selected += 1
        elif pane.step():
            pane.selected = None
        else:
            self.notify(self._no_next_round(pane))
        self._refresh_stats()

    def _no_next_round(self, pane: StrategyPane) -> str:
        """Why ``n`` found no next round, in words that are true of the pane's state."""
        name, total = visible(pane.strategy, 40), pane.rounds_shown
        if pane.complete:
            return (f"{name}: round {total} of {total} is its last · b: back · j: jump to "
                    "a round · g: race again")
        if self.phase.streaming:
            return f"{name}: no more rounds received yet (the run goes on)"
        if not pane.rounds:
            return f"{name}: no rounds: the run made none"
        return f"{name}: the run stopped after round {total} ({pane.status or 'no end recorded'})"

    def action_back(self) -> None:
        """The round before the one inspected in the focused pane (pausing first); the
        text after it stays, the round is marked."""
        self.paused = True
        pane = self.focused_pane()
        current = pane.current_number()
        if current is None or current == 0:
            self.notify(f"{visible(pane.strategy, 40)}: "
                        + ("no round shown yet · n: step" if current is None
                           else "round 1 is the first"))
            return
        pane.selected = current - 1
        self._show_inspector()

    def action_jump(self) -> None:
        """Ask for a round of the focused pane and inspect it (shown first if need be)."""
        pane = self.focused_pane()
        if not pane.rounds:
            self.notify(f"{visible(pane.strategy, 40)}: no rounds yet")
            return

        def jump(number: int | None) -> None:
            if number is not None and pane.is_attached and number < len(pane.rounds):
                self.paused = True
                pane.show_round(number)
                self._show_inspector()

        self.push_screen(JumpScreen(pane.strategy, len(pane.rounds), pane.current_number()),
                         jump)

    @on(StrategyPane.RoundPicked)
    def _round_picked(self, message: StrategyPane.RoundPicked) -> None:
        """A token was clicked: inspect the round it came from."""
        message.pane.focus()
        message.pane.show_round(message.number)
        self._show_inspector()

    def _show_inspector(self) -> None:
        self.query_one(RoundInspector).remove_class("-hidden")
        self._refresh_stats()

    def action_inspector(self) -> None:
        self.query_one(RoundInspector).toggle_class("-hidden")
        self._refresh_inspector()

    def on_descendant_focus(self) -> None:
        node = self.focused
        while node is not None and not isinstance(node, StrategyPane):
            node = node.parent
        if isinstance(node, StrategyPane):
            self._inspected = node.strategy
        self._refresh_inspector()

    def _refresh_inspector(self, redraw: bool = False) -> None:
        """The inspector on the focused pane's round, and that round marked in its pane
        (nothing marked while the inspector is closed)."""
        inspector = self.query_one(RoundInspector)
        open_ = not inspector.has_class("-hidden") and bool(self.panes)
        pane = self.focused_pane() if self.panes else None
        for other in self.panes:
            other.view.select(other.current_number() if open_ and other is pane else None)
        if open_:
            inspector.show_round(pane.strategy, pane.current_round(), self.token_text,
                                 pane.current_number() or 0, len(pane.rounds), redraw=redraw)

    def action_cost_view(self) -> None:
        """Why this k: the focused pane's rounds priced per draft position."""
        pane = self.focused_pane()
        stats = pane.stats
        plain = self._panes.get("plain")
        baseline = plain.stats.tokens_per_s if plain is not None and plain is not pane else None
        chosen = any(r.auto_k is not None for r in pane.rounds[:pane.rounds_shown])
        self.push_screen(CostScreen(
            f"{pane.strategy} {pane.detail}".strip(), cost_model(stats, plain_step_seconds(baseline)),
            speedup(stats.tokens_per_s, baseline), pane.rounds_shown, chosen))

    def action_glossary(self) -> None:
        self.push_screen(GlossaryScreen())

    def action_toggle_rejected(self) -> None:
        self.show_rejected = not self.show_rejected

    def action_toggle_prompt(self) -> None:
        self.query_one(PromptLine).toggle()

    def action_toggle_link(self) -> None:
        self.scroll_linked = not self.scroll_linked

    @on(TokenView.Scrolled)
    def _pane_scrolled(self, message: TokenView.Scrolled) -> None:
        if self.scroll_linked:
            self._follow_scroll(message.view)

    def _follow_scroll(self, leader: TokenView) -> None:
        """Scroll every other pane to the token position at the top of ``leader``, or to
        its end while ``leader`` follows its own."""
        position = None if leader.following else leader.top_position
        for pane in self.panes:
            if pane.view is not leader:
                pane.view.scroll_to_position(position)

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

    # -- settings ----------------------------------------------------------------------

    def _live_only(self) -> bool:
        """Keys that change what is measured do so only while live runs are shown: a
        saved session's settings are what it recorded (they say so, and never leave it
        silently)."""
        if self.request is None:
            self.notify("a replay's settings are fixed; run it again with specdeck compare")
            return False
        if isinstance(self.source, ReplaySource):
            self.notify("a saved session is shown: its settings are what it recorded · "
                        "s: settings, then ctrl+s to measure live again")
            return False
        return True

    async def _change_drafts(self, delta: int) -> None:
        if not self._live_only():
            return
        k = self.request.settings.num_draft_tokens
        if k == AUTO:
            self.notify("k is auto, chosen round by round: s (settings) sets a number")
            return
        k += delta
        if not 1 <= k <= MAX_DRAFT_TOKENS:
            self.notify(f"k stays between 1 and {MAX_DRAFT_TOKENS}")
            return
        self.request = replace(
            self.request, settings=replace(self.request.settings, num_draft_tokens=k)
        )
        self.notify(f"k = {k}: restarting")
        await self.start_run()

    async def action_more_drafts(self) -> None:
        await self._change_drafts(+1)

    async def action_fewer_drafts(self) -> None:
        await self._change_drafts(-1)

    def action_settings(self) -> None:
        if self.request is None:
            self._live_only()
            return

        async def apply(request: CompareRequest | None) -> None:
            if request is not None:
                self.request = request
                await self.start_run()

        screen = (SettingsScreen(self.request) if isinstance(self.source, LiveSource) else
                  SettingsScreen(self.request, "Settings — ctrl+s leaves the saved session "
                                 "and measures live"))
        self.push_screen(screen, apply)

    # -- sessions and diffs ------------------------------------------------------------

    def action_sessions(self) -> None:
        async def open_chosen(session: Session | None) -> None:
            if session is not None:
                await self.open_session(session)

        # The folder this app saves into (``--sessions-dir``), not the default one.
        folder = self.sessions_dir or default_sessions_dir()
        self.push_screen(SessionBrowser(folder), open_chosen)

    async def open_session(self, session: Session) -> None:
        """Replay a saved session in the panes, as ``specdeck replay`` does. A live run is
        cancelled; the settings (``s``, then ctrl+s) go back to live runs."""
        self._drop_run()
        self.source = ReplaySource(session.traces, session.settings, session.prompt)
        self.query_one(PromptLine).show(session.prompt)
        self.memory_estimates = dict(session.memory_estimates)
        self.measured = dict(session.measured)
        self.sub_title = visible(session.replay_title)
        await self._remount_panes()
        self._replay(self.source)

    def _replay(self, source: ReplaySource) -> None:
        for pane in self.panes:
            pane.view.show_rejected = self.show_rejected
            pane.receive(source.traces[pane.strategy].events)
        self.start_race()

    def action_diff_panes(self) -> None:
        """Diff the focused pane with the first (the baseline, usually plain); from the
        first pane, every other pane with it."""
        if self.phase.streaming:
            self.notify("wait until every strategy is measured (or c to cancel)")
            return
        traces = {p.strategy: Trace(p.strategy, p.events) for p in self.panes if p.events}
        if len(traces) < 2:
            self.notify("a diff needs two panes with output")
            return
        baseline, focused = next(iter(traces)), self.focused_pane().strategy
        pairs = [(baseline, focused)] if focused in traces and focused != baseline else None
        run = Session(SCHEMA_VERSION, "compare", "", False, {}, {}, traces)
        label = self.sub_title or "this run"
        self.push_screen(DiffScreen(diff_sessions(run, run, pairs, label, label), traces))

    async def use_strategies(self, strategies: list[str]) -> None:
        """Measure these strategies live, other settings unchanged (a preset of the
        command palette)."""
        if self.request is None:
            self._live_only()
            return
        self.request = replace(self.request, strategies=strategies)
        self.notify(f"measuring {', '.join(strategies)}")
        await self.start_run()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's commands, but a screenshot goes where it can be written, and says
        where (Textual's own writes to ~/Downloads, and fails where it is missing)."""
        for command in super().get_system_commands(screen):
            if command.title != "Screenshot":
                yield command
        yield SystemCommand("Screenshot", "Save an SVG of the screen in the sessions "
                            "folder (else the current one)", self.action_save_screenshot)

    def action_save_screenshot(self) -> None:
        folders = [self.sessions_dir or default_sessions_dir(), Path.cwd()]
        problems = []
        for folder in folders:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                path = self.save_screenshot(path=str(folder))
            except OSError as exc:
                problems.append(f"{folder} ({why_not(exc)})")
                continue
            self.notify(f"screenshot saved to {path}")
            return
        self.notify(f"cannot save the screenshot in {' nor '.join(problems)}", severity="error")

    def action_help(self) -> None:
        self.push_screen(HelpScreen([b for b in self.BINDINGS if isinstance(b, Binding)]))


def run_app(
    request: CompareRequest | None = None,
    traces: dict[str, Trace] | None = None,
    *,
    settings: DecodeSettings | None = None,
    title: str | None = None,
    prompt: str | None = None,
    memory_estimates: dict[str, int] | None = None,
    measured: dict[str, list[float]] | None = None,
    sessions_dir: "Path | None" = None,
    save_sessions: bool = True,
    hint: str | None = None,
) -> list[str]:
    """Open the playground on a live comparison or on saved traces (``specdeck replay``).

    ``settings`` (a session's ``Session.settings``) labels replayed panes (k=..., n=...)
    and ``prompt`` (its ``Session.prompt``) shows above them; ``memory_estimates`` (its
    ``Session.memory_estimates``) go beside the measured peaks, ``measured`` (its
    ``Session.measured``) says how far repeated timings spread.
    Returns a line for each run whose session did not land in the sessions folder, to
    say again once the terminal is back. Refused without a terminal (``require_terminal``).
    """
    require_terminal()
    app = SpecdeckApp(request, traces, settings=settings, title=title, prompt=prompt,
                      memory_estimates=memory_estimates, measured=measured,
                      sessions_dir=sessions_dir, save_sessions=save_sessions, hint=hint)
    app.run()
    return app.save_problems
