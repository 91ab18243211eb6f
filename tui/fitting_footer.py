"""Textual's footer, showing only the keys that fit whole in its width."""

from __future__ import annotations

from textual.events import Resize
from textual.widgets import Footer
from textual.widgets._footer import FooterLabel


class FittingFooter(Footer):
    """A footer that leaves out, from the end, the keys its width cannot show whole
    (Textual's cuts the last one mid-word: "x Rejecte"). The bindings come in order of
    use, ``?`` first, and the help screen lists every key."""

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self._fit)

    def on_resize(self, event: Resize) -> None:
        for child in self.children:  # measured whole again, then fitted
            child.display = True
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        children = list(self.children)
        palette = [c for c in children if c.has_class("-command-palette")]
        room = self.size.width - sum(c.outer_size.width for c in palette)
        units: list[list] = []  # a key, or a group's keys and its label
        for child in children:
            if child in palette:
                continue
            if isinstance(child, FooterLabel) and units:
                units[-1].append(child)
            else:
                units.append([child])
        fits = True
        for unit in units:  # laid out whole: where each ends, margins included
            fits = fits and max(c.virtual_region_with_margin.right for c in unit) <= room
            for child in unit:
                child.display = fits
