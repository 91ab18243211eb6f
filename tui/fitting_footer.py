"""Textual's footer, showing only the keys that fit whole in its width."""

from __future__ import annotations

from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterLabel


#: Seconds between looks at a footer whose keys are not laid out yet, and how many.
LAYOUT_WAIT, LAYOUT_WAITS = 0.05, 40


class FittingFooter(Footer):
    """A footer that leaves out, from the end, the keys its width cannot show whole
    (Textual's cuts the last one mid-word: "x Rejecte"), but for the actions in
    ``ALWAYS`` (Quit), whose room is kept. The bindings come in order of use, ``?``
    first, and the help screen lists every key."""

    #: Actions shown whatever the width: a person must always see how to leave.
    ALWAYS = frozenset({"quit"})

    _waits = 0
    #: The keys the footer was last composed to show.
    _composed_for: tuple | None = None

    def bindings_changed(self, screen: Screen) -> None:
        # Textual composes the footer anew on every change of focus; most (a tab from
        # pane to pane) change no key it shows, and composing cost half of a key press.
        shown = tuple((b.key, b.action, b.description, enabled, tooltip)
                      for _, b, enabled, tooltip in screen.active_bindings.values() if b.show)
        if shown == self._composed_for:
            return
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._composed_for = shown
        super().bindings_changed(screen)

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self._fit)

    def on_resize(self, event: Resize) -> None:
        for child in self.children:  # measured whole again, then fitted
            child.display = True
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        children = list(self.children)
        if not all(c.virtual_region.width for c in children):  # keys, groups and labels
            # Not laid out yet: composed anew under a screen pushed over this one (the
            # keys of a modal's bindings), where a fit now found every key at 0 and
            # showed them all, the last cut ("x Reje"). Fitted once they are (a screen
            # never drawn again is left: coming back, it composes its keys anew).
            self._waits += 1
            if self._waits <= LAYOUT_WAITS:
                self.set_timer(LAYOUT_WAIT, self._fit)
            return
        self._waits = 0
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
        kept = [unit for unit in units
                if any(getattr(c, "action", None) in self.ALWAYS for c in unit)]
        room -= sum(_width(unit) for unit in kept)
        used, fits = 0, True
        for unit in units:  # laid out whole: each unit's width, margins included
            if unit not in kept:
                used += _width(unit)
                fits = fits and used <= room
            for child in unit:
                child.display = fits or unit in kept


def _width(unit: list) -> int:
    """The columns a key (or a group's keys and label) takes, margins included."""
    regions = [c.virtual_region_with_margin for c in unit]
    return max(r.right for r in regions) - min(r.x for r in regions)
