"""How numbers read to a person, in the command line's output and in the app alike.

One convention everywhere: bytes in binary units with their IEC names (KiB, MiB, GiB,
as memory is counted), rates in tok/s, times in ms under a second, shares as
percentages, speedups as ``1.23x``, counts with their noun in the right number, and
``–`` for a value not known (yet). Plain strings: the front ends put them in tables,
strips and messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:  # annotations only: engines.files formats sizes and catalog reads files
    from specdeck.engines.models.catalog import ModelInfo

#: What a value that is not known (yet) shows as.
MISSING = "–"

_BINARY_UNITS = ("KiB", "MiB", "GiB", "TiB")


def byte_size(count: int | None, signed: bool = False) -> str:
    """Bytes in binary units: ``512 B``, ``56.0 KiB``, ``30.2 MiB``, ``340 MiB``,
    ``1.2 GiB`` (one decimal under 100); ``signed`` marks growth with ``+``."""
    if count is None:
        return MISSING
    sign = "+" if signed and count > 0 else "-" if count < 0 else ""
    size, unit = abs(count), "B"
    if size < 1024:
        return f"{sign}{size} B"
    for unit in _BINARY_UNITS:
        size /= 1024
        if size < 1024:
            break
    return f"{sign}{size:.1f} {unit}" if round(size, 1) < 100 else f"{sign}{size:.0f} {unit}"


def rate(tokens_per_s: float | None) -> str:
    """Decoding speed: ``41.3 tok/s``."""
    return MISSING if tokens_per_s is None else f"{tokens_per_s:.1f} tok/s"


def duration(seconds: float | None) -> str:
    """A time: ``0.4 ms``, ``12 ms``, ``1.25 s``."""
    if seconds is None:
        return MISSING
    ms = seconds * 1000
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 999.5:  # what rounds to 1000 ms reads 1.00 s (no round(): ms may be inf)
        return f"{ms:.0f} ms"
    return f"{seconds:.2f} s"


def percent(share: float | None, decimals: int = 0) -> str:
    """A share as a percentage: ``62%`` (``62.5%`` with one decimal)."""
    return MISSING if share is None else f"{share:.{decimals}%}"


def times(ratio: float | None) -> str:
    """A ratio of speeds: ``1.34x``."""
    return MISSING if ratio is None else f"{ratio:.2f}x"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 token``, ``2 tokens``, ``1 more line``; ``many`` for irregular nouns."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"


def ordinal(n: int) -> str:
    """A place: ``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``22nd``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


#: Statistics that are shares though their names do not end in ``_rate`` (llama.cpp's
#: ``accept``, ``engines.conventions``).
SHARE_NAMES = {"accept"}


def format_stat(name: str, value: Any) -> str:
    """A statistic (a field of ``engines.stats.Stats``, or ``speedup_vs_plain``) as a
    person reads it; the unit follows from the name."""
    if value is None:
        return MISSING
    if isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
        return " ".join(percent(v) for v in value) or MISSING  # shares by draft position
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if name.endswith("_rate") or name in SHARE_NAMES:
        return percent(value, 1)
    if name.endswith("_bytes"):
        return byte_size(value)
    if name.endswith("_seconds"):
        return duration(value)
    if name == "tokens_per_s":  # the unit is in the name (and in a table's heading)
        return f"{value:.1f}"
    if "speedup" in name:
        return times(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:.3g}"


def setting_text(path: str, value: Any, width: int = 60) -> str:
    """A configuration or machine value (a diff's ``path``, dotted) for a person: byte
    counts (``*_bytes``, memory estimates) in binary units, strings quoted, cut at
    ``width`` characters."""
    if isinstance(value, int) and not isinstance(value, bool) and (
            path.endswith("_bytes") or ".memory_estimates." in f".{path}"):
        return byte_size(value)
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def stats_table(a_title: str, b_title: str, rows: Iterable[Any]
                ) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, str]]]:
    """Two runs' statistics side by side with their ratio: the columns (title and
    justification) and the rows as text, for the CLI and the app to draw alike. ``rows``
    are ``specdeck.sessions.diff.StatRow``s (``name``, ``a``, ``b``, ``ratio``)."""
    columns = [("", "left"), (a_title, "right"), (b_title, "right"), ("b / a", "right")]
    return columns, [
        (row.name, format_stat(row.name, row.a), format_stat(row.name, row.b),
         MISSING if row.ratio is None else f"{row.ratio:.2f}")
        for row in rows
    ]


def parameters_text(n: int | None) -> str:
    """A parameter count for a person: 1.5B, 5.6M."""
    if n is None:
        return "no weights"
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def quant_text(m: ModelInfo) -> str:
    """Quantisation (4-bit/64) or, unquantised, the weights' dtype."""
    if m.bits:
        return f"{m.bits}-bit/{m.group_size}" if m.group_size else f"{m.bits}-bit"
    return (m.dtype or MISSING).lower()
