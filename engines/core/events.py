"""The event stream every strategy emits: one Prefill, then Rounds, then one Done.

Plain decoding, external-draft speculation, MTP and prompt lookup all produce the same
three event types, so panes, recording, replay, diff and statistics are written once.
This module imports nothing heavy: replaying a session must not need mlx.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

from specdeck.engines.core.strategies import Drafter

#: How the token that ends a round came to be.
#: ``target``: plain decoding (no drafts); ``correction``: the target's token replacing the
#: first rejected draft; ``bonus``: the target's extra token after every draft was accepted.
EndKind = Literal["target", "correction", "bonus"]

#: What the cache rewind after a verify pass did: nothing to undo, trimmed the rejected
#: positions, restored a recurrent state and replayed the accepted tokens, or set each
#: recurrent layer to the state the verify pass kept for the last accepted position.
Rollback = Literal["none", "trim", "replay", "captured"]

FinishReason = Literal["length", "stop", "cancelled", "error"]



@dataclass(slots=True)
class Prefill:
    """The prompt was processed; ``t`` is seconds since the run started."""

    prompt_tokens: int
    seconds: float
    t: float
    type: Literal["prefill"] = "prefill"


#: Who chose a round's k: a fixed k (recorded as no choice: ``Round.length`` None), or a
#: policy (``engines.auto``).
LengthPolicy = Literal["fixed", "auto", "pmin", "grow"]
#: Why a draft-length policy chose a round's k, in its own terms. ``auto``: ``best``
#: (the most tokens per one-token pass predicted), ``explore`` (a neighbour of the best,
#: to keep its estimates honest), ``try`` (drafting tried from plain steps), ``time`` (a
#: plain step timed to price rounds against), ``start`` (a first round, before anything
#: prices one); ``grow``: ``start``, ``grew`` (every draft of the round before kept),
#: ``shrank`` (one rejected); ``pmin``: ``p_min`` (draft while the draft is sure).
LengthWhy = Literal["fixed", "best", "explore", "try", "time", "start", "grew", "shrank",
                    "p_min"]


@dataclass(frozen=True, slots=True)
class LengthChoice:
    """What a draft-length policy chose for one round, and why (``engines.auto``)."""

    policy: LengthPolicy
    #: The drafts asked for; the proposer may give fewer (a short n-gram match, the
    #: run's token limit, ``pmin``'s stop).
    k: int
    why: LengthWhy
    #: ``auto``: the tokens ``E(k)`` it expected, and the round's cost ``C(k)`` in
    #: one-token passes (None: nothing priced yet).
    tokens: float | None = None
    cost: float | None = None
    #: ``pmin``: the threshold, and the draft's top probability at the position where
    #: drafting stopped short of ``k`` (None: it did not).
    p_min: float | None = None
    stopped: float | None = None
    #: ``auto`` at temperature 0, at plain steps: the draft model's greedy guesses at
    #: the tokens since it last caught up, judged after this round (true: the guess was
    #: the target's token, so a draft there would have been kept).
    guesses: list[bool] | None = None


@dataclass(slots=True)
class Round:
    """One draft-and-verify cycle (plain decoding: a round with no drafts).

    ``tokens`` are the tokens this round added to the output, in order: the accepted
    prefix of ``drafted`` and then, unless generation stopped inside the accepted drafts
    (max tokens or end of sequence), the target's own token, whose kind is ``end``.
    ``pieces`` is the text each of those tokens added (from mlx-lm's streaming
    detokenizer, so a piece may be empty while a multi-byte character is incomplete) and
    ``rejected_pieces`` the text of each rejected draft, shown where it was proposed.
    """

    index: int
    drafted: list[int]
    accepted: int
    tokens: list[int]
    end: EndKind | None
    pieces: list[str]
    rejected_pieces: list[str]
    #: From the end of the previous round (or of the prefill) until this round's drafts
    #: were known. Their verify pass is built while they compute, so that time lands
    #: here when it outlasts the drafting. 0 for a round that drafted nothing (plain
    #: decoding's, a plain step of ``auto``): all its time is the target's.
    draft_seconds: float
    #: From then until the verdict was read back and the caches rewound: the verify
    #: pass (plain decoding: one step, queued behind the last). The
    #: previous round's text and event are made while this pass runs, so that time
    #: lands here when it outlasts the pass.
    verify_seconds: float
    #: Seconds since the run started when this round's tokens were known. Rounds tile
    #: the decode: ``t`` minus the previous round's ``t`` (or the prefill's) is
    #: ``draft_seconds + verify_seconds``.
    t: float
    #: Probability of each drafted token under the draft's (sampling) distribution q.
    draft_probs: list[float] | None = None
    #: Probability of each drafted token under the target's (sampling) distribution p.
    target_probs: list[float] | None = None
    #: The uniform draw each drafted token was tested against (temperature > 0 only):
    #: accepted when ``u < min(1, p / q)``.
    uniforms: list[float] | None = None
    #: How many of these drafts mlx-lm's exact-match rule would have kept: drafts
    #: accepted while the target's own token equals them (at temperature > 0 its sample
    #: from p, drawn with each position's ``uniforms`` value). Only recorded, never
    #: deciding; equal to ``accepted`` at temperature 0. None when nothing was drafted.
    exact_match_accepted: int | None = None
    #: The target's most likely tokens at each verified position: ``[[id, prob], ...]``.
    alternatives: list[list[list[float]]] | None = None
    rollback: Rollback = "none"
    #: Tokens pushed through the target again to rebuild a recurrent state.
    replayed: int = 0
    #: Which drafter proposed ``drafted``: ``draft``, ``mtp`` or ``ngram`` (the
    #: ``chain`` strategy picks one per round). None when nothing was drafted.
    proposer: Drafter | None = None
    #: What the round's draft-length policy (``auto``, ``pmin``, ``grow``) chose and
    #: why; None with a fixed k.
    length: LengthChoice | None = None
    type: Literal["round"] = "round"

    @property
    def rejected(self) -> list[int]:
        """The drafted tokens the target turned down."""
        return self.drafted[self.accepted :]

    @property
    def seconds(self) -> float:
        return self.draft_seconds + self.verify_seconds


@dataclass(slots=True)
class Done:
    """The run ended; totals for the whole run."""

    reason: FinishReason
    generated_tokens: int
    seconds: float
    peak_memory_bytes: int | None
    error: str | None = None
    #: Text the detokenizer still held when the run ended (e.g. a trailing space).
    tail: str = ""
    type: Literal["done"] = "done"


Event = Union[Prefill, Round, Done]

EVENT_TYPES: dict[str, type] = {"prefill": Prefill, "round": Round, "done": Done}


@dataclass(slots=True)
class Trace:
    """Every event of one strategy's run, with the generated tokens and text."""

    strategy: str
    events: list[Event] = field(default_factory=list)

    @property
    def rounds(self) -> list[Round]:
        return [e for e in self.events if isinstance(e, Round)]

    @property
    def prefill(self) -> Prefill | None:
        return next((e for e in self.events if isinstance(e, Prefill)), None)

    @property
    def done(self) -> Done | None:
        return next((e for e in reversed(self.events) if isinstance(e, Done)), None)

    @property
    def tokens(self) -> list[int]:
        return [t for r in self.rounds for t in r.tokens]

    @property
    def text(self) -> str:
        done = self.done
        body = "".join(p for r in self.rounds for p in r.pieces)
        return body + (done.tail if done else "")
