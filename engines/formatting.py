"""How numbers read to a person, in the command line's output and in the app alike."""

from __future__ import annotations

from typing import Any

from specdeck.engines.catalog import ModelInfo


def gb(n: int) -> str:
    """Bytes for a person: 1.2 GB, 340 MB, 56 KB."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def format_stat(name: str, value: Any) -> str:
    """A statistic as a person reads it; units follow from the name."""
    if value is None:
        return "-"
    if name == "acceptance_by_position":
        return " ".join(f"{v:.0%}" for v in value) or "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if name.endswith("_rate"):
        return f"{value:.1%}"
    if name.endswith("_bytes"):
        return f"{value / 2**20:,.0f} MiB"
    if name.endswith("_seconds"):
        return f"{value:.3f} s"
    if name == "tokens_per_s":
        return f"{value:.1f}"
    if "speedup" in name:
        return f"{value:.2f}x"
    return f"{value:,}" if isinstance(value, int) else f"{value:.3g}"


def parameters_text(n: int | None) -> str:
    """A parameter count for a person: 1.5B, 5.6M (shared with the app's model picker)."""
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
    return (m.dtype or "-").lower()
