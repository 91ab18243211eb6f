"""The round inspector: what was drafted, what the target chose, and why each draft lived.

For one round it lists each drafted token with its draft probability q and target
probability p, the test it faced (greedy: equal to the target's top choice; sampled:
``u < min(1, p/q)`` against the recorded uniform draw), the target's top alternatives at
each verified position, and the cache rollback that followed. The verdict (how many
drafts lived, how the round ended, the tokens this target pass bought, the rollback)
stays in view at the top; the table under it scrolls, so a round of 16 drafts reads to
its last row at any terminal size. Whitespace shows as marks (``␣``, ``⏎``, ``→``): a
token of three spaces is not an empty cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from specdeck.engines.auto.explain import choice_words, guess_words
from specdeck.engines.core.events import Round
from specdeck.engines.core.strategies import DRAFTERS
from specdeck.engines.core.formatting import MISSING, plural
from specdeck.safe_text.rich_text import literal
from specdeck.safe_text.plain import marked

#: Characters of a token shown in the inspector: a model may emit a megabyte in one piece.
SHOWN_CHARS = 80

TokenText = Callable[[int], "str | None"]

#: How to move through the rounds, under the inspector's top border.
KEYS = "b / n: back / next round · j: jump to a round · click a token: its round"


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


def show_token(text: str) -> str:
    """A token as one line with its whitespace marked; ``∅`` for an empty piece (a
    character whose bytes are still incomplete), cut at ``SHOWN_CHARS``."""
    shown = marked(text[:SHOWN_CHARS]) or "∅"
    return shown + (f"… ({len(text):,} characters)" if len(text) > SHOWN_CHARS else "")


def _fmt(value: float | None) -> str:
    return MISSING if value is None else f"{value:.3f}"


def _probability(event: Round, position: int, token: int) -> float | None:
    """The target's probability of ``token`` at ``position``, from the alternatives
    recorded there (None when it is not among them)."""
    rows = event.alternatives[position] if event.alternatives and position < len(
        event.alternatives) else []
    return next((prob for alt, prob in rows if int(alt) == token), None)


#: Why each kind of row is what it is, in full and in a narrow table's words.
REASONS = {
    "accepted": ("greedy: the target's top choice", "top choice"),
    "rejected": ("greedy: not its top choice", "not top choice"),
    "unchecked": ("not tested: after a rejection", "not tested"),
    "target": ("plain decoding: the target's own", "own token"),
    "bonus": ("all accepted: the next comes free", "free"),
    "correction": ("the top choice replaces the draft", "top choice"),
    "resampled": ("drawn from norm(max(0, p − q))", "from max(0,p−q)"),
}


def explain_round(event: Round, token_text: TokenText, short: bool = False
                  ) -> list[PositionRow]:
    """Why each token of ``event`` was kept or dropped, position by position (``short``:
    in a narrow table's words)."""
    words = {kind: pair[short] for kind, pair in REASONS.items()}

    def name(token: int) -> str:
        text = token_text(token)
        return show_token(text) if text is not None else f"#{token}"

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
            reason = words["unchecked"]
        elif sampled and p is not None and i < len(event.uniforms or []):
            bound = min(1.0, p / q) if q else 1.0
            u, test = event.uniforms[i], "<" if kind == "accepted" else "≥"
            reason = (f"u={u:.2f} {test} {bound:.2f}" if short
                      else f"u={u:.3f} {test} min(1, p/q)={bound:.3f}")
        else:
            reason = words[kind]
        rows.append(PositionRow(i + 1, show_token(piece) if piece else name(token), kind, q, p,
                                reason, alternatives(i)))
    if event.end is not None and len(event.tokens) > event.accepted:
        token = event.tokens[event.accepted]
        piece = event.pieces[event.accepted] if event.accepted < len(event.pieces) else ""
        reason = words["resampled" if sampled and event.end == "correction" else event.end]
        rows.append(PositionRow(event.accepted + 1, show_token(piece) if piece else name(token),
                                event.end, None, _probability(event, event.accepted, token),
                                reason, alternatives(event.accepted)))
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


def verdict(strategy: str, event: Round, number: int, total: int) -> str:
    """The round in two lines: where it is, what lived, the tokens this target pass
    bought (and for ``chain``, who drafted); the rollback. Then, where they apply, what
    mlx-lm's exact-match rule would have kept of the same drafts (temperature > 0),
    why the round's draft-length policy chose its k and what the draft's guesses judged
    after it showed."""
    drafted = len(event.drafted)
    kept = (f"{event.accepted} of {drafted} accepted" if drafted
            else "nothing drafted")
    end = f" → {event.end}" if event.end else ""
    bought = plural(len(event.tokens), "token")
    lines = [f"{strategy} · round {number + 1} of {total} · {kept}{end} · {bought} this pass",
             describe_rollback(event)]
    if strategy == "chain" and event.proposer in DRAFTERS:
        lines[0] += f" · drafted by {DRAFTERS[event.proposer].words}"
    if event.uniforms is not None and event.exact_match_accepted is not None:
        lines.append(f"mlx-lm's rule would have kept {event.exact_match_accepted} of "
                     f"{drafted} here (the target's own sample must equal the draft)")
    lines += filter(None, (choice_words(event), guess_words(event)))
    return "\n".join(lines)


#: Below this many columns the table uses its short words.
NARROW = 110


@dataclass(slots=True)
class RoundTable:
    """``round_table`` at the width it is drawn at (its words shorten when narrow)."""

    event: Round
    token_text: TokenText

    def __rich_console__(self, console, options):
        yield round_table(self.event, self.token_text, options.max_width < NARROW)


def round_table(event: Round, token_text: TokenText, short: bool = False) -> Table:
    """The inspector's table for one round: a row per verified position, one line each
    (a long token or list of alternatives ends in …: the row stays readable at 80
    columns; the why column wraps)."""
    table = Table(expand=True, box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False)
    for column in ("pos", "token", "verdict", "q draft", "p target", "why",
                   "target's top choices (p)"):
        why, alternatives = column == "why", column.startswith("target's")
        table.add_column(column, no_wrap=not why, overflow="ellipsis",
                         ratio=1 if why or alternatives else None,
                         min_width=18 if why else 12 if alternatives else None,
                         max_width=16 if column == "token" else None)
    for row in explain_round(event, token_text, short):
        table.add_row(
            str(row.position), literal(row.token), row.kind,
            _fmt(row.q), _fmt(row.p), row.reason,
            literal("  ".join(f"{text} {prob:.2f}" for text, prob in row.alternatives)
                    or MISSING),
        )
    return table


class RoundInspector(Vertical):
    """Docked under the panes; shows the focused pane's current round: its verdict on
    top, the table below it scrolling."""

    #: (strategy, round) on show, for tests and the smoke check.
    shown: tuple[str, Round | None] | None = None
    #: What the text on show was made from (redrawn only when that changes: a race
    #: refreshes 30 times a second, and a redraw would scroll the table back up).
    _drawn: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="inspector-verdict")
        with VerticalScroll(id="inspector-body"):
            yield Static(id="inspector-table")

    def on_mount(self) -> None:
        self.border_title = KEYS

    def show_round(self, strategy: str, event: Round | None, token_text: TokenText,
                   number: int = 0, total: int = 0, *, redraw: bool = False) -> None:
        """Explain ``event``, round ``number`` (from 0) of the ``total`` the pane holds;
        None: say how to choose one. ``redraw``: even when it is on show already (the
        tokens have names now)."""
        drawn = (strategy, id(event), number, total)
        if drawn == self._drawn and not redraw:
            return
        moved = self.shown != (strategy, event)
        self._drawn, self.shown = drawn, (strategy, event)
        head = self.query_one("#inspector-verdict", Static)
        table = self.query_one("#inspector-table", Static)
        if event is None:
            head.update(literal(f"{strategy}: no round shown yet · n: step one round · "
                                "j: jump to a round · or click a token in a pane",
                                one_line=True))
            table.update(Text())
            return
        head.update(literal(verdict(strategy, event, number, total)))
        table.update(RoundTable(event, token_text))
        if moved:
            self.query_one("#inspector-body", VerticalScroll).scroll_home(animate=False)
