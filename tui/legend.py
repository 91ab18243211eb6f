"""The legend: one sample of every token kind, styled by the same component classes.

Each kind differs by more than colour (underline, strike-through, bold, italic), so the
legend and the panes stay readable without colour vision or on a monochrome terminal.
A click on it opens the glossary (what each kind means), as ``w`` does.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from specdeck.tui.token_view import KINDS

#: What the legend calls each kind.
LABELS = {
    "target": "target (plain)",
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "correction": "correction",
    "bonus": "bonus",
    "copied": "copied draft (chain: prompt lookup)",
}


class Legend(Widget):
    """A one-line key to the token styles."""

    COMPONENT_CLASSES = {f"token--{kind}" for kind in KINDS}

    DEFAULT_CSS = """
    Legend { height: auto; }
    """

    #: Said after the samples when the line has room.
    HINT = "w or click: glossary"

    #: Whether a ``chain`` pane is shown: only then is a draft ``copied``.
    chained: reactive[bool] = reactive(False, layout=True)

    def render(self) -> Text:
        text = Text("tokens: ")
        used = text.cell_len  # cells on the last line
        for kind in KINDS:
            if kind == "copied" and not self.chained:
                continue
            label = LABELS[kind]
            if used + cell_len(label) > self.size.width and used > len("tokens: "):
                text.append("\n" + " " * len("tokens: "))  # a line more, never cut off
                used = len("tokens: ")
            text.append(label, self.get_component_rich_style(f"token--{kind}", partial=True))
            text.append("  ")
            used += cell_len(label) + 2
        if used + len(self.HINT) <= self.size.width:
            text.append(self.HINT, "dim")
        return text

    async def on_click(self) -> None:
        await self.app.run_action("glossary")
