"""Text the Textual side shows literally: toasts, and fields a person edits.

Textual parses a notification's message as markup by default: a file name holding
``[link=...]`` crashed the rename and delete toasts, and ``[@click=...]`` would become
an action. The apps take ``LiteralNotify``, so every ``notify`` (from any screen or
widget) shows its message as written, control characters visible. ``Input`` and
``TextArea`` send their text to the terminal as it is (an OSC 0 in a value set the
window title): fields that may hold a path or a prompt show control characters as
pictures (``ControlPictures``, ``pictured``). Widgets show strings from data through
``specdeck.safe_text.rich_text.literal``.
"""

from __future__ import annotations

import time

from rich.highlighter import Highlighter
from rich.text import Text
from textual.notifications import SeverityLevel

from specdeck.safe_text.plain import MESSAGE_CHARS, pictured, visible


class LiteralNotify:
    """Mix into an ``App``: notifications are never markup, and one still on screen is
    not stacked again (b held at round 1 had filled the screen with "round 1 is the
    first")."""

    #: When each message (with its title) still on screen leaves it (the ones gone are
    #: dropped at the next notification, so a long session's messages do not pile up).
    _toasts_until: dict[tuple[str, str], float] | None = None

    def notify(self, message: str, *, title: str = "",
               severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = False) -> None:
        now = time.monotonic()
        shown = self._toasts_until = {
            key: until for key, until in (self._toasts_until or {}).items() if until > now}
        key = (str(message), title)
        if shown.get(key, 0.0) > now:
            return
        if timeout is None:
            timeout = self.NOTIFICATION_TIMEOUT  # type: ignore[attr-defined]
        shown[key] = now + timeout
        super().notify(  # type: ignore[misc]
            visible(str(message), MESSAGE_CHARS), title=visible(title, MESSAGE_CHARS),
            severity=severity, timeout=timeout, markup=False,
        )


class ControlPictures(Highlighter):
    """An ``Input``'s highlighter that shows control characters as pictures, one for
    one (the value itself, and the cursor's place in it, are unchanged)."""

    def highlight(self, text: Text) -> None:
        text.plain = pictured(text.plain)
