"""Text fields that take a burst of keys in the order it was typed.

Textual inserts a printable key as soon as the field receives it, but runs an editing
key bound on the field (backspace, ctrl+u, end...) only once that key has bubbled up to
the app, after the keys typed behind it were inserted. A burst (a fast typist, keys a
terminal sends at once) then came out of order: ``end``, ``ctrl+u``, ``plain`` left
the field empty; a backspace deleted a later letter. These fields run their own bound
keys as they receive them.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input, TextArea


class InOrder:
    """Mix into a Textual text widget, before it: its own bindings run in key order."""

    async def _on_key(self, event: events.Key) -> None:
        bindings = self._bindings.key_to_bindings.get(event.key)  # type: ignore[attr-defined]
        if bindings:
            event.stop()
            event.prevent_default()
            await self.run_action(bindings[0].action)  # type: ignore[attr-defined]
            return
        await super()._on_key(event)  # type: ignore[misc]


class Field(InOrder, Input):
    """A one-line field of a dialog."""


class TextField(InOrder, TextArea):
    """A many-line field of a dialog (the prompt)."""
