"""A streaming text view that marks every token by kind and stays fast as text grows.

A Line-API widget: it wraps each new token onto the open last line and keeps the wrapped
lines, so appending costs the same at token 5 and at token 5,000 (``Static`` and
``TextArea`` re-render everything on each change). Token kinds are component classes
(``token--accepted`` ...), so the stylesheet and themes decide how each kind looks.
Each token remembers the round it came from: a click names that round (``Picked``), and
the round the inspector shows is marked (``select``).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Iterable

from rich.cells import cell_len, get_character_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from specdeck.engines.core.events import Round
from specdeck.safe_text.plain import printable

#: Token kinds, in legend order. ``target``: plain decoding's own token. ``copied``: in a
#: ``chain`` pane, an accepted draft that prompt lookup proposed (``accepted`` there is one
#: the draft model or the MTP head proposed).
KINDS = ("target", "accepted", "rejected", "correction", "bonus", "copied")
#: The round of a token appended without one (the text a run's end still held).
NO_ROUND = -1
#: A newline inside a rejected draft: shown, never a line break (the text that was kept
#: goes on where the draft was proposed, on the same line).
REJECTED_NEWLINE = "⏎"
#: Views at least this tall jump-scroll by half a view (see ``TokenView._fit``).
JUMP_SCROLL_LINES = 8


def round_tokens(event: Round, by_proposer: bool = False) -> list[tuple[str, str]]:
    """The (text, kind) pieces a round adds to a pane, rejected drafts where proposed;
    ``by_proposer`` (a ``chain`` pane): drafts copied by prompt lookup are ``copied``."""
    drafted = "copied" if by_proposer and event.proposer == "ngram" else "accepted"
    pieces = []
    for i, piece in enumerate(event.pieces):
        pieces.append((piece, drafted if i < event.accepted else (event.end or "target")))
    rejected = [(p, "rejected") for p in event.rejected_pieces]
    # Rejected drafts were proposed after the accepted prefix, before the correction.
    return pieces[: event.accepted] + rejected + pieces[event.accepted :]


class TokenView(ScrollView, can_focus=False):
    """Streaming, wrapped, token-coloured text; rejected drafts can be hidden. It follows
    the end of the text until it is scrolled away from it, and again once scrolled back
    to the end."""

    class Scrolled(Message):
        """A person scrolled the view (keys or wheel), not the stream: linked panes
        follow it."""

        def __init__(self, view: "TokenView") -> None:
            super().__init__()
            self.view = view

    COMPONENT_CLASSES = {f"token--{kind}" for kind in KINDS} | {"token--selected"}

    class Picked(Message):
        """A token was clicked: ``round`` is the round it came from (its number among
        the rounds appended, from 0)."""

        def __init__(self, view: "TokenView", round: int) -> None:
            super().__init__()
            self.view = view
            self.round = round

    DEFAULT_CSS = """
    TokenView { height: 1fr; overflow-x: hidden; scrollbar-gutter: stable; }
    /* The round the inspector explains: reversed, on top of each token's own style. */
    TokenView > .token--selected { text-style: reverse; }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._tokens: list[tuple[str, str]] = []
        #: The round each token came from (``NO_ROUND`` for none).
        self._owners: list[int] = []
        #: Wrapped lines, each a list of (text, kind, round) runs.
        self._lines: list[list[tuple[str, str, int]]] = [[]]
        #: The round whose tokens are marked (the one the inspector shows), if any.
        self._selected: int | None = None
        #: Per wrapped line, the tokens kept (rejected drafts left out) before it: the
        #: token position that links the panes' scrolling.
        self._line_starts: list[int] = [0]
        self._kept = 0
        #: Scrolling done here (following the stream, linking), not by a person.
        self._scrolling_itself = False
        self._last_width = 0  # cells used on the open last line
        self._wrap_width = 0
        self._show_rejected = True
        #: Rendered lines by index (None: not rendered); only the end ever changes. Each
        #: is cropped to the view: rendering a frame while text streams makes no strips.
        self._strips: list[Strip | None] = []
        self._strips_crop = (0, 0)  # (scroll_x, width) the strips are cropped to
        self._styles: dict[str, Style] = {}
        self._base: Style | None = None  # the view's own style (costly to look up)

    def on_mount(self) -> None:
        self.anchor()

    # -- content -----------------------------------------------------------------------

    @property
    def tokens(self) -> list[tuple[str, str]]:
        """Every (text, kind) appended, rejected drafts included."""
        return self._tokens

    @property
    def show_rejected(self) -> bool:
        return self._show_rejected

    @show_rejected.setter
    def show_rejected(self, show: bool) -> None:
        if show != self._show_rejected:
            self._show_rejected = show
            self._rewrap()

    def text(self, *, kinds: Iterable[str] | None = None) -> str:
        """The text as shown (rejected drafts only while visible), optionally of some kinds."""
        wanted = set(KINDS if kinds is None else kinds)
        if not self._show_rejected:
            wanted.discard("rejected")
        return "".join(text for text, kind in self._tokens if kind in wanted)

    def lines(self) -> list[str]:
        """The wrapped lines as plain text."""
        return ["".join(text for text, _, _ in line) for line in self._lines]

    def append(self, tokens: Iterable[tuple[str, str]], round: int = NO_ROUND) -> None:
        """Add (text, kind) pieces at the end, all from ``round``; only the affected lines
        are re-rendered. A rejected draft's newline shows as ``⏎``: text that was never
        kept does not break the line."""
        first_changed = len(self._lines) - 1
        for text, kind in tokens:
            text = printable(text)
            self._tokens.append((text, kind))
            self._owners.append(round)
            if self._show_rejected or kind != "rejected":
                self._place(text, kind, round)
        self._changed_from(first_changed)

    def clear(self) -> None:
        self._tokens.clear()
        self._owners.clear()
        self._selected = None
        self._rewrap()

    # -- rounds: which one a cell shows, which one is marked ----------------------------

    @property
    def selected(self) -> int | None:
        return self._selected

    def select(self, round: int | None) -> None:
        """Mark the tokens of ``round`` (None: none)."""
        if round != self._selected:
            self._selected = round
            self._strips.clear()
            self.refresh()

    def bring_into_view(self, owner: int) -> None:
        """Scroll the first line of round ``owner``'s tokens into view when it is not (a
        round jumped to may be far from the end the view follows)."""
        line = next((i for i, runs in enumerate(self._lines)
                     if any(run[2] == owner for run in runs)), None)
        top, height = round(self.scroll_y), self.scrollable_content_region.height
        if line is not None and not top <= line < top + height:
            # A third of the way down, yet never past the text's last line.
            top = min(line - height // 3, len(self._lines) - height)
            self.scroll_to(y=max(top, 0), animate=False, immediate=True)

    def round_at(self, x: int, y: int) -> int | None:
        """The round of the token drawn at (``x``, ``y``) of the view, if any."""
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        if not 0 <= index < len(self._lines):
            return None
        column = scroll_x + x
        for text, _, owner in self._lines[index]:
            column -= cell_len(text)
            if column < 0:
                return None if owner == NO_ROUND else owner
        return None

    def on_click(self, event: events.Click) -> None:
        owner = self.round_at(event.x, event.y)
        if owner is not None:
            self.post_message(self.Picked(self, owner))

    # -- wrapping ----------------------------------------------------------------------

    def _place(self, text: str, kind: str, owner: int) -> None:
        if kind == "rejected":
            text = text.replace("\n", REJECTED_NEWLINE)
        for i, part in enumerate(text.split("\n")):
            if i:
                self._new_line()
            if part:
                self._put(part, kind, owner)
        if kind != "rejected":
            self._kept += 1

    def _new_line(self) -> None:
        self._lines.append([])
        self._line_starts.append(self._kept)
        self._last_width = 0

    def _put(self, part: str, kind: str, owner: int) -> None:
        width = self._wrap_width
        cells = len(part) if part.isascii() else cell_len(part)
        if width <= 0:  # not laid out yet: keep one long line, rewrapped on resize
            self._lines[-1].append((part, kind, owner))
            self._last_width += cells
            return
        if self._last_width and self._last_width + cells > width:
            self._new_line()  # tokens are word-sized: wrap before one that does not fit
        if cells > width - self._last_width:
            part, cells = self._cut(part, kind, owner, width)
        if part:
            self._lines[-1].append((part, kind, owner))
            self._last_width += cells

    def _cut(self, part: str, kind: str, owner: int, width: int) -> tuple[str, int]:
        """Fill lines with ``part`` (too long for the open line) in one pass; the rest
        for the last line, and its cells. Linear: a model may emit megabytes without a
        space (re-measuring per line took minutes for 2 MB)."""
        room = width - self._last_width
        if part.isascii():  # one cell per character: cut by position
            start = 0
            while len(part) - start > room:
                self._lines[-1].append((part[start : start + room], kind, owner))
                self._new_line()
                start, room = start + room, width
            return part[start:], len(part) - start
        start = used = 0
        for i, ch in enumerate(part):
            size = get_character_cell_size(ch)
            if used + size > room:
                if i > start:
                    self._lines[-1].append((part[start:i], kind, owner))
                self._new_line()  # (a wide character on a line with one cell left too)
                start, used, room = i, 0, width
            used += size
        return part[start:], used

    def _rewrap(self) -> None:
        self._lines = [[]]
        self._line_starts = [0]
        self._kept = 0
        self._last_width = 0
        for (text, kind), owner in zip(self._tokens, self._owners):
            if self._show_rejected or kind != "rejected":
                self._place(text, kind, owner)
        self._changed_from(0)

    def _changed_from(self, first: int) -> None:
        del self._strips[first:]
        lines = len(self._lines)
        if first and lines <= self.virtual_size.height:
            self.refresh_lines(first, lines - first)  # new lines land in the room below
        else:
            self._fit()

    def _fit(self) -> None:
        """Size the scrollable area to the text plus room, and follow its end.

        When the text reaches the bottom it jump-scrolls, as xterm does: the last line
        moves to the middle, so the next half view of lines arrives without scrolling.
        Scrolling repaints the whole view, which costs a measured run CPU: at most once
        per half view, not once per line. A view of a few lines (a short terminal)
        scrolls line by line instead: half of it would be most of what it shows.
        """
        lines = len(self._lines)
        view = self.scrollable_content_region.height
        room = view // 2 if view >= JUMP_SCROLL_LINES else 0
        height = lines + room if lines > view else max(view, lines)
        if self.virtual_size.height != height:
            self._grow(Size(self._wrap_width, height))
        self.refresh()
        if self.following and lines > view:
            self._scrolling_itself = True
            try:
                self.scroll_end(immediate=True, animate=False)
            finally:
                self._scrolling_itself = False

    @property
    def following(self) -> bool:
        """The view follows the end of the text: it was not scrolled away from it.
        (Textual's ``scroll_end`` re-anchors a released anchor, so it is called only
        while this holds; ``_anchor_released`` has no public name in Textual 8.)"""
        return self.is_anchored and not getattr(self, "_anchor_released", False)

    # -- scrolling by token position -----------------------------------------------------

    @property
    def line_positions(self) -> list[int]:
        """Per wrapped line, the token position it starts at (tokens kept before it)."""
        return list(self._line_starts)

    @property
    def top_position(self) -> int:
        """The token position (tokens kept before it) of the first line in view."""
        line = min(round(self.scroll_y), len(self._line_starts) - 1)
        return self._line_starts[max(line, 0)]

    def scroll_to_position(self, position: int | None) -> None:
        """Bring the line holding token ``position`` to the top (another pane's view
        scrolled there); None, or a line past the last top line: go to the end of the
        text and follow it."""
        line = None if position is None else self._line_of(position)
        self._scrolling_itself = True
        try:
            if line is None or line >= self.max_scroll_y:
                self.anchor()
            else:
                self.scroll_to(y=line, animate=False, immediate=True)
        finally:
            self._scrolling_itself = False

    def _line_of(self, position: int) -> int:
        """The first wrapped line that holds token ``position`` (a token with newlines
        spans several lines)."""
        starts = self._line_starts
        line = bisect_left(starts, position)
        return line if line < len(starts) and starts[line] == position else max(line - 1, 0)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if self.is_anchored and not self.following and new >= self.max_scroll_y:
            self.anchor()  # scrolled back to the end: follow it again
        if not self._scrolling_itself and round(old) != round(new):
            self.post_message(self.Scrolled(self))

    def _grow(self, size: Size) -> None:
        """Set the scrollable size. Assigning ``virtual_size`` lays out the whole screen
        (~25 ms at 160x48), once per new line while text streams in; unless the vertical
        scrollbar appears or goes, only this view's scrollbar needs updating, as Textual
        itself does for a size change without layout."""
        view = self.scrollable_content_region.height
        if (self.virtual_size.height > view) != (size.height > view):
            self.virtual_size = size
            return
        self.set_reactive(Widget.virtual_size, size)
        self._scroll_update(size)

    def on_resize(self) -> None:
        width = self.scrollable_content_region.width
        if width != self._wrap_width:
            self._wrap_width = width
            self._rewrap()
        else:  # a new height: the room below the text and the scroll position follow
            self._fit()

    # -- rendering ---------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._base = None
        self._strips.clear()

    def _style(self, kind: str) -> Style:
        style = self._styles.get(kind)
        if style is None:
            style = self.get_component_rich_style(f"token--{kind}", partial=True)
            self._styles[kind] = style
        return style

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if self._base is None:
            self._base = self.rich_style
        base = self._base
        if index >= len(self._lines):
            return Strip.blank(width, base)
        if self._strips_crop != (scroll_x, width):
            self._strips_crop = (scroll_x, width)
            self._strips.clear()
        if index >= len(self._strips):
            self._strips.extend([None] * (index + 1 - len(self._strips)))
        strip = self._strips[index]
        if strip is None:
            selected = self._selected
            strip = Strip([
                Segment(text, base + self._style(kind) + (
                    self._style("selected") if owner == selected else Style()))
                for text, kind, owner in self._lines[index]
            ]).crop_extend(scroll_x, scroll_x + width, base)
            self._strips[index] = strip
        return strip
