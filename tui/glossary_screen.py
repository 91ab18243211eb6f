"""The glossary on its own screen (``w``, or a click on the legend); it scrolls."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specdeck.tui.glossary import glossary_table


class GlossaryScreen(ModalScreen[None]):
    """What the words on the screen mean; escape, q or w closes it."""

    BINDINGS = [Binding("escape,q,w", "dismiss", "Close", id="glossary.close")]

    def __init__(self) -> None:
        super().__init__(id="glossary")

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="glossary-body"):
            yield Static("specdeck — glossary  (escape closes)", classes="dialog-title")
            yield Static(glossary_table())
