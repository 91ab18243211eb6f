"""Text in a box of fixed height that repaints without laying out the screen.

``Static.update`` re-lays out the whole screen in case the new text changes its size
(~25 ms at 160x48). The status line and the statistics strips change many times a run,
while a run is measured; their height rarely changes, so a repaint is enough. Given
``max_lines``, the box grows (up to that) when the text wraps onto more lines, and only
then lays out the screen: a narrow status line shows its whole message.
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

    def __init__(self, *, max_lines: int = 1, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.max_lines = max_lines
        self._lines = 0

    def render(self) -> Content:
        # Plain, never markup (an error may hold [brackets]); control characters shown.
        return Content(printable(self.text))

    def watch_text(self) -> None:
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        width = self.content_size.width
        if self.max_lines <= 1 or width <= 0:
            return
        wrapped = len(Content(printable(self.text)).wrap(width))
        lines = max(1, min(self.max_lines, wrapped))
        if lines != self._lines:
            self._lines = lines
            self.styles.height = lines
