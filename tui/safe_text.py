"""Text the Textual side shows literally: toasts, and fields a person edits.

Textual parses a notification's message as markup by default: a file name holding
``[link=...]`` crashed the rename and delete toasts, and ``[@click=...]`` would become
an action. The apps take ``LiteralNotify``, so every ``notify`` (from any screen or
widget) shows its message as written, control characters visible. ``Input`` and
``TextArea`` send their text to the terminal as it is (an OSC 0 in a value set the
window title): fields that may hold a path or a prompt show control characters as
pictures (``ControlPictures``, ``pictured``). Widgets show strings from data through
``specdeck.literal.literal``.
"""

from __future__ import annotations

from rich.highlighter import Highlighter
from rich.text import Text
from textual.notifications import SeverityLevel

from specdeck.visible import MESSAGE_CHARS, pictured, visible


class LiteralNotify:
    """Mix into an ``App``: notifications are never markup."""

    def notify(self, message: str, *, title: str = "",
               severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = False) -> None:
        super().notify(  # type: ignore[misc]
            visible(str(message), MESSAGE_CHARS), title=visible(title, MESSAGE_CHARS),
            severity=severity, timeout=timeout, markup=False,
        )


class ControlPictures(Highlighter):
    """An ``Input``'s highlighter that shows control characters as pictures, one for
    one (the value itself, and the cursor's place in it, are unchanged)."""

    def highlight(self, text: Text) -> None:
        text.plain = pictured(text.plain)
