"""The legend: one sample of every token kind, styled by the same component classes.

Each kind differs by more than colour (underline, strike-through, bold, italic), so the
legend and the panes stay readable without colour vision or on a monochrome terminal.
A click on it opens the glossary (what each kind means), as ``w`` does.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from specdeck.tui.token_view import KINDS

#: What the legend calls each kind.
LABELS = {
    "target": "target (plain)",
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "correction": "correction",
    "bonus": "bonus",
}


class Legend(Widget):
    """A one-line key to the token styles."""

    COMPONENT_CLASSES = {f"token--{kind}" for kind in KINDS}

    DEFAULT_CSS = """
    Legend { height: 1; }
    """

    #: Said after the samples when the line has room.
    HINT = "w or click: glossary"

    def render(self) -> Text:
        text = Text("tokens: ")
        for kind in KINDS:
            text.append(LABELS[kind], self.get_component_rich_style(f"token--{kind}", partial=True))
            text.append("  ")
        if text.cell_len + len(self.HINT) <= self.size.width:
            text.append(self.HINT, "dim")
        return text

    async def on_click(self) -> None:
        await self.app.run_action("glossary")
