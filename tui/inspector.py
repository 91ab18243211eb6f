"""The round inspector: what was drafted, what the target chose, and why each draft lived.

For one round it lists each drafted token with its draft probability q and target
probability p, the test it faced (greedy: equal to the target's top choice; sampled:
``u < min(1, p/q)`` against the recorded uniform draw), the target's top alternatives at
each verified position, and the cache rollback that followed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rich import box
from rich.table import Table
from textual.widgets import Static

from specdeck.engines.events import Round
from specdeck.engines.formatting import plural
from specdeck.literal import literal
from specdeck.visible import printable

#: Characters of a token shown in the inspector: a model may emit a megabyte in one piece.
SHOWN_CHARS = 80

TokenText = Callable[[int], "str | None"]


@dataclass(slots=True)
class PositionRow:
    """One verified position of a round, as the inspector shows it."""

    position: int
    token: str
    kind: str  # accepted, rejected, unchecked, correction, bonus, target
    q: float | None
    p: float | None
    reason: str
    alternatives: list[tuple[str, float]]


def _show(text: str) -> str:
    shown = repr(printable(text[:SHOWN_CHARS]))[1:-1] or "∅"
    return shown + (f"… ({len(text):,} characters)" if len(text) > SHOWN_CHARS else "")


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def explain_round(event: Round, token_text: TokenText) -> list[PositionRow]:
    """Why each token of ``event`` was kept or dropped, position by position."""

    def name(token: int) -> str:
        text = token_text(token)
        return _show(text) if text is not None else f"#{token}"

    def alternatives(i: int) -> list[tuple[str, float]]:
        rows = event.alternatives[i] if event.alternatives and i < len(event.alternatives) else []
        return [(name(int(token)), prob) for token, prob in rows]

    sampled = event.uniforms is not None
    rows = []
    for i, token in enumerate(event.drafted):
        q = event.draft_probs[i] if event.draft_probs else None
        p = event.target_probs[i] if event.target_probs and i < len(event.target_probs) else None
        if i < event.accepted:
            kind, piece = "accepted", event.pieces[i]
        else:
            kind = "rejected" if i == event.accepted else "unchecked"
            j = i - event.accepted
            piece = event.rejected_pieces[j] if j < len(event.rejected_pieces) else ""
        if kind == "unchecked":
            reason = "not tested: an earlier draft was rejected"
        elif sampled and p is not None and i < len(event.uniforms or []):
            bound = min(1.0, p / q) if q else 1.0
            u = event.uniforms[i]
            reason = f"u={u:.3f} {'<' if kind == 'accepted' else '≥'} min(1, p/q)={bound:.3f}"
        else:
            reason = "greedy: " + (
                "the target's top choice" if kind == "accepted" else "the target chose another"
            )
        rows.append(PositionRow(i + 1, _show(piece) if piece else name(token), kind, q, p,
                                reason, alternatives(i)))
    if event.end is not None and len(event.tokens) > event.accepted:
        token = event.tokens[event.accepted]
        piece = event.pieces[event.accepted] if event.accepted < len(event.pieces) else ""
        reason = {
            "target": "plain decoding: the target's own token",
            "bonus": "every draft accepted: the target's next token comes free",
            "correction": (
                "resampled from norm(max(0, p − q))" if sampled
                else "the target's top choice replaces the rejected draft"
            ),
        }[event.end]
        rows.append(PositionRow(event.accepted + 1, _show(piece) if piece else name(token),
                                event.end, None, None, reason, alternatives(event.accepted)))
    return rows


def describe_rollback(event: Round) -> str:
    """What the cache rewind after the verify pass did, in words."""
    if event.rollback == "trim":
        dropped = len(event.rejected)
        return f"rollback: trimmed {plural(dropped, 'rejected position')} from the caches"
    if event.rollback == "captured":
        dropped = len(event.rejected)
        return (
            f"rollback: trimmed {plural(dropped, 'rejected position')} from the "
            "attention caches and set each recurrent layer to the state the verify pass "
            "kept after the last accepted token (no replay)"
        )
    if event.rollback == "replay":
        return (
            "rollback: restored the recurrent state from before the verify pass and "
            f"replayed {plural(event.replayed, 'accepted token')}"
        )
    return "rollback: none needed (nothing rejected)"


def round_table(strategy: str, event: Round, token_text: TokenText) -> Table:
    """The inspector's table for one round."""
    drafted = len(event.drafted)
    title = (
        f"{strategy} · round {event.index} · {drafted} drafted, {event.accepted} accepted"
        + (f" → {event.end}" if event.end else "")
    )
    table = Table(title=literal(title, "table.title", one_line=True),
                  caption=describe_rollback(event),
                  expand=True, title_justify="left", caption_justify="left",
                  box=box.SIMPLE_HEAD)
    for column in ("pos", "token", "verdict", "q (draft)", "p (target)", "why",
                   "target's top alternatives"):
        table.add_column(column, no_wrap=column in ("pos", "q (draft)", "p (target)"))
    for row in explain_round(event, token_text):
        table.add_row(
            str(row.position), literal(row.token), row.kind,
            _fmt(row.q), _fmt(row.p), row.reason,
            literal("  ".join(f"{text} {prob:.2f}" for text, prob in row.alternatives) or "–"),
        )
    return table


class RoundInspector(Static):
    """Docked under the panes; shows the focused pane's current round."""

    #: (strategy, round) on show, for tests and the smoke check.
    shown: tuple[str, Round | None] | None = None

    def show_round(self, strategy: str, event: Round | None, token_text: TokenText) -> None:
        self.shown = (strategy, event)
        if event is None:
            self.update(literal(f"{strategy}: no round shown yet; press n to step",
                                one_line=True))
        else:
            self.update(round_table(strategy, event, token_text))
