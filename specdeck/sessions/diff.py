"""Line up two runs: where the outputs first diverge, a token-level diff, the settings
that differ and the statistics side by side.

Works on two sessions or on two panes of one. Greedy speculation is lossless, so a
greedy draft pane diffed against plain must come out identical: the diff is also the
lossless check. Pure data: the CLI prints a DiffReport, the app renders it.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import asdict, dataclass, field
from difflib import SequenceMatcher
from typing import Any, Literal

from specdeck.engines.core.conventions import in_convention
from specdeck.engines.core.events import Trace
from specdeck.engines.core.formatting import plural
from specdeck.sessions.session import Session
from specdeck.sessions.sweep_file import Sweep


#: Characters of an edit's text quoted in a line (``--json`` has it all).
QUOTED_CHARS = 60


def quoted(text: str) -> str:
    """``text`` quoted as Python writes it (escapes shown), cut at ``QUOTED_CHARS``: one
    token may be megabytes long."""
    return repr(text[:QUOTED_CHARS]) + ("…" if len(text) > QUOTED_CHARS else "")


class DiffError(ValueError):
    """The two sides cannot be paired (a strategy is missing); the message says which."""


@dataclass
class TokenEdit:
    """``a`` tokens ``[a_start, a_end)`` became ``b`` tokens ``[b_start, b_end)``."""

    op: Literal["replace", "delete", "insert"]
    a_start: int
    a_end: int
    b_start: int
    b_end: int
    a_tokens: list[int]
    b_tokens: list[int]
    a_text: str
    b_text: str


@dataclass
class Change:
    """A configuration or machine value that differs; ``None`` where one side lacks it."""

    path: str
    a: Any
    b: Any


@dataclass
class StatRow:
    """One statistic of both panes; ``ratio`` is b / a where both are numbers."""

    name: str
    a: Any
    b: Any
    ratio: float | None


@dataclass
class PaneDiff:
    """Strategy ``a_strategy`` of one side against ``b_strategy`` of the other."""

    a_strategy: str
    b_strategy: str
    a_length: int
    b_length: int
    #: Index of the first token that differs (or where the shorter output ends);
    #: None when the two token lists are equal.
    first_divergence: int | None
    edits: list[TokenEdit]
    stats: list[StatRow]

    @property
    def identical(self) -> bool:
        return self.first_divergence is None

    @property
    def label(self) -> str:
        if self.a_strategy == self.b_strategy:
            return self.a_strategy
        return f"{self.a_strategy} vs {self.b_strategy}"

    def summary(self) -> str:
        """One line: identical, or where and how the outputs part."""
        if self.identical:
            return f"{self.label}: identical ({plural(self.a_length, 'token')})"
        i = self.first_divergence
        if i == min(self.a_length, self.b_length):
            shorter = "a" if self.a_length < self.b_length else "b"
            return (
                f"{self.label}: same first {plural(i, 'token')}, then {shorter} ends "
                f"({self.a_length} vs {self.b_length} tokens)"
            )
        first = self.edits[0]
        return (
            f"{self.label}: first divergence at token {i} "
            f"({quoted(first.a_text)} vs {quoted(first.b_text)}); "
            f"{plural(len(self.edits), 'edit')}, "
            f"{self.a_length} vs {self.b_length} tokens"
        )


@dataclass
class DiffReport:
    """Everything ``specdeck diff`` shows; ``to_dict`` is its ``--json`` form."""

    a_label: str
    b_label: str
    changes: list[Change] = field(default_factory=list)
    panes: list[PaneDiff] = field(default_factory=list)
    #: How the speculation statistics are named and computed (``engines.conventions``).
    conventions: str = "specdeck"

    @property
    def identical(self) -> bool:
        return all(p.identical for p in self.panes)

    def to_dict(self) -> dict:
        data = asdict(self)
        for pane, out in zip(self.panes, data["panes"]):
            out["identical"] = pane.identical
            out["summary"] = pane.summary()
        data["identical"] = self.identical
        return data


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token, the shorter length if one is a prefix of the
    other, or None when equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _token_pieces(trace: Trace) -> list[str]:
    return [p for r in trace.rounds for p in r.pieces]


#: Stretches up to this many cells (tokens of a x tokens of b) go to difflib whole: exact,
#: and quick (its matcher is quadratic on repeated tokens: 34 s for 20,000 x 20,000).
EXACT_CELLS = 1_000_000
#: Anchors are runs of this many tokens found once on each side (single tokens repeat
#: too often in real text to anchor anything).
ANCHOR_TOKENS = 8
#: Levels of stretches within stretches before a large one is called one replacement.
MAX_DEPTH = 32

Opcode = tuple[str, int, int, int, int]


def token_opcodes(a: list[int], b: list[int]) -> list[Opcode]:
    """``SequenceMatcher(None, a, b, autojunk=False).get_opcodes()``, near-linear.

    Inputs up to ``EXACT_CELLS`` get difflib's own result. Longer ones are cut, as
    patience diff does, at anchors: runs of ``ANCHOR_TOKENS`` tokens that occur once on
    each side, in the same order on both (their longest increasing chain); the stretches
    between anchors are diffed the same way. A stretch still too large and without an
    anchor (two outputs that never meet again) is one replacement: the cost stays bounded.
    """
    if len(a) * len(b) <= EXACT_CELLS:
        return SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    ops: list[Opcode] = []
    _stretch(a, b, 0, len(a), 0, len(b), ops, 0)
    return _merged(ops)


def _stretch(a: list[int], b: list[int], i1: int, i2: int, j1: int, j2: int,
             ops: list[Opcode], depth: int) -> None:
    """Append the opcodes of ``a[i1:i2]`` against ``b[j1:j2]`` to ``ops``."""
    if i1 == i2 and j1 == j2:
        return
    head = 0
    while i1 + head < i2 and j1 + head < j2 and a[i1 + head] == b[j1 + head]:
        head += 1
    if head:
        ops.append(("equal", i1, i1 + head, j1, j1 + head))
        i1, j1 = i1 + head, j1 + head
    tail = 0
    while i1 < i2 - tail and j1 < j2 - tail and a[i2 - tail - 1] == b[j2 - tail - 1]:
        tail += 1
    i2, j2 = i2 - tail, j2 - tail
    if (i2 - i1) * (j2 - j1) <= EXACT_CELLS:
        matcher = SequenceMatcher(None, a[i1:i2], b[j1:j2], autojunk=False)
        ops += [(op, x1 + i1, x2 + i1, y1 + j1, y2 + j1)
                for op, x1, x2, y1, y2 in matcher.get_opcodes()]
    else:
        anchors = _anchors(a, b, i1, i2, j1, j2) if depth < MAX_DEPTH else []
        if not anchors:
            ops.append(("replace", i1, i2, j1, j2))
        at_a, at_b = i1, j1
        for i, j in anchors:
            _stretch(a, b, at_a, i, at_b, j, ops, depth + 1)
            ops.append(("equal", i, i + 1, j, j + 1))
            at_a, at_b = i + 1, j + 1
        if anchors:
            _stretch(a, b, at_a, i2, at_b, j2, ops, depth + 1)
    if tail:
        ops.append(("equal", i2, i2 + tail, j2, j2 + tail))


def _anchors(a: list[int], b: list[int], i1: int, i2: int, j1: int,
             j2: int) -> list[tuple[int, int]]:
    """(i, j) where the run of ``ANCHOR_TOKENS`` tokens at ``a[i]`` and at ``b[j]`` is the
    same and occurs nowhere else in either stretch: the longest chain of them increasing
    on both sides (patience sorting, O(n log n))."""
    k = ANCHOR_TOKENS

    def once(seq: list[int], start: int, stop: int) -> dict[tuple, int]:
        seen: dict[tuple, int] = {}
        for i in range(start, stop - k + 1):
            gram = tuple(seq[i : i + k])
            seen[gram] = -1 if gram in seen else i
        return seen

    in_a, in_b = once(a, i1, i2), once(b, j1, j2)
    pairs = sorted((i, in_b[g]) for g, i in in_a.items() if i >= 0 and in_b.get(g, -1) >= 0)
    tops: list[int] = []  # tops[n]: the smallest j ending a chain of length n + 1
    ends: list[int] = []  # the index in pairs of that chain's last pair
    before = [-1] * len(pairs)
    for n, (_, j) in enumerate(pairs):
        at = bisect_left(tops, j)
        before[n] = ends[at - 1] if at else -1
        if at == len(tops):
            tops.append(j)
            ends.append(n)
        else:
            tops[at], ends[at] = j, n
    chain, n = [], ends[-1] if ends else -1
    while n >= 0:
        chain.append(pairs[n])
        n = before[n]
    return chain[::-1]


def _merged(ops: list[Opcode]) -> list[Opcode]:
    """Neighbouring opcodes of one kind (equal, or any edit) joined, as difflib gives them."""
    out: list[Opcode] = []
    for op in ops:
        if op[1] == op[2] and op[3] == op[4]:
            continue
        if out and (out[-1][0] == "equal") == (op[0] == "equal"):
            _, i1, _, j1, _ = out[-1]
            i2, j2 = op[2], op[4]
            kind = "equal" if op[0] == "equal" else (
                "replace" if i2 > i1 and j2 > j1 else "delete" if i2 > i1 else "insert")
            out[-1] = (kind, i1, i2, j1, j2)
        else:
            out.append(op)
    return out


def token_edits(a: Trace, b: Trace, start: int = 0) -> list[TokenEdit]:
    """The replacements, deletions and insertions that turn ``a``'s tokens into ``b``'s,
    looked for from token ``start`` on (everything before it is known to be equal)."""
    a_tokens, b_tokens = a.tokens, b.tokens
    a_pieces, b_pieces = _token_pieces(a), _token_pieces(b)
    edits = []
    for op, i1, i2, j1, j2 in token_opcodes(a_tokens[start:], b_tokens[start:]):
        if op == "equal":
            continue
        i1, i2, j1, j2 = i1 + start, i2 + start, j1 + start, j2 + start
        edits.append(TokenEdit(
            op, i1, i2, j1, j2, a_tokens[i1:i2], b_tokens[j1:j2],
            "".join(a_pieces[i1:i2]), "".join(b_pieces[j1:j2]),
        ))
    return edits


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value
    return out


#: Configuration worked out from the settings, not set by a person: a changed model or
#: prompt changes a dozen of these, which would bury what was changed.
DERIVED = {"config.memory_estimates": "memory estimates", "config.prompt_tokens":
           "prompt tokens"}


def shown_changes(changes: list[Change]) -> tuple[list[Change], str]:
    """The changes to list, what a person set first (then the machine), and a line
    about the values derived from them, folded ('' when none differ)."""
    def derived(change: Change) -> str | None:
        return next((words for prefix, words in DERIVED.items()
                     if change.path == prefix or change.path.startswith(prefix + ".")), None)

    shown = [c for c in changes if derived(c) is None]
    shown.sort(key=lambda c: not c.path.startswith("config."))  # stable: settings first
    folded = [c for c in changes if derived(c) is not None]
    if not folded:
        return shown, ""
    kinds = list(dict.fromkeys(derived(c) for c in folded))
    differ = "differs" if len(folded) == 1 else "differ"
    return shown, (f"and {plural(len(folded), 'value')} worked out from the settings "
                   f"{differ} ({', '.join(kinds)})")


def setting_changes(a: Session | Sweep, b: Session | Sweep) -> list[Change]:
    """Configuration and machine values that differ, as dotted paths (two sessions, or
    two sweeps: max tokens, repetitions, ...)."""
    changes = []
    for section in ("config", "machine"):
        left = _flatten(getattr(a, section), section, {})
        right = _flatten(getattr(b, section), section, {})
        for path in list(left) + [p for p in right if p not in left]:
            if left.get(path) != right.get(path):
                changes.append(Change(path, left.get(path), right.get(path)))
    return changes


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def stat_rows(a: dict, b: dict) -> list[StatRow]:
    rows = []
    for name in list(a) + [k for k in b if k not in a]:
        x, y = a.get(name), b.get(name)
        ratio = y / x if _is_number(x) and _is_number(y) and x else None
        rows.append(StatRow(name, x, y, ratio))
    return rows


def default_pairs(a: Session, b: Session) -> list[tuple[str, str]]:
    """Two sessions: every strategy they share, by name. One session (``a is b``): its
    first strategy (the baseline, usually plain) against each of the others."""
    if a is b:
        if len(a.strategies) < 2:
            raise DiffError("the session has one strategy: give a second session to diff")
        return [(a.strategies[0], other) for other in a.strategies[1:]]
    shared = [name for name in a.strategies if name in b.traces]
    if not shared:
        raise DiffError(
            f"the sessions share no strategy ({', '.join(a.strategies)} vs "
            f"{', '.join(b.strategies)}): pick a pair of strategies to compare"
        )
    return [(name, name) for name in shared]


def diff_sessions(
    a: Session,
    b: Session,
    pairs: list[tuple[str, str]] | None = None,
    a_label: str = "a",
    b_label: str = "b",
    conventions: str = "specdeck",
) -> DiffReport:
    """Compare strategy pairs ``(name in a, name in b)``; ``default_pairs`` when None.
    The statistics are named and computed as ``conventions`` does
    (``engines.conventions``: specdeck, llama.cpp or vllm)."""
    pairs = pairs if pairs is not None else default_pairs(a, b)
    for a_name, b_name in pairs:
        for side, session, name in (("a", a, a_name), ("b", b, b_name)):
            if name not in session.traces:
                raise DiffError(
                    f"{side} has no strategy {name!r} (it has {', '.join(session.strategies)})"
                )
    a_stats, b_stats = a.stats(), (a.stats() if b is a else b.stats())
    panes = []
    for a_name, b_name in pairs:
        a_trace, b_trace = a.traces[a_name], b.traces[b_name]
        a_tokens, b_tokens = a_trace.tokens, b_trace.tokens
        start = first_divergence(a_tokens, b_tokens)
        panes.append(PaneDiff(
            a_strategy=a_name,
            b_strategy=b_name,
            a_length=len(a_tokens),
            b_length=len(b_tokens),
            first_divergence=start,
            edits=[] if start is None else token_edits(a_trace, b_trace, start),
            stats=stat_rows(in_convention(a_stats[a_name], a_trace.rounds, conventions),
                            in_convention(b_stats[b_name], b_trace.rounds, conventions)),
        ))
    changes = [] if a is b else setting_changes(a, b)
    return DiffReport(a_label, b_label, changes, panes, conventions)
