"""The session document: one JSON file per run, readable without mlx.

The same document is what ``specdeck compare --headless --json`` writes, so scripts,
replay and diff read one format. Top level: ``schema_version``, ``kind``, ``created``,
``config``, ``machine`` and ``strategies``, which maps each strategy name to its
``tokens``, ``text``, ``prefill``, ``rounds``, ``done`` and ``stats``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import orjson

from engines.events import Trace, event_from_dict
from engines.stats import compute_stats

SCHEMA_VERSION = 1


def trace_to_dict(trace: Trace, baseline_tokens_per_s: float | None = None) -> dict:
    """One strategy's result: its tokens, text, every event, and statistics."""
    stats = compute_stats(trace.events)
    speedup = None
    if baseline_tokens_per_s and stats.tokens_per_s:
        speedup = stats.tokens_per_s / baseline_tokens_per_s
    return {
        "tokens": trace.tokens,
        "text": trace.text,
        "prefill": asdict(trace.prefill) if trace.prefill else None,
        "rounds": [asdict(r) for r in trace.rounds],
        "done": asdict(trace.done) if trace.done else None,
        "stats": {**stats.to_dict(), "speedup_vs_plain": speedup},
    }


def build_document(config: dict, machine: dict, traces: dict[str, Trace]) -> dict:
    """A whole comparison as a session document."""
    baseline = None
    if "plain" in traces:
        baseline = compute_stats(traces["plain"].events).tokens_per_s
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "compare",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": config,
        "machine": machine,
        "strategies": {
            name: trace_to_dict(trace, baseline) for name, trace in traces.items()
        },
    }


def document_traces(document: dict) -> dict[str, Trace]:
    """Rebuild each strategy's event list from a document."""
    traces = {}
    for name, result in document["strategies"].items():
        events = []
        if result.get("prefill"):
            events.append(event_from_dict(result["prefill"]))
        events.extend(event_from_dict(r) for r in result["rounds"])
        if result.get("done"):
            events.append(event_from_dict(result["done"]))
        traces[name] = Trace(name, events)
    return traces


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old file or the new.

    The bytes go to a temporary file in the same directory, are flushed to disk, and the
    temporary file is renamed over ``path`` (atomic on POSIX and on Windows).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def save_document(path: Path, document: dict) -> None:
    write_atomic(path, orjson.dumps(document, option=orjson.OPT_INDENT_2))
