"""Where the app goes: settings, k, sessions, diffs, presets, screenshots, help."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterable

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from specdeck.engines.core.config import MAX_DRAFT_TOKENS
from specdeck.engines.core.events import Trace
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.core.strategies import OWN, strategy_of
from specdeck.safe_text.plain import visible
from specdeck.sessions.diff import diff_sessions
from specdeck.sessions.session import SCHEMA_VERSION, Session
from specdeck.sessions.store import default_sessions_dir, why_not
from specdeck.tui.diff_screen import DiffScreen
from specdeck.tui.help_screen import HelpScreen
from specdeck.tui.prompt_line import PromptLine
from specdeck.tui.session_browser import SessionBrowser
from specdeck.tui.settings_screen import SettingsScreen
from specdeck.tui.sources import LiveSource, ReplaySource


class Navigation:
    """The app's ways to other runs and other screens. Mixed into ``SpecdeckApp``
    (``tui.app``), whose state it shares."""

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
        if not any(OWN not in name and "draft" in strategy_of(name).drafters
                   for name in self.request.strategies):
            self.notify(f"no pane here drafts at -k ({OWN} names a pane's own, mtp drafts at "
                        "its depth): s (settings) changes them")
            return
        k = self.request.settings.num_draft_tokens
        if isinstance(k, str):
            self.notify(f"k is {k}, chosen round by round: s (settings) sets a number")
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

    async def action_settings(self) -> None:
        """The settings dialog, mounted before the next key is handled: keys typed right
        after ``s`` (a burst, a paste) go to its fields, not lost or split while it
        mounts and focuses its first field."""
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
        await self.push_screen(screen, apply)

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
        self.source = ReplaySource.of(session)
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
        where (Textual's own writes to ~/Downloads, and fails where it is missing), and
        Quit is listed once, as the binding ``q`` (``tui.commands``)."""
        for command in super().get_system_commands(screen):
            if command.title not in ("Screenshot", "Quit"):
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
