"""Strings from data as Rich ``Text``, for the command line and the app alike.

Rich and Textual parse plain strings as markup in many places (table cells and titles,
``Static``, data-table cells): ``[@click=app.quit]`` becomes an action, ``[/]`` or a
model's ``[/INST]`` an exception. A ``Text`` is never parsed, and ``printable`` shows
control characters instead of emitting them. Every string from a session, a sweep, a
file name, a model or its output reaches Rich through ``literal``.
"""

from __future__ import annotations

from rich.style import StyleType
from rich.text import Text

from specdeck.safe_text.plain import printable, visible


def literal(text: object, style: StyleType = "", *, one_line: bool = False,
            limit: int | None = None) -> Text:
    """``text`` (any value: shown with ``str``) shown exactly as written, never as markup,
    with its control characters visible; ``one_line`` also shows newlines as ``↵`` and
    cuts the text at ``limit`` characters."""
    text = str(text)
    shown = visible(text, limit) if one_line else printable(text)
    return Text(shown, style=style)
