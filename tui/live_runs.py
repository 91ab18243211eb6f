"""Live runs: the engine process that measures them, the events it sends,
cancelling."""

from __future__ import annotations

import time
from pathlib import Path

from textual import work

from specdeck.engines.core.events import Done, Event
from specdeck.engines.core.formatting import percent, plural
from specdeck.engines.core.stats import spread
from specdeck.engines.models.catalog import token_decoder
from specdeck.hosts.engine import (
    EngineSilent, EventBatch, Estimates, NotRun, ProcessHost, Progress, RunCommand,
    RunEnded, TargetLoaded,
)
from specdeck.hosts.group import GroupHost
from specdeck.tui.fixed_text import FixedText
from specdeck.tui.messages import DecoderRead, FromEngine
from specdeck.tui.pane import StrategyPane, pane_detail
from specdeck.tui.prompt_line import PromptLine
from specdeck.tui.sources import LiveSource, Phase, ReplaySource


#: While a run streams, statistics strips redraw at most this often: a number that
#: changes 30 times a second cannot be read, and every redraw takes CPU from the run.
LIVE_STATS_INTERVAL = 0.25

#: A streaming pane's status, running and paused.
HELD = ("running", "paused · space: resume")


class LiveRuns:
    """The app's live runs: submitted to the engine, streamed into the panes, ended
    or cancelled. Mixed into ``SpecdeckApp``
    (``tui.app``), whose state it shares."""

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
            pane.note = ""
            pane.memory_estimate = None
            pane.refresh_stats(None)
        self.measured = {}
        self._refresh_inspector()  # a new run: no round of the old one stays on show
        self.phase = Phase.LOADING
        self.status_text = "loading models…"
        self.runs_submitted = self.run_id
        if self._host_factory is None and self._host.group != self.request.group:
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

    def on_from_engine(self, message: FromEngine) -> None:
        payload = message.payload
        if isinstance(payload, RunEnded):
            self.runs_ended = max(self.runs_ended, payload.run_id)
        if isinstance(payload, RunEnded) and payload.run_id == self._cancelled_run:
            self._cancelled_ended(payload)
        if payload.run_id != self.run_id:
            return  # a cancelled or replaced run
        handle = {EventBatch: self._events, Progress: self._progress, Estimates: self._estimates,
                  NotRun: self._not_run, TargetLoaded: self._target_loaded,
                  RunEnded: self._ended, EngineSilent: self._engine_silent}[type(payload)]
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

    def _not_run(self, message: NotRun) -> None:
        """Strategies the models cannot run: their panes say why; the others run."""
        for name, why in message.reasons.items():
            if name in self._panes:
                self.pane(name).status = "not run"
                self.pane(name).note = f"not run: {why}"

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

    def on_decoder_read(self, message: DecoderRead) -> None:
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
        if self._save_problem(message) or not (message.saved or self.save_sessions):
            return
        # Nothing saved: nothing had been measured (the engine may have died loading).
        line = (f"cancelled · partial session saved to {message.saved} · r: measure again"
                if message.saved else "cancelled · nothing was measured, so nothing was "
                f"saved{f' ({message.error})' if message.error else ''} · r: measure again")
        if self.phase is Phase.CANCELLED:
            # A short screen says it in fewer words, and the path whole in a toast.
            self._brief = line, ("cancelled, partial session kept" if message.saved
                                 else "cancelled, nothing saved") + " · r: measure again"
            self.status_text = line
            self._say_saved(message.saved, "partial session saved")
        elif message.saved:
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
