"""The session document: one JSON file per run, readable without mlx.

The same document is what ``specdeck compare --headless --json`` writes, so scripts,
replay and diff read one format. Top level: ``schema_version``, ``kind``, ``created``,
``partial``, ``config``, ``machine`` and ``strategies``, which maps each strategy name to
its ``tokens``, ``text``, ``prefill``, ``rounds``, ``done`` and ``stats``. The JSON Schema
``session.schema.json`` next to this module describes it for other tools.

Loading checks every event (``session_check.py``): a file that loads is one that replay,
diff and statistics can use without crashing.
"""

from __future__ import annotations

import gc
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from specdeck.engines.events import EVENT_TYPES, Event, Trace
from specdeck.engines.stats import Stats, compute_stats
from specdeck.session_check import SessionError, check_trace

SCHEMA_VERSION = 1
#: The JSON Schema of the document (shipped as package data, for other tools and tests).
SCHEMA_PATH = Path(__file__).with_name("session.schema.json")

#: ``MIGRATIONS[v]`` turns a schema-``v`` document into a schema-``v + 1`` one, so a file
#: written by an older specdeck loads after a chain of upgrades. Empty until the schema
#: changes.
MIGRATIONS: dict[int, Callable[[dict], dict]] = {}


_FIELD_NAMES = {cls: tuple(f.name for f in fields(cls)) for cls in EVENT_TYPES.values()}


def _with_speedup(stats: Stats, baseline_tokens_per_s: float | None) -> dict:
    speedup = None
    if baseline_tokens_per_s and stats.tokens_per_s:
        speedup = stats.tokens_per_s / baseline_tokens_per_s
    return {**stats.to_dict(), "speedup_vs_plain": speedup}


def strategy_stats(traces: dict[str, Trace]) -> dict[str, dict]:
    """Each strategy's statistics, with its speedup over ``plain`` when plain ran."""
    stats = {name: compute_stats(trace.events) for name, trace in traces.items()}
    baseline = stats["plain"].tokens_per_s if "plain" in stats else None
    return {name: _with_speedup(s, baseline) for name, s in stats.items()}


def event_to_dict(event: Event) -> dict:
    """An event as a JSON object. Shallow (lists are shared, not copied): ``asdict``'s deep
    copy made saving a 20,000-token session take seconds."""
    return {name: getattr(event, name) for name in _FIELD_NAMES[type(event)]}


def trace_to_dict(trace: Trace, baseline_tokens_per_s: float | None = None) -> dict:
    """One strategy's result: its tokens, text, every event, and statistics."""
    prefill, done = trace.prefill, trace.done
    return {
        "tokens": trace.tokens,
        "text": trace.text,
        "prefill": event_to_dict(prefill) if prefill else None,
        "rounds": [event_to_dict(r) for r in trace.rounds],
        "done": event_to_dict(done) if done else None,
        "stats": _with_speedup(compute_stats(trace.events), baseline_tokens_per_s),
    }


def is_partial(requested: list[str], traces: dict[str, Trace]) -> bool:
    """A run is partial when a requested strategy did not run or did not finish."""
    if any(name not in traces for name in requested):
        return True
    return any(t.done is None or t.done.reason == "cancelled" for t in traces.values())


def compare_config(result: Any) -> dict:
    """The configuration of a comparison (``engines.compare.CompareResult``) as recorded
    in its document: what ran, on which models, with which settings."""
    request = result.request

    def model(entry):
        if entry is None:
            return None
        return {"source": entry.source, "path": str(entry.path), "revision": entry.revision}

    return {
        "prompt": request.prompt,
        "prompt_tokens": result.prompt_tokens,
        "chat": request.chat,
        "strategies": request.strategies,
        "target": model(result.models.target),
        "draft": model(result.models.draft),
        "mtp_model": model(result.models.mtp.model if result.models.mtp else None),
        "settings": request.settings.to_dict(),
        "warmup_tokens": request.warmup_tokens,
        "dtype": request.dtype,
        "memory_estimates": {
            name: estimate.to_dict() for name, estimate in (result.memory_estimates or {}).items()
        },
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
        "partial": is_partial(config.get("strategies", list(traces)), traces),
        "config": config,
        "machine": machine,
        "strategies": {
            name: trace_to_dict(trace, baseline) for name, trace in traces.items()
        },
    }


@dataclass
class Session:
    """A loaded session: what ran, where, and every strategy's events."""

    schema_version: int
    kind: str
    created: str
    #: True when the run was cancelled or a strategy did not finish.
    partial: bool
    config: dict
    machine: dict
    traces: dict[str, Trace]
    #: The file it was loaded from (None for a document built in memory).
    path: Path | None = None

    @property
    def strategies(self) -> list[str]:
        return list(self.traces)

    def stats(self) -> dict[str, dict]:
        """Statistics recomputed from the events (as ``strategy_stats``)."""
        return strategy_stats(self.traces)

    @property
    def settings(self) -> dict | None:
        """The run's decode settings, which label replayed panes (k=..., n=...)."""
        value = self.config.get("settings")
        return value if isinstance(value, dict) else None

    @property
    def replay_title(self) -> str:
        return f"replay: {self.path.name if self.path else 'session'}"

    @property
    def memory_estimates(self) -> dict[str, int]:
        """Each strategy's estimated peak bytes (``config.memory_estimates.<name>.total``),
        for the strategies whose estimate was recorded."""
        recorded = self.config.get("memory_estimates")
        if not isinstance(recorded, dict):
            return {}
        return {
            name: entry["total"] for name, entry in recorded.items()
            if isinstance(entry, dict) and type(entry.get("total")) is int
        }


def migrate(document: Any) -> dict:
    """Upgrade an older document to ``SCHEMA_VERSION``, or refuse one we cannot read."""
    if type(document) is dict and document.get("kind") == "sweep":
        raise SessionError("a sweep, not a session: open it with specdeck replay FILE")
    if type(document) is not dict or "strategies" not in document or (
        "schema_version" not in document
    ):
        raise SessionError("not a specdeck session (no schema_version/strategies)")
    version = document["schema_version"]
    if type(version) is not int:
        raise SessionError("schema_version must be a whole number")
    if version > SCHEMA_VERSION:
        raise SessionError(
            f"written by a newer specdeck (schema {version}); this one reads up to "
            f"{SCHEMA_VERSION}: upgrade specdeck"
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise SessionError(
                f"schema {version} is older than this specdeck can read "
                f"(no migration from it to {SCHEMA_VERSION})"
            )
        document = step(document)
        version += 1
        document["schema_version"] = version
    return document


def session_from_document(document: Any, path: Path | None = None) -> Session:
    """Check (and migrate) a parsed document; raise SessionError naming what is wrong."""
    source = str(path) if path is not None else "session"
    try:
        document = migrate(document)
        for key, kind in (("config", dict), ("machine", dict), ("strategies", dict),
                          ("kind", str), ("created", str)):
            if type(document.get(key)) is not kind:
                raise SessionError(f"{key} must be {'an object' if kind is dict else 'a string'}")
        partial = document.get("partial", False)
        if type(partial) is not bool:
            raise SessionError("partial must be true or false")
        with _collector_paused():
            traces = {
                name: check_trace(name, entry, f"strategy {name!r}")
                for name, entry in document["strategies"].items()
            }
    except SessionError as exc:
        raise SessionError(f"{source}: {exc}") from None
    return Session(
        schema_version=document["schema_version"],
        kind=document["kind"],
        created=document["created"],
        partial=partial,
        config=document["config"],
        machine=document["machine"],
        traces=traces,
        path=path,
    )


def document_traces(document: dict) -> dict[str, Trace]:
    """Each strategy's events, rebuilt (and checked) from a document."""
    return session_from_document(document).traces


def parse_document(data: bytes, source: str = "session") -> Any:
    """Bytes to a JSON value, telling a truncated file from one that is not JSON."""
    if not data.strip():
        raise SessionError(f"{source}: the file is empty")
    try:
        with _collector_paused():
            return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "unexpected end" in str(exc).lower() or "eof" in str(exc).lower():
            raise SessionError(
                f"{source}: the JSON is truncated (the file ends early; was it copied "
                "or written only in part?)"
            ) from None
        raise SessionError(f"{source}: not JSON ({exc})") from None


def read_document(path: str | os.PathLike) -> Any:
    """Read and parse a specdeck file (a session or a sweep); SessionError names the file
    and what is wrong with it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SessionError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SessionError(f"{path}: is a directory, not a session file") from None
    except OSError as exc:
        raise SessionError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return parse_document(data, str(path))


def load_session(path: str | os.PathLike) -> Session:
    """Read and check one session file."""
    path = Path(path)
    return session_from_document(read_document(path), path)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of small objects that
    hold no cycles: running, it made parsing a 20,000-token session 3-4x slower
    (``bench/sessions.py``)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old file or the new.

    The bytes go to a temporary file in the same directory, are flushed to disk, and the
    temporary file is renamed over ``path`` (atomic on POSIX and on Windows).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file private (0600); a saved session is an ordinary file.
        os.chmod(tmp, 0o666 & ~_umask())
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
    """Save compact JSON: indenting made a 20,000-token session 2.6x larger and slower
    (``jq .`` pretty-prints one when a person wants to read it)."""
    write_atomic(path, orjson.dumps(document))
