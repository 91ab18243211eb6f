"""Toasts that show their text literally, for every app of specdeck.

Textual parses a notification's message as markup by default: a file name holding
``[link=...]`` crashed the rename and delete toasts, and ``[@click=...]`` would become
an action. The apps take this mixin, so every ``notify`` (from any screen or widget)
shows its message as written, control characters visible. Widgets show strings from
data through ``specdeck.literal.literal``.
"""

from __future__ import annotations

from textual.notifications import SeverityLevel

from specdeck.visible import MESSAGE_CHARS, visible


class LiteralNotify:
    """Mix into an ``App``: notifications are never markup."""

    def notify(self, message: str, *, title: str = "",
               severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = False) -> None:
        super().notify(  # type: ignore[misc]
            visible(str(message), MESSAGE_CHARS), title=visible(title, MESSAGE_CHARS),
            severity=severity, timeout=timeout, markup=False,
        )
