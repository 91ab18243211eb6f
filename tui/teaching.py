"""Pause, step, inspect: one round at a time, and why it went as it did."""

from __future__ import annotations

from specdeck.engines.core.stats import cost_model, plain_step_seconds, speedup
from specdeck.safe_text.plain import visible
from specdeck.tui.cost_view import CostScreen
from specdeck.tui.glossary_screen import GlossaryScreen
from specdeck.tui.inspector import RoundInspector
from specdeck.tui.jump_screen import JumpScreen
from specdeck.tui.pane import StrategyPane
from specdeck.tui.prompt_line import PromptLine
from specdeck.tui.token_view import TokenView


class Teaching:
    """The app's teaching keys, on the focused pane. Mixed into ``SpecdeckApp``
    (``tui.app``), whose state it shares."""

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

    def on_strategy_pane_round_picked(self, message: StrategyPane.RoundPicked) -> None:
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
        chosen = any(r.length is not None for r in pane.rounds[:pane.rounds_shown])
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

    def on_token_view_scrolled(self, message: TokenView.Scrolled) -> None:
        if self.scroll_linked:
            self._follow_scroll(message.view)

    def _follow_scroll(self, leader: TokenView) -> None:
        """Scroll every other pane to the token position at the top of ``leader``, or to
        its end while ``leader`` follows its own."""
        position = None if leader.following else leader.top_position
        for pane in self.panes:
            if pane.view is not leader:
                pane.view.scroll_to_position(position)
