"""Text from files and models made safe to show on a terminal: control characters visible.

A session, a sweep, a file name or a model's output may hold escape sequences: OSC 52
writes the clipboard, OSC 0 sets the window title, ``ESC [2J`` wipes the screen. Shown
through these functions, every control character becomes a visible symbol (ESC is ``␛``),
as does every character that reorders or hides text (bidi overrides, zero-width
characters), so nothing from data is ever emitted raw, by the app or by a command. Pure
``str`` to ``str``: the command line, the session layer and the app share this one mapping (Rich
``Text`` and Textual ``Content`` keep markup out; see ``specdeck.safe_text.rich_text``).
"""

from __future__ import annotations

#: C0 controls as the Unicode control pictures (NUL is ␀, ESC is ␛), tab as spaces.
_PRINTABLE: dict[int, str | int] = {code: 0x2400 + code for code in range(0x20)}
_PRINTABLE.update({0x7F: "␡", ord("\t"): "    ", ord("\n"): "\n"})
#: C1 controls (0x9B is a one-byte CSI on some terminals) and lone surrogates (file
#: names the OS could not decode), which no terminal can show.
_PRINTABLE.update({code: "\N{REPLACEMENT CHARACTER}" for code in range(0x80, 0xA0)})
_PRINTABLE.update({code: "\N{REPLACEMENT CHARACTER}" for code in range(0xD800, 0xE000)})
#: Characters that reorder or hide text: bidi overrides, embeddings, isolates and marks
#: (a verdict line could read backwards) as ``⇄``; zero-width and other invisible
#: formatting characters (a pane border shifts, a word hides) as ``␢``.
BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
INVISIBLE = (0x00AD, 0x180E, *range(0x200B, 0x200E), *range(0x2060, 0x2065),
             *range(0x206A, 0x2070), 0xFEFF, *range(0xFFF9, 0xFFFC), *range(0xE0000, 0xE0080))
_PRINTABLE.update({code: "⇄" for code in BIDI})
_PRINTABLE.update({code: "␢" for code in INVISIBLE})
#: Line and paragraph separators: some terminals break the line there.
_PRINTABLE.update({0x2028: "↵", 0x2029: "↵"})

_ONE_LINE = {**_PRINTABLE, ord("\n"): "↵"}
_ONE_FOR_ONE = {**_PRINTABLE, ord("\t"): "\t"}
#: Whitespace as marks: a token that is a space, a newline or an indent reads as one.
_MARKED = {**_PRINTABLE, ord(" "): "␣", ord("\n"): "⏎", ord("\t"): "→"}

#: Characters of a one-line message (an error, a progress line): a message may quote a
#: hostile or enormous file, and must still read as one line.
MESSAGE_CHARS = 1000


def printable(text: str) -> str:
    """``text`` with every control character but the newline shown as a symbol."""
    return text.translate(_PRINTABLE)


def visible(text: str, limit: int | None = None) -> str:
    """``text`` as one line: control characters and newlines (``↵``) shown as symbols,
    cut to ``limit`` characters with ``…`` when longer (titles, list rows, one-line
    messages)."""
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text.translate(_ONE_LINE)


def pictured(text: str) -> str:
    """``text`` with control characters shown one for one (newlines and tabs kept): the
    same length, for fields a person edits, whose cursor counts characters."""
    return text.translate(_ONE_FOR_ONE)


def marked(text: str) -> str:
    """``text`` as one line with its whitespace shown: space ``␣``, newline ``⏎``, tab
    ``→`` (a token of three spaces reads ``␣␣␣``, not as nothing), control characters
    as symbols."""
    return text.translate(_MARKED)
