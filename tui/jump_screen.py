"""Jump to a round: type its number, enter shows it in the focused pane and the inspector.

A small dialog (the idea of toolong's goto screen): the pane's rounds are numbered from 1
as the inspector numbers them; a number outside them is said in the dialog, which stays
open.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from specdeck.safe_text.rich_text import literal


def parse_round(text: str, total: int) -> int:
    """The round numbered ``text`` (from 1) as an index from 0; ValueError says why not."""
    try:
        number = int(text.strip())
    except ValueError:
        raise ValueError(f"a round is a whole number from 1 to {total} (got {text!r})") from None
    if not 1 <= number <= total:
        raise ValueError(f"this pane has rounds 1 to {total}")
    return number - 1


class JumpScreen(ModalScreen[int | None]):
    """Ask for a round of ``strategy`` (1..``total``); dismissed with its index from 0,
    or None (escape)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="jump.cancel")]

    def __init__(self, strategy: str, total: int, current: int | None) -> None:
        super().__init__(id="jump")
        self.strategy = strategy
        self.total = total
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="jump-body"):
            yield Static(literal(f"Jump to a round of {self.strategy} (1–{self.total})",
                                 one_line=True), classes="dialog-title")
            now = "" if self.current is None else str(self.current + 1)
            yield Input(now, placeholder="round number", id="jump-round",
                        restrict=r"[0-9]*", select_on_focus=True)
            yield Label("enter: show it in the pane and the inspector · escape: cancel",
                        id="jump-hint")

    @on(Input.Submitted, "#jump-round")
    def _submitted(self, event: Input.Submitted) -> None:
        try:
            index = parse_round(event.value, self.total)
        except ValueError as exc:
            self.query_one("#jump-hint", Label).update(literal(f"⚠ {exc}"))
            return
        self.dismiss(index)
