"""Checking a session's events as they load: fast, and strict enough that what loads can
be replayed, diffed and summarised without crashing.

Types come from the event dataclasses themselves (``engines/core/events.py``), checked a field
at a time across all events with C-level passes, so a 20,000-token session with the
target's alternatives at every position checks in a few hundred milliseconds; the slow
row-by-row pass runs only to name the first problem. A JSON Schema validator
(``session.schema.json`` is the published description) would take seconds and is not a
dependency; the tests validate saved sessions against the schema.
"""

from __future__ import annotations

import types
from dataclasses import MISSING, fields, is_dataclass
from functools import partial
from itertools import chain, compress, count, repeat
from operator import add, and_, attrgetter, eq, is_not, itemgetter, le, not_, sub
from typing import (
    Any, Callable, Iterable, Literal, Sequence, Union, get_args, get_origin, get_type_hints,
)

from specdeck.engines.core.events import EVENT_TYPES, Done, Event, Prefill, Round, Trace


class SessionError(Exception):
    """A file that cannot be used as a session; the message names the file and why."""


def _describe(hint: Any) -> str:
    if hint is type(None):
        return "null"
    if get_origin(hint) is Literal:
        return " or ".join(repr(a) for a in get_args(hint))
    if get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(hint))
    return getattr(hint, "__name__", None) if get_origin(hint) is None else str(hint)


_SCALARS: dict[Any, frozenset[type]] = {
    int: frozenset({int}),
    float: frozenset({int, float}),
    str: frozenset({str}),
    bool: frozenset({bool}),
    type(None): frozenset({type(None)}),
}
_LIST = frozenset({list})
_DICT = frozenset({dict})
_not_none = partial(is_not, None)


def _column_checker(hint: Any) -> Callable[[Sequence], bool]:
    """A predicate for a *column*: the values of one field across many events.

    Every test is a C-level pass (``issuperset(map(type, ...))``, ``chain``), so checking
    the million values of a 20,000-token session costs little; a single value is checked
    as a column of one. ``bool`` is not a number here, as in JSON.
    """
    origin, args = get_origin(hint), get_args(hint)
    if hint in _SCALARS:
        allowed = _SCALARS[hint]
        return lambda col: allowed.issuperset(map(type, col))
    if origin is Literal:
        values = frozenset(args)
        return lambda col: _SCALARS[str].issuperset(map(type, col)) and values.issuperset(col)
    if origin in (Union, types.UnionType) and type(None) in args and len(args) == 2:
        inner = _column_checker(next(a for a in args if a is not type(None)))
        return lambda col: inner(list(filter(_not_none, col)))
    if origin is list:
        item = _column_checker(args[0])
        return lambda col: _LIST.issuperset(map(type, col)) and item(
            list(chain.from_iterable(col))
        )
    if is_dataclass(hint):
        return partial(_records_check, hint)
    raise TypeError(f"no session check for the type {hint!r}")


def _records_check(cls: type, col: Sequence) -> bool:
    """A column of nested records (``Round.length``): objects with ``cls``'s fields
    alone, its required ones present, each field's values well typed."""
    if not _DICT.issuperset(map(type, col)):
        return False
    checks, required = _FIELD_CHECKS[cls], _REQUIRED[cls]
    if not all(row.keys() <= checks.keys() and required <= row.keys() for row in col):
        return False
    return all(check([row[name] for row in col if name in row])
               for name, check in checks.items())


def _field_types(cls: type) -> dict[str, Any]:
    hints = get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


#: Records nested in an event (``Round.length``): the dataclass each field holds.
_NESTED: dict[type, dict[str, type]] = {
    cls: {name: arg for name, hint in _field_types(cls).items() for arg in get_args(hint)
          if is_dataclass(arg)}
    for cls in EVENT_TYPES.values()
}
_RECORDS = {record for nested in _NESTED.values() for record in nested.values()}
_REQUIRED: dict[type, frozenset[str]] = {
    cls: frozenset(f.name for f in fields(cls) if f.default is MISSING) for cls in _RECORDS
}
#: For each event type and nested record: field name -> column predicate.
_FIELD_CHECKS: dict[type, dict[str, Callable[[Sequence], bool]]] = {}
for _cls in (*_RECORDS, *EVENT_TYPES.values()):
    _FIELD_CHECKS[_cls] = {name: _column_checker(hint)
                           for name, hint in _field_types(_cls).items()}
_TYPE_NAMES = {cls: name for name, cls in EVENT_TYPES.items()}
#: For each event type: the default of each field that has one (``type`` must be there).
_DEFAULTS: dict[type, dict[str, Any]] = {
    cls: {f.name: f.default for f in fields(cls)
          if f.default is not MISSING and f.name != "type"}
    for cls in EVENT_TYPES.values()
}
#: Times and durations: never negative, which keeps statistics free of divisions by zero.
_DURATIONS = ("t", "seconds", "draft_seconds", "verify_seconds")


def _columns(items: list, cls: type) -> list[tuple] | None:
    """The fast path: each field's values across ``items`` in field order, or None unless
    every item is a complete, well-typed ``cls`` event (a field that no item holds, from
    a file written before it existed, takes its default)."""
    checks = _FIELD_CHECKS[cls]
    if not _DICT.issuperset(map(type, items)):
        return None
    present = set(chain.from_iterable(items))
    if not present.issubset(checks) or any(
        name not in present and name not in _DEFAULTS[cls] for name in checks
    ):
        return None  # an unknown field, or a required one missing: the row pass names it
    names = [name for name in checks if name in present]
    try:
        # Row by row, then transposed: one visit per dict, twice as fast as a pass per field.
        found = list(zip(*map(itemgetter(*names), items)))
    except KeyError:  # a field left out of some rows (the row pass tells a default from a gap)
        return None
    # A field no row holds (written before it existed) takes its default in every row.
    by_name = dict(zip(names, found or [()] * len(names)))
    columns = [by_name.get(name) or (_DEFAULTS[cls][name],) * len(items) for name in checks]
    for (name, check), column in zip(checks.items(), columns):
        if not check(column) or (name in _DURATIONS and column and min(column) < 0):
            return None
    return columns  # ``type`` is a one-value Literal: no event of another kind got in


def _row_problem(data: Any, cls: type) -> str | None:
    """What is wrong with one event (the slow path, to name the first problem)."""
    if type(data) is not dict:
        return "is not an object"
    if data.get("type") != _TYPE_NAMES[cls]:
        return f"must be a {_TYPE_NAMES[cls]} event"
    types_ = _field_types(cls)
    for key, value in data.items():
        if key not in types_:
            return f"has an unknown field {key!r}"
        record = _NESTED[cls].get(key)
        if record is not None and type(value) is dict:
            problem = _record_problem(value, record)
            if problem:
                return f"{key}: {problem}"
        if not _FIELD_CHECKS[cls][key]([value]):
            return f"{key} must be {_describe(types_[key])}"
        if key in _DURATIONS and value < 0:
            return f"{key} must be >= 0 (got {value})"
    missing = sorted(f.name for f in fields(cls) if f.name not in data
                     and f.default is MISSING and f.default_factory is MISSING)
    return f"lacks {', '.join(missing)}" if missing else None


def _record_problem(data: dict, cls: type) -> str | None:
    """What is wrong with one nested record, if anything."""
    types_ = _field_types(cls)
    for key, value in data.items():
        if key not in types_:
            return f"has an unknown field {key!r}"
        if not _FIELD_CHECKS[cls][key]([value]):
            return f"{key} must be {_describe(types_[key])}"
    missing = sorted(_REQUIRED[cls] - data.keys())
    return f"lacks {', '.join(missing)}" if missing else None


def _events(items: list, cls: type, where: Callable[[int], str]) -> list[Event]:
    """Check a list of events of one type and build them; ``where(i)`` names item i."""
    columns = _columns(items, cls)
    if columns is None:
        for i, data in enumerate(items):
            problem = _row_problem(data, cls)
            if problem:
                raise SessionError(f"{where(i)}: {problem}")
        events = [cls(**data) for data in items]
    else:
        events = list(map(cls, *columns))
    for name, record in _NESTED[cls].items():
        for event in events:
            value = getattr(event, name)
            if value is not None:
                setattr(event, name, record(**value))
    if cls is Round:
        _check_rounds(events, where)
    return events


def _check_rounds(rounds: list[Round], where: Callable[[int], str]) -> None:
    """The promises of the Round docstring that panes and statistics rely on, checked a
    rule at a time over all rounds (mostly C-level passes); the first broken one is named."""
    column = lambda name: list(map(attrgetter(name), rounds))  # noqa: E731
    accepted, drafted, tokens = column("accepted"), column("drafted"), column("tokens")
    k, n = list(map(len, drafted)), list(map(len, tokens))
    rules: list[tuple[Iterable[bool], Callable[[Round], str]]] = [
        (map(and_, map(le, repeat(0), accepted), map(le, accepted, k)),
         lambda r: f"accepted ({r.accepted}) is outside 0..{len(r.drafted)}"),
        (map(eq, map(len, column("pieces")), n),
         lambda r: f"{len(r.pieces)} pieces for {len(r.tokens)} tokens"),
        (map(eq, map(len, column("rejected_pieces")), map(sub, k, accepted)),
         lambda r: "rejected_pieces must hold one piece per rejected draft"),
        (map(le, n, map(add, accepted, repeat(1))),
         lambda r: "tokens are not the accepted drafts plus one"),
        ((t[:m] == d[:m] for t, d, m in zip(tokens, drafted, map(min, n, accepted))),
         lambda r: "tokens are not the accepted drafts plus one"),
    ]
    rules.append((
        (m is None or 0 <= m <= size for m, size in zip(column("exact_match_accepted"), k)),
        lambda r: f"exact_match_accepted ({r.exact_match_accepted}) is outside "
                  f"0..{len(r.drafted)}",
    ))
    for name in ("draft_probs", "target_probs", "uniforms"):
        rules.append((
            (v is None or len(v) == size for v, size in zip(column(name), k)),
            lambda r, name=name: f"{name} must hold one value per draft",
        ))
    for passed, message in rules:
        bad = next(compress(count(), map(not_, passed)), None)
        if bad is not None:
            raise SessionError(f"{where(bad)}: {message(rounds[bad])}")


def check_trace(name: str, entry: Any, where: str) -> Trace:
    """One strategy's entry of a document as a Trace, or SessionError naming the problem."""
    if type(entry) is not dict:
        raise SessionError(f"{where} is not an object")
    rounds = entry.get("rounds")
    if type(rounds) is not list:
        raise SessionError(f"{where}: rounds must be a list")
    events: list[Event] = []
    if entry.get("prefill") is not None:
        events += _events([entry["prefill"]], Prefill, lambda i: f"{where}, prefill")
    events += _events(rounds, Round, lambda i: f"{where}, round {i}")
    if entry.get("done") is not None:
        events += _events([entry["done"]], Done, lambda i: f"{where}, done")
    trace = Trace(name, events)
    if entry.get("tokens") != trace.tokens or entry.get("text") != trace.text:
        raise SessionError(f"{where}: tokens/text do not match its rounds (edited by hand?)")
    return trace
