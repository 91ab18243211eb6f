"""Text in a box of fixed height that repaints without laying out the screen.

``Static.update`` re-lays out the whole screen in case the new text changes its size
(~25 ms at 160x48). The status line and the statistics strips change many times a run,
while a run is measured; their height rarely changes, so a repaint is enough. Given
``max_lines``, the box grows (up to that) when the text wraps onto more lines, and only
then lays out the screen: a narrow status line shows its whole message. Where even
``max_lines`` are too few, the text is cut at a word with ``…``, and its ``tail`` (the
status line's flags: PAUSED...) still shows, whole. A ``brief`` (the text in fewer words)
is shown instead where it takes fewer lines (a line that grows pushes what is under it)
or where the whole would be cut.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from specdeck.safe_text.plain import printable

#: Between the text and a tail on the same line.
TAIL_GAP = "   "


class FixedText(Widget):
    """Give it a fixed ``height`` in the stylesheet; set ``text`` to change what it shows."""

    DEFAULT_CSS = "FixedText { height: 1; }"

    text = reactive("", layout=False)
    #: Shown after ``text`` (with ``max_lines`` > 1), never broken nor cut: on the text's
    #: last line where it fits, else from a line of its own.
    tail = reactive("", layout=False)
    #: ``text`` in fewer words, shown where the whole would take more lines.
    brief = reactive("", layout=False)

    def __init__(self, *, max_lines: int = 1, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.max_lines = max_lines
        self._lines = 0
        #: (text, tail, width) and the lines they make there: rendering reuses the fit's.
        self._laid_out: tuple[tuple[str, str, int], list[str]] | None = None

    def render(self) -> Content:
        # Plain, never markup (an error may hold [brackets]); control characters shown.
        width = self.content_size.width
        if self.max_lines <= 1 or width <= 0:
            return Content(printable(self.text))
        return Content("\n".join(self._layout(width)))

    def watch_text(self) -> None:
        self._fit()

    def watch_tail(self) -> None:
        self._fit()

    def watch_brief(self) -> None:
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def shows(self, part: str) -> bool:
        """Whether ``part`` of the text shows whole at the box's width, not cut off the
        end (True before the box has a width, or with ``max_lines`` 1)."""
        width = self.content_size.width
        if self.max_lines <= 1 or width <= 0:
            return True
        return printable(part) in " ".join(self._layout(width))

    def _fit(self) -> None:
        width = self.content_size.width
        if self.max_lines <= 1 or width <= 0:
            return
        lines = max(1, len(self._layout(width)))
        if lines != self._lines:
            self._lines = lines
            self.styles.height = lines

    def _layout(self, width: int) -> list[str]:
        """The lines shown at ``width``: the text (or its brief, where that takes fewer),
        cut at its last word that leaves room for the tail within ``max_lines``, then the
        tail."""
        key = (self.text, self.tail, self.brief, width)
        if self._laid_out is None or self._laid_out[0] != key:
            lines, whole = self._cut(self.text, width)
            if self.brief and (len(lines) > 1 or not whole):
                brief = self._cut(self.brief, width)[0]
                if len(brief) < len(lines) or not whole and len(brief) == len(lines):
                    lines = brief
            self._laid_out = key, lines
        return self._laid_out[1]

    def _cut(self, text: str, width: int) -> tuple[list[str], bool]:
        """The lines ``text`` takes within ``max_lines``, and whether it shows whole."""
        words = printable(text).split(" ")
        for kept in range(len(words), -1, -1):
            shown = " ".join(words[:kept]) + ("…" if 0 < kept < len(words) else "")
            lines = self._wrap(shown, width)
            if len(lines) <= self.max_lines:
                break
        return lines, kept == len(words)

    def _wrap(self, text: str, width: int) -> list[str]:
        """``text`` wrapped at ``width``, the tail after it, whole."""
        lines = [line.plain for line in Content(text).wrap(width)] if text else []
        tail = printable(self.tail)
        if not tail:
            return lines
        if lines and cell_len(lines[-1] + TAIL_GAP + tail) <= width:
            lines[-1] += TAIL_GAP + tail
            return lines
        return lines + [line.plain for line in Content(tail).wrap(width)]
