"""The playground app: one pane per strategy, live runs, races, stepping and inspection.

Live, an engine process (``specdeck.engine_host``) runs ``engines.compare.run_compare``
(strategies one after another, each warmed up) and streams batched events; panes show
them as they come, and rendering them cannot slow the run being measured. When the
comparison is measured, ``g`` races the panes: each replays from its own t = 0 on one
clock (``specdeck.playback``), so the eye sees the true relative speed. A saved session
opens straight into the race. Pausing freezes what the panes show (a live run goes on
being measured in the background, so its timing stays fair); ``n`` steps the focused pane
one round at a time and the inspector explains that round.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.timer import Timer
from textual.widgets import Footer, Header

from specdeck.engines.catalog import token_decoder
from specdeck.engines.config import MAX_DRAFT_TOKENS
from specdeck.engines.events import Done, Event, Trace
from specdeck.engines.machine import blas_library
from specdeck.diff import diff_sessions
from specdeck.engine_host import (
    EventBatch, Estimates, ProcessHost, Progress, RunCommand, RunEnded, TargetLoaded, ThreadHost,
)
from specdeck.playback import Playback, Schedule, next_speed
from specdeck.session import SCHEMA_VERSION, Session
from specdeck.session_store import default_sessions_dir
from specdeck.tui.diff_screen import DiffScreen
from specdeck.tui.fixed_text import FixedText
from specdeck.tui.help_screen import HelpScreen
from specdeck.tui.inspector import RoundInspector
from specdeck.tui.legend import Legend
from specdeck.tui.messages import FromEngine
from specdeck.tui.pane import StrategyPane
from specdeck.tui.session_browser import SessionBrowser
from specdeck.tui.settings_screen import SettingsScreen

if TYPE_CHECKING:  # importing engines.compare loads mlx: only the engine host does
    from specdeck.engines.compare import CompareRequest
    from specdeck.engines.loading import ModelStore

#: Race frames per second.
RACE_FPS = 30
#: While a run streams, statistics strips redraw at most this often: a number that
#: changes 30 times a second cannot be read, and every redraw takes CPU from the run.
LIVE_STATS_INTERVAL = 0.25
#: The target's top alternatives recorded per position, for the inspector.
INSPECTOR_ALTERNATIVES = 5


def pane_detail(strategy: str, settings: Any) -> str:
    """The setting that defines a strategy, for its pane title (``settings`` may be a
    DecodeSettings or a session's settings dictionary)."""
    get = settings.get if isinstance(settings, dict) else lambda k: getattr(settings, k, None)
    key, label = {"draft": ("num_draft_tokens", "k"), "mtp": ("mtp_depth", "depth"),
                  "ngram": ("ngram_n", "n")}.get(strategy, (None, None))
    value = get(key) if key else None
    return f"{label}={value}" if value is not None else ""


def pieces_by_token(traces: dict[str, Trace]) -> dict[int, str]:
    """Text of every token id the traces show, for naming alternatives without a tokenizer."""
    known: dict[int, str] = {}
    for trace in traces.values():
        for r in trace.rounds:
            known.update(zip(r.tokens, r.pieces))
            known.update(zip(r.rejected, r.rejected_pieces))
    return known


class SpecdeckApp(App[None]):
    """Compare strategies live (``request``) or replay saved runs (``traces``)."""

    CSS_PATH = "app.tcss"
    TITLE = "specdeck"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    BINDINGS = [
        Binding("r", "restart", "Restart", id="specdeck.restart"),
        Binding("c,escape", "cancel", "Cancel", id="specdeck.cancel"),
        Binding("space", "pause", "Pause", key_display="space", id="specdeck.pause"),
        Binding("n", "step", "Step", id="specdeck.step"),
        Binding("x", "toggle_rejected", "Rejected", id="specdeck.toggle_rejected"),
        Binding("i", "inspector", "Inspect", id="specdeck.inspector"),
        Binding("g", "race", "Race", id="specdeck.race"),
        Binding("minus", "slower", "Slower", key_display="-", id="specdeck.slower"),
        Binding("plus,equals_sign", "faster", "Faster", key_display="+", id="specdeck.faster"),
        Binding("left_square_bracket", "fewer_drafts", "k-1", key_display="[",
                id="specdeck.fewer_drafts"),
        Binding("right_square_bracket", "more_drafts", "k+1", key_display="]",
                id="specdeck.more_drafts"),
        Binding("s", "settings", "Settings", id="specdeck.settings"),
        Binding("question_mark,f1", "help", "Help", key_display="?", id="specdeck.help"),
        # After help, so a narrow footer still shows ?; the help screen lists them all.
        Binding("o", "sessions", "Sessions", id="specdeck.sessions"),
        Binding("d", "diff_panes", "Diff panes", show=False, id="specdeck.diff_panes"),
        Binding("q", "quit", "Quit", id="specdeck.quit"),
    ]

    def __init__(
        self,
        request: "CompareRequest | None" = None,
        traces: dict[str, Trace] | None = None,
        *,
        settings: Any = None,
        store: "ModelStore | None" = None,
        clock: Callable[[], float] = time.perf_counter,
        wall_clock: Callable[[], float] = time.monotonic,
        title: str | None = None,
        memory_estimates: dict[str, int] | None = None,
        sessions_dir: "Path | None" = None,
        save_sessions: bool = True,
        in_process: bool = False,
        hint: str | None = None,
    ) -> None:
        """Every live run is saved as a session into ``sessions_dir`` (default: the
        sessions folder) unless ``save_sessions`` is false. Live runs are measured in an
        engine process; ``in_process`` runs them in a thread of this one instead, where a
        ``store`` of loaded models and a ``clock`` timing the engine's events can be
        injected (tests gate the clock to hold a run mid-way). ``wall_clock`` drives the
        race, injectable so snapshots are deterministic. ``memory_estimates`` (a
        replay's, per strategy) are shown next to each pane's measured peak; a live run
        makes its own. ``hint`` (a few words, e.g. how to fetch a real model) leads the
        status line of live runs, except while racing."""
        if (request is None) == (traces is None):
            raise ValueError("give either a request (live) or traces (replay)")
        if not in_process and (store is not None or clock is not time.perf_counter):
            raise ValueError("a model store or an engine clock works in_process only")
        super().__init__()
        if request is not None and request.settings.alternatives < INSPECTOR_ALTERNATIVES:
            settings = replace(request.settings, alternatives=INSPECTOR_ALTERNATIVES)
            request = replace(request, settings=settings)
        self.request = request
        self.traces = traces
        self.replay_settings = settings
        post = lambda message: self.post_message(FromEngine(message))  # noqa: E731
        self._host = ThreadHost(post, store, clock) if in_process else ProcessHost(post)
        self.wall_clock = wall_clock
        if title:
            self.sub_title = title
        self.run_id = 0
        #: The last run handed to the engine, and the last one it ended (cancelled too).
        self.runs_submitted = self.runs_ended = 0
        self.phase = "idle"
        self.paused = False
        self.speed = 1.0
        self.show_rejected = True
        self.playback: Playback | None = None
        self._race_timer: Timer | None = None
        self._race_last = 0.0
        self._status_text = ""
        self._stats_shown_at = 0.0
        #: Decoders by target folder (read once, not on every restart), and the folder
        #: of the target the current run loaded.
        self._decoders: dict[str, Callable[[list[int]], str] | None] = {}
        self._target_path: str | None = None
        self._known = pieces_by_token(traces) if traces else {}
        self._panes: dict[str, StrategyPane] = {}
        self.memory_estimates: dict[str, int] = dict(memory_estimates or {})
        self.sessions_dir = sessions_dir
        self.save_sessions = save_sessions
        self.hint = hint

    # -- layout ------------------------------------------------------------------------

    @property
    def strategies(self) -> list[str]:
        return list(self.traces) if self.traces is not None else list(self.request.strategies)

    def _new_panes(self) -> list[StrategyPane]:
        settings = self.replay_settings if self.traces is not None else self.request.settings
        self._panes = {
            name: StrategyPane(name, pane_detail(name, settings or {})) for name in self.strategies
        }
        for name, pane in self._panes.items():
            pane.memory_estimate = self.memory_estimates.get(name)
        return list(self._panes.values())

    def compose(self) -> ComposeResult:
        yield Header()
        yield FixedText(id="status")
        yield Legend()
        with Container(id="panes"):
            yield from self._new_panes()
        yield RoundInspector(id="inspector", classes="-hidden")
        yield Footer()

    @property
    def panes(self) -> list[StrategyPane]:
        """The panes in strategy order (kept, not queried: a DOM query per batch is slow)."""
        return list(self._panes.values())

    def pane(self, strategy: str) -> StrategyPane:
        return self._panes[strategy]

    async def on_mount(self) -> None:
        if self.traces is not None:
            self._replay_traces()
        else:
            await self.start_run()

    def on_unmount(self) -> None:
        self._host.close()
        self._stop_race()

    def set_status(self, text: str) -> None:
        flags = [f"race {self.speed:g}x"] + (["PAUSED"] if self.paused else [])
        if not self.show_rejected:
            flags.append("rejected hidden")
        if self.request is not None and sys.platform == "linux":
            # Live runs on Linux: say whether matrix products go through OpenBLAS.
            flags.append("OpenBLAS" if blas_library() else "reference BLAS: slow")
        lead = f"{self.hint} · " if self.hint and self.phase not in ("racing", "raced") else ""
        self.query_one("#status", FixedText).text = f"{lead}{text}   [{' · '.join(flags)}]"
        self._status_text = text

    def _restatus(self) -> None:
        self.set_status(self._status_text)

    # -- live runs ---------------------------------------------------------------------

    async def start_run(self) -> None:
        """Cancel whatever runs, clear the panes and measure the request's strategies."""
        self._stop_race()
        self._host.cancel(self.run_id)
        self.run_id += 1
        self._target_path = None  # the target may have changed
        self.memory_estimates = {}  # the run estimates its own
        if self.traces is not None:  # back from a session opened in the browser
            self.traces, self._known, self.sub_title = None, {}, ""
        if list(self._panes) != self.strategies:
            container = self.query_one("#panes")
            await container.remove_children()
            await container.mount_all(self._new_panes())
        for pane in self.panes:
            pane.reset(keep_events=False)
            pane.detail = pane_detail(pane.strategy, self.request.settings)
            pane.status = "waiting"
            pane.memory_estimate = None
            pane.refresh_stats(None)
        self.phase = "loading"
        self.set_status("loading models…")
        self.runs_submitted = self.run_id
        self._host.submit(RunCommand(
            self.run_id, self.request, self.save_sessions,
            str(self.sessions_dir) if self.sessions_dir is not None else None,
        ))

    def token_text(self, token: int) -> str | None:
        if token in self._known:
            return self._known[token]
        decode = self._decoders.get(self._target_path or "")
        return decode([token]) if decode else None

    @on(FromEngine)
    def _from_engine(self, message: FromEngine) -> None:
        payload = message.payload
        if isinstance(payload, RunEnded):
            self.runs_ended = max(self.runs_ended, payload.run_id)
        if payload.run_id != self.run_id:
            return  # a cancelled or replaced run
        handle = {EventBatch: self._events, Progress: self._progress, Estimates: self._estimates,
                  TargetLoaded: self._target_loaded, RunEnded: self._ended}[type(payload)]
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
        self.set_status(message.text + "…")

    def _target_loaded(self, message: TargetLoaded) -> None:
        self._target_path = message.path
        if message.path not in self._decoders:
            self._load_decoder(message.path)

    @work(thread=True, group="decoder")
    def _load_decoder(self, path: str) -> None:
        """Read the target's tokenizer (no weights) to name the inspector's alternatives."""
        self._decoders[path] = token_decoder(Path(path))

    def _events(self, message: EventBatch) -> None:
        self.phase = "running"
        by_pane: dict[str, list[Event]] = {}
        for name, event in message.batch:
            by_pane.setdefault(name, []).append(event)
        for name, events in by_pane.items():
            pane = self.pane(name)
            pane.receive(events)
            if pane.status == "waiting":
                pane.status = "running"
            if not self.paused:
                pane.show_until(len(pane.events))
        now = time.monotonic()
        finished = any(isinstance(event, Done) for _, event in message.batch)
        if finished or now - self._stats_shown_at >= LIVE_STATS_INTERVAL:
            self._stats_shown_at = now
            self._refresh_stats()

    def _ended(self, message: RunEnded) -> None:
        if message.error:
            self.phase = "failed"
            self.set_status(f"error: {message.error}   (s: settings, r: retry)")
            for pane in self.panes:
                if pane.status in ("waiting", "running"):
                    pane.status = "not run"
            return
        self.phase = "measured"
        saved = f" · saved {message.saved}" if message.saved else ""
        self.set_status(
            f"measured one after another, each warmed up · g: race them in sync{saved}"
        )

    def action_cancel(self) -> None:
        """Stop now: panes keep what they have; later events of the run are dropped."""
        if self.phase in ("loading", "running"):
            self._host.cancel(self.run_id)
            self.run_id += 1
            self.phase = "cancelled"
            for pane in self.panes:
                if not any(isinstance(e, Done) for e in pane.events):
                    pane.status = "cancelled"
            self.set_status("cancelled · r: restart")
        elif self.phase == "racing":
            self._stop_race()
            self.phase = "raced"
            self.set_status("race stopped · g: race again")

    async def action_restart(self) -> None:
        if self.traces is not None:
            self.start_race()
        else:
            await self.start_run()

    # -- the race ----------------------------------------------------------------------

    def action_race(self) -> None:
        if self.phase in ("loading", "running"):
            self.notify("wait until every strategy is measured (or c to cancel)")
            return
        if not any(pane.events for pane in self.panes):
            self.notify("nothing to race yet")
            return
        self.start_race()

    def start_race(self) -> None:
        """Replay every pane from its own t = 0 on one clock."""
        self._stop_race()
        traces = {p.strategy: Trace(p.strategy, p.events) for p in self.panes}
        self.playback = Playback(Schedule.of(traces), speed=self.speed, paused=self.paused)
        for pane in self.panes:
            pane.reset(keep_events=True)
            pane.status = "racing"
        self.phase = "racing"
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
            self._stop_race()
            self.phase = "raced"
            self.set_status("race finished · r or g: race again · n: step, i: inspect")

    def seek_race(self, position: float) -> None:
        """Jump the race to ``position`` seconds (snapshots and tests use this)."""
        if self.playback is not None:
            self._show_due(self.playback.seek(position), rewind=True)

    def _show_due(self, due: dict[str, int], rewind: bool) -> None:
        for pane in self.panes:
            count = due.get(pane.strategy, 0)
            if rewind or count > pane.shown:  # steps taken while paused are kept
                pane.show_until(count)
        self._refresh_stats()
        playback = self.playback
        self.set_status(
            f"race: each strategy from its own t=0 · "
            f"{playback.position:.2f} s of {playback.schedule.duration:.2f} s"
        )

    def _stop_race(self) -> None:
        if self._race_timer is not None:
            self._race_timer.stop()
            self._race_timer = None

    def _set_speed(self, faster: bool) -> None:
        self.speed = next_speed(self.speed, faster)
        if self.playback is not None:
            self.playback.speed = self.speed
        self._restatus()

    def action_faster(self) -> None:
        self._set_speed(True)

    def action_slower(self) -> None:
        self._set_speed(False)

    # -- teaching: pause, step, inspect ------------------------------------------------

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self.playback is not None:
            self.playback.paused = self.paused
            self._race_last = self.wall_clock()
        if not self.paused and self.phase in ("loading", "running", "measured", "cancelled"):
            for pane in self.panes:
                pane.show_until(len(pane.events))
            self._refresh_stats()
        self._restatus()

    def focused_pane(self) -> StrategyPane:
        node = self.focused
        while node is not None and not isinstance(node, StrategyPane):
            node = node.parent
        return node if isinstance(node, StrategyPane) else self.panes[0]

    def action_step(self) -> None:
        """Show one more round in the focused pane (pausing first)."""
        if not self.paused:
            self.action_pause()
        pane = self.focused_pane()
        if not pane.step():
            self.notify(f"{pane.strategy}: no more rounds received yet")
        self._refresh_stats()

    def action_inspector(self) -> None:
        self.query_one(RoundInspector).toggle_class("-hidden")
        self._refresh_inspector()

    def on_descendant_focus(self) -> None:
        self._refresh_inspector()

    def _refresh_inspector(self) -> None:
        inspector = self.query_one(RoundInspector)
        if not inspector.has_class("-hidden") and self.panes:
            pane = self.focused_pane()
            inspector.show_round(pane.strategy, pane.current_round(), self.token_text)

    def action_toggle_rejected(self) -> None:
        self.show_rejected = not self.show_rejected
        for pane in self.panes:
            pane.view.show_rejected = self.show_rejected
        self._restatus()

    def _refresh_stats(self) -> None:
        baseline = None
        panes = sorted(self.panes, key=lambda p: p.strategy != "plain")  # plain first
        for pane in panes:
            stats = pane.refresh_stats(baseline)
            if pane.strategy == "plain":
                baseline = stats.tokens_per_s
        self._refresh_inspector()

    # -- settings ----------------------------------------------------------------------

    def _live_only(self) -> bool:
        if self.request is None:
            self.notify("a replay's settings are fixed; run it again with specdeck compare")
            return False
        return True

    async def _change_drafts(self, delta: int) -> None:
        if not self._live_only():
            return
        k = self.request.settings.num_draft_tokens + delta
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
        if not self._live_only():
            return

        async def apply(request: "CompareRequest | None") -> None:
            if request is not None:
                self.request = request
                await self.start_run()

        self.push_screen(SettingsScreen(self.request), apply)

    # -- sessions and diffs ------------------------------------------------------------

    def action_sessions(self) -> None:
        async def open_chosen(session: Session | None) -> None:
            if session is not None:
                await self.open_session(session)

        self.push_screen(SessionBrowser(default_sessions_dir()), open_chosen)

    async def open_session(self, session: Session) -> None:
        """Replay a saved session in the panes, as ``specdeck replay`` does. A live run is
        cancelled; ``s``, ``[`` or ``]`` go back to live runs."""
        self._stop_race()
        self._host.cancel(self.run_id)
        self.run_id += 1
        self.traces = session.traces
        self.replay_settings = session.settings
        self.memory_estimates = dict(session.memory_estimates)
        self._known = pieces_by_token(self.traces)
        self.sub_title = session.replay_title
        container = self.query_one("#panes")
        await container.remove_children()
        await container.mount_all(self._new_panes())
        self.panes[0].focus()  # the screen would keep focus on a removed pane
        self._replay_traces()

    def _replay_traces(self) -> None:
        for pane in self.panes:
            pane.view.show_rejected = self.show_rejected
            pane.receive(self.traces[pane.strategy].events)
        self.start_race()

    def action_diff_panes(self) -> None:
        """Diff the focused pane with the first (the baseline, usually plain); from the
        first pane, every other pane with it."""
        if self.phase in ("loading", "running"):
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

    def action_help(self) -> None:
        self.push_screen(HelpScreen([b for b in self.BINDINGS if isinstance(b, Binding)]))


def run_app(
    request: "CompareRequest | None" = None,
    traces: dict[str, Trace] | None = None,
    *,
    settings: Any = None,
    title: str | None = None,
    memory_estimates: dict[str, int] | None = None,
    sessions_dir: "Path | None" = None,
    save_sessions: bool = True,
    hint: str | None = None,
) -> None:
    """Open the playground on a live comparison or on saved traces (``specdeck replay``).

    ``settings`` (a session's settings dictionary) labels replayed panes (k=..., n=...);
    ``memory_estimates`` (its ``Session.memory_estimates``) go beside the measured peaks.
    """
    SpecdeckApp(request, traces, settings=settings, title=title,
                memory_estimates=memory_estimates, sessions_dir=sessions_dir,
                save_sessions=save_sessions, hint=hint).run()
