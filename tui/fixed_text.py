"""Text in a box of fixed height that repaints without laying out the screen.

``Static.update`` re-lays out the whole screen in case the new text changes its size
(~25 ms at 160x48). The status line and the statistics strips change many times a run,
while a run is measured; their height never changes, so a repaint is enough.
"""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from specdeck.visible import printable


class FixedText(Widget):
    """Give it a fixed ``height`` in the stylesheet; set ``text`` to change what it shows."""

    DEFAULT_CSS = "FixedText { height: 1; }"

    text = reactive("", layout=False)

    def render(self) -> Content:
        # Plain, never markup (an error may hold [brackets]); control characters shown.
        return Content(printable(self.text))
