"""specdeck's documents: one JSON file per comparison (a session) or sweep, built and
saved here with one schema version, and read back without mlx.

The same session document is what ``specdeck compare --headless --json`` writes, so
scripts, replay and diff read one format. Top level: ``schema_version``, ``kind``, ``created``,
``partial``, ``config``, ``machine`` and ``strategies``, which maps each strategy name to
its ``tokens``, ``text``, ``prefill``, ``rounds``, ``done`` and ``stats``. The JSON Schema
``session.schema.json`` next to this module describes it for other tools.

Loading checks every event (``session_check.py``): a file that loads is one that replay,
diff and statistics can use without crashing.
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from specdeck.engines.core.atomic_files import write_atomic
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.events import EVENT_TYPES, Event, LengthChoice, Trace
from specdeck.engines.core.files import MAX_FILE_BYTES, TooLarge, UnreadableFile, read_regular
from specdeck.engines.core.requests import SweepRequest
from specdeck.engines.core.stats import Stats, compute_stats, plain_step_seconds, priced, speedup
from specdeck.sessions.check import SessionError, check_trace

#: The version of both documents (a session and a sweep); ``MIGRATIONS`` upgrades older ones.
#: 2: what a draft-length policy chose and why is one record per round (``length``), where
#: 1 had eight ``auto_*`` fields and ``guesses``.
SCHEMA_VERSION = 2
#: The JSON Schema of the document (shipped as package data, for other tools and tests).
SCHEMA_PATH = Path(__file__).with_name("session.schema.json")

#: Schema 1's fields of a round under ``auto``, which schema 2 gathers in ``length``.
_AUTO_FIELDS = ("auto_k", "auto_tokens", "auto_cost", "auto_explored", "auto_hoped",
                "auto_held", "auto_ruled_out", "guesses")


def _auto_record(data: dict) -> dict | None:
    """A schema-1 round's ``auto_*`` fields and ``guesses`` as schema 2's ``length``
    record (None: a fixed k). Its hopeful rounds were explorations; what it held back
    from and why it ruled drafting out have no field any more. Fields of the wrong type
    are carried over as they are, for the check to name."""
    k = data.get("auto_k")
    if k is None:
        return None
    tokens = data.get("auto_tokens")
    why = ("explore" if data.get("auto_explored") or data.get("auto_hoped")
           else "best" if tokens is not None else "start" if k else "time")
    return {"policy": "auto", "k": k, "why": why, "tokens": tokens,
            "cost": data.get("auto_cost"), "guesses": data.get("guesses")}


def _gather_auto_fields(document: dict) -> dict:
    """Schema 1 to 2: each round's ``auto_*`` fields and ``guesses`` become ``length``."""
    strategies = document.get("strategies")
    for entry in strategies.values() if type(strategies) is dict else ():
        rounds = entry.get("rounds") if type(entry) is dict else None
        for data in rounds if type(rounds) is list else ():
            if type(data) is dict and any(key in data for key in _AUTO_FIELDS):
                record = _auto_record(data)
                for key in _AUTO_FIELDS:
                    data.pop(key, None)
                data["length"] = record
    return document


#: ``MIGRATIONS[v]`` turns a schema-``v`` document into a schema-``v + 1`` one, so a file
#: written by an older specdeck loads after a chain of upgrades.
MIGRATIONS: dict[int, Callable[[dict], dict]] = {1: _gather_auto_fields}


_FIELD_NAMES = {cls: tuple(f.name for f in fields(cls)) for cls in EVENT_TYPES.values()}
_CHOICE_FIELDS = tuple(f.name for f in fields(LengthChoice))


def _with_speedup(stats: Stats, baseline_tokens_per_s: float | None) -> dict:
    return {**stats.to_dict(),
            "speedup_vs_plain": speedup(stats.tokens_per_s, baseline_tokens_per_s)}


def strategy_stats(traces: dict[str, Trace]) -> dict[str, dict]:
    """Each strategy's statistics, with its speedup over ``plain`` when plain ran, and
    its costs and predictions in plain steps of that run."""
    stats = {name: compute_stats(trace.events) for name, trace in traces.items()}
    baseline = stats["plain"].tokens_per_s if "plain" in stats else None
    step = plain_step_seconds(baseline)
    return {name: _with_speedup(priced(s, step) if step else s, baseline)
            for name, s in stats.items()}


def event_to_dict(event: Event) -> dict:
    """An event as a JSON object. Shallow (lists are shared, not copied): ``asdict``'s deep
    copy made saving a 20,000-token session take seconds. A nested record
    (``Round.length``) becomes an object of its own."""
    data = {name: getattr(event, name) for name in _FIELD_NAMES[type(event)]}
    length = data.get("length")
    if length is not None:
        data["length"] = {name: getattr(length, name) for name in _CHOICE_FIELDS}
    return data


def trace_to_dict(trace: Trace, stats: dict, measured: list[float] | None = None) -> dict:
    """One strategy's result: its tokens, text, every event, its ``stats`` (as
    ``strategy_stats`` gives them) and, for a measured comparison, the decode tokens/s of
    each timed run (``measured_tokens_per_s``)."""
    prefill, done = trace.prefill, trace.done
    entry = {
        "tokens": trace.tokens,
        "text": trace.text,
        "prefill": event_to_dict(prefill) if prefill else None,
        "rounds": [event_to_dict(r) for r in trace.rounds],
        "done": event_to_dict(done) if done else None,
        "stats": stats,
    }
    if measured:
        entry["measured_tokens_per_s"] = measured
    return entry


def measured_speeds(document: dict) -> dict[str, list[float]]:
    """Each strategy's ``measured_tokens_per_s`` (absent in files of older versions);
    SessionError when one is not a list of positive numbers."""
    speeds = {}
    for name, entry in document["strategies"].items():
        values = entry.get("measured_tokens_per_s") if type(entry) is dict else None
        if values is None:
            continue
        if type(values) is not list or not all(
            type(v) in (int, float) and v > 0 for v in values
        ):
            raise SessionError(f"strategy {name!r}: measured_tokens_per_s must be a list "
                               "of positive numbers")
        speeds[name] = [float(v) for v in values]
    return speeds


def is_partial(requested: list[str], traces: dict[str, Trace]) -> bool:
    """A run is partial when a requested strategy did not run or did not finish
    (cancelled, failed, or cut off without its Done)."""
    if any(name not in traces for name in requested):
        return True
    return any(t.done is None or t.done.reason in ("cancelled", "error")
               for t in traces.values())


def request_config(request: Any) -> dict:
    """What a comparison (``engines.compare.CompareRequest``) asked for, as recorded in
    its document; all a run that died half-way can record (models as named)."""

    def model(source: str | None, revision: str | None = None) -> dict | None:
        return None if source is None else {"source": source, "path": source,
                                            "revision": revision}

    return {
        "prompt": request.prompt,
        "chat": request.chat,
        "strategies": request.strategies,
        "target": model(request.target, request.revision),
        "draft": model(request.draft),
        "mtp_model": model(request.mtp_model),
        "settings": request.settings.to_dict(),
        "warmup_tokens": request.warmup_tokens,
        "repeats": request.repeats,
        "dtype": request.dtype,
    }


def compare_config(result: Any) -> dict:
    """The configuration of a comparison (``engines.compare.CompareResult``) as recorded
    in its document: what ran, on which models (where they were loaded from), with which
    settings."""

    def model(entry):
        if entry is None:
            return None
        return {"source": entry.source, "path": str(entry.path), "revision": entry.revision}

    return {
        **request_config(result.request),
        "prompt_tokens": result.prompt_tokens,
        "target": model(result.models.target),
        "draft": model(result.models.draft),
        "mtp_model": model(result.models.mtp.model if result.models.mtp else None),
        "memory_estimates": {
            name: estimate.to_dict() for name, estimate in (result.memory_estimates or {}).items()
        },
        # The group the target was split over (size, backend, split, hosts, pass costs).
        "group": result.group,
    }


def result_document(result: Any, machine: dict | None = None) -> dict:
    """A measured (or cancelled: partial) comparison (``engines.compare.CompareResult``)
    as a session document, with the machine it ran on (described now when not given)."""
    if machine is None:
        from specdeck.engines.measure.machine import describe_machine

        machine = describe_machine()
    return build_document(compare_config(result), machine, result.traces, result.measured)


def build_document(config: dict, machine: dict, traces: dict[str, Trace],
                   measured: dict[str, list[float]] | None = None) -> dict:
    """A whole comparison as a session document (``measured``: the tokens/s of every
    timed run of each strategy)."""
    measured = measured or {}
    stats = strategy_stats(traces)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "compare",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "partial": is_partial(config.get("strategies", list(traces)), traces),
        "config": config,
        "machine": machine,
        "strategies": {
            name: trace_to_dict(trace, stats[name], measured.get(name))
            for name, trace in traces.items()
        },
    }


def sweep_document(request: SweepRequest, cells: list[Any], recommendations: list[str],
                   complete: bool, machine: dict) -> dict:
    """The sweep as a session-like JSON document (``cells``: ``engines.sweep.Cell``s)."""
    config = asdict(request)
    config["prompts"] = [asdict(p) for p in request.prompts]
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "sweep",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "partial": not complete,
        "config": config,
        "machine": machine,
        "cells": [asdict(c) for c in cells],
        "recommendations": recommendations,
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
    #: Decode tokens/s of every timed run, for strategies timed more than once.
    measured: dict[str, list[float]] = field(default_factory=dict)

    @property
    def strategies(self) -> list[str]:
        return list(self.traces)

    def stats(self) -> dict[str, dict]:
        """Statistics recomputed from the events (as ``strategy_stats``)."""
        return strategy_stats(self.traces)

    @property
    def settings(self) -> DecodeSettings | None:
        """The run's decode settings, which label replayed panes (k=..., n=...); None
        when the file does not record them in their form."""
        return DecodeSettings.from_dict(self.config.get("settings"))

    @property
    def prompt(self) -> str | None:
        """The prompt the run answered, when the file records it as text."""
        prompt = self.config.get("prompt")
        return prompt if isinstance(prompt, str) else None

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
        measured = measured_speeds(document)
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
        measured=measured,
    )


#: JSON has no NaN or infinity; another writer may put them in a file all the same.
_NOT_JSON_NUMBERS = (b"NaN", b"Infinity", b"-Infinity", b"nan", b"inf", b"-inf")


def parse_document(data: bytes, source: str = "session") -> Any:
    """Bytes to a JSON value, telling a truncated file from one that is not JSON, and
    naming a NaN or an infinity (which JSON does not allow) where one stands."""
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
        word = next((w for w in _NOT_JSON_NUMBERS if data.startswith(w, exc.pos)), None)
        if word is not None:
            raise SessionError(
                f"{source}: {word.decode()} at line {exc.lineno} column {exc.colno} is not "
                "a number JSON allows (NaN and infinities have no JSON form)"
            ) from None
        raise SessionError(f"{source}: not JSON ({exc})") from None


def read_document(path: str | os.PathLike, limit: int | None = MAX_FILE_BYTES) -> Any:
    """Read and parse a specdeck file (a session or a sweep) of at most ``limit`` bytes
    (None: any size); SessionError names the file and what is wrong with it."""
    path = Path(path)
    try:
        data = read_regular(path, limit)
    except FileNotFoundError:
        raise SessionError(f"{path}: no such file") from None
    except TooLarge as exc:
        raise SessionError(f"{path}: {exc} (--max-file-size SIZE reads it)") from None
    except UnreadableFile as exc:
        raise SessionError(f"{path}: {exc}") from None
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
    hold no cycles: running, it made parsing a 20,000-token session several times slower
    (``bench/sessions.py`` prints by how much)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def save_document(path: Path, document: dict) -> None:
    """Save compact JSON: indenting made a 20,000-token session 2.6x larger and slower
    (``jq .`` pretty-prints one when a person wants to read it)."""
    write_atomic(path, orjson.dumps(document))
