"""A saved sweep (``specdeck sweep``'s JSON, kind ``"sweep"``): loaded and checked without
mlx, and its cells as the rows of a table, for ``specdeck replay`` and the app's sweep view.

The document is ``specdeck.sessions.session.sweep_document``'s (schema ``SCHEMA_VERSION``, as a
session's): ``schema_version``, ``kind``,
``created``, ``partial``, ``config``, ``machine``, ``cells`` (one measured cell each) and
``recommendations``. Reading the file shares the session loader's errors (a missing,
empty, truncated or non-JSON file ends in one line naming it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdeck.engines.core.formatting import MISSING, byte_size
from specdeck.sessions.session import SCHEMA_VERSION, SessionError, read_document

_NUMBER = (int, float)
#: Cell fields the table, the chart and the recommendations read, with their JSON types.
_CELL_FIELDS: dict[str, tuple[type, ...]] = {
    "prompt": (str,), "kind": (str,), "strategy": (str,), "label": (str,),
    "temperature": _NUMBER, "k": (int, str, type(None)),
    "depth": (int, str, type(None)),
    "n": (int, type(None)), "median_tokens_per_s": (*_NUMBER, type(None)),
    "speedup": (*_NUMBER, type(None)), "cv": (*_NUMBER, type(None)), "noisy": (bool,),
    "acceptance_rate": (*_NUMBER, type(None)), "mean_accepted": (*_NUMBER, type(None)),
    "predicted_speedup": (*_NUMBER, type(None)),
    "memory_over_plain_bytes": (int, type(None)), "correct": (bool, type(None)),
    "why": (str,),
}

#: The sweep table's columns (``cell_row`` fills them in this order).
COLUMNS = ("prompt", "temp", "setting", "tok/s", "speedup", "CV", "accept", "mean acc",
           "predicted", "mem vs plain", "check")


@dataclass
class Sweep:
    """A loaded sweep: every measured cell (as saved) and the recommendations."""

    created: str
    #: True when the sweep was interrupted (the cells finished so far are kept).
    partial: bool
    config: dict
    machine: dict
    cells: list[dict]
    recommendations: list[str]
    path: Path | None = None


def is_sweep(document: Any) -> bool:
    return type(document) is dict and document.get("kind") == "sweep"


def _cell_problem(cell: Any) -> str | None:
    if type(cell) is not dict:
        return "is not an object"
    for name, types in _CELL_FIELDS.items():
        if name not in cell:
            return f"lacks {name}"
        value = cell[name]
        if type(value) not in types:  # exact types: true is not a number, as in JSON
            return f"{name} has the wrong type ({type(value).__name__})"
    return None


def sweep_from_document(document: Any, path: Path | None = None) -> Sweep:
    """Check a parsed sweep document; SessionError names the file and what is wrong."""
    source = str(path) if path is not None else "sweep"

    def fail(problem: str) -> SessionError:
        return SessionError(f"{source}: {problem}")

    if not is_sweep(document):
        raise fail('not a specdeck sweep (no "kind": "sweep")')
    version = document.get("schema_version")
    if type(version) is not int:
        raise fail("schema_version must be a whole number")
    if version > SCHEMA_VERSION:
        raise fail(f"written by a newer specdeck (sweep schema {version}); this one reads "
                   f"up to {SCHEMA_VERSION}: upgrade specdeck")
    cells, lines = document.get("cells"), document.get("recommendations", [])
    if type(cells) is not list:
        raise fail("cells must be a list")
    for i, cell in enumerate(cells):
        problem = _cell_problem(cell)
        if problem:
            raise fail(f"cell {i} {problem}")
    if type(lines) is not list or not all(type(line) is str for line in lines):
        raise fail("recommendations must be a list of strings")
    config, machine = document.get("config", {}), document.get("machine", {})
    if type(config) is not dict or type(machine) is not dict:
        raise fail("config and machine must be objects")
    partial = document.get("partial", False)
    if type(partial) is not bool:
        raise fail("partial must be true or false")
    return Sweep(str(document.get("created", "")), partial, config, machine, cells, lines,
                 path)


def load_sweep(path: str | os.PathLike) -> Sweep:
    """Read and check one sweep file."""
    path = Path(path)
    return sweep_from_document(read_document(path), path)


def _num(value: float | None, fmt: str) -> str:
    return MISSING if value is None else format(value, fmt)


#: A peak this close to plain's is the same peak (allocations round by the page).
SAME_MEMORY_BYTES = 4096


def cell_row(cell: dict) -> list[str]:
    """One cell as text in ``COLUMNS`` order: speedups that read over 1.00 marked ▲,
    noisy cells and outputs that differ from plain decoding named, a peak within a page
    of plain's shown as ``≈ 0``."""
    speedup = cell["speedup"]
    over = cell["memory_over_plain_bytes"]
    return [
        cell["prompt"], f"{cell['temperature']:g}", cell["label"],
        _num(cell["median_tokens_per_s"], ".1f"),
        _num(speedup, ".2f") + (" ▲" if speedup is not None and round(speedup, 2) > 1 else ""),
        _num(cell["cv"], ".3f") + (" noisy" if cell["noisy"] else ""),
        _num(cell["acceptance_rate"], ".0%"), _num(cell["mean_accepted"], ".2f"),
        _num(cell["predicted_speedup"], ".2f"),
        "≈ 0" if over is not None and abs(over) < SAME_MEMORY_BYTES else byte_size(
            over, signed=True),
        {True: "ok", False: "MISMATCH", None: MISSING}[cell["correct"]],
    ]


def why_lines(cells: list[dict]) -> list[str]:
    """Each speculative cell's why-line (the cost model's account of its speed), named by
    prompt and setting."""
    return [f"{cell['prompt']} {cell['label']}: {cell['why']}" for cell in cells
            if cell["strategy"] != "plain"]


#: What a sweep diff puts side by side for each cell.
DIFFED = ("median_tokens_per_s", "speedup", "acceptance_rate", "cv", "correct")


def diff_sweeps(a: Sweep, b: Sweep) -> list[dict]:
    """Two sweeps' cells lined up by prompt, temperature and setting.

    One row per cell of either sweep, in ``a``'s order then ``b``'s extras: each diffed
    value from both sides (None where the cell is missing) and ``speedup_ratio`` (b / a):
    the same grid measured on two machines, models or versions, compared cell by cell.
    """
    def key(cell: dict) -> tuple:
        return cell["prompt"], cell["temperature"], cell["label"]

    by_key_b = {key(c): c for c in b.cells}
    keys = [key(c) for c in a.cells] + [k for k in by_key_b if k not in {key(c) for c in a.cells}]
    by_key_a = {key(c): c for c in a.cells}
    rows = []
    for k in keys:
        ca, cb = by_key_a.get(k), by_key_b.get(k)
        row = {"prompt": k[0], "temperature": k[1], "label": k[2]}
        for side, cell in (("a", ca), ("b", cb)):
            row[side] = None if cell is None else {name: cell[name] for name in DIFFED}
        sa, sb = (ca or {}).get("speedup"), (cb or {}).get("speedup")
        row["speedup_ratio"] = sb / sa if sa and sb is not None else None
        rows.append(row)
    return rows
