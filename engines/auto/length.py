"""How many tokens to draft each round: a fixed k, or a policy named by the settings.

A policy chooses the next round's drafts (``choose``) and learns from each round run
(``observe``); what it chose and why travels with the round (``Round.length``). The loop
asks for a choice while the previous round's verify pass runs, from the rounds before
that, so every policy is one round late. Any sequence of k is lossless, so is any policy.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from specdeck.engines.auto.adaptive import AutoLength
from specdeck.engines.auto.grow import GrowLength
from specdeck.engines.auto.pmin import PMinLength
from specdeck.engines.core.config import AUTO, GROW, DecodeSettings, p_min_of, policy_name
from specdeck.engines.core.events import LengthChoice, Round
from specdeck.engines.measure.calibration import Calibration


class DraftLength(Protocol):
    """Chooses the drafts of the next round and learns from each round run."""

    def choose(self) -> LengthChoice: ...

    def observe(self, event: Round) -> None: ...


@runtime_checkable
class LearnsFromGuesses(Protocol):
    """A policy that learns from the draft model's greedy guesses at the tokens of its
    plain steps (temperature 0): told before its first choice that they will come,
    asked how many plain steps' tokens to wait for (None: none now), given them."""

    def expect_guesses(self) -> None: ...

    def guess_after(self) -> int | None: ...

    def observe_guesses(self, matches: list[bool]) -> None: ...


class FixedLength:
    """The same k every round; its rounds record no choice."""

    def __init__(self, k: int) -> None:
        self.choice = LengthChoice("fixed", k, "fixed")

    def choose(self) -> LengthChoice:
        return self.choice

    def observe(self, event: Round) -> None:
        pass


def draft_length(settings: DecodeSettings, drafter: str,
                 calibration: Calibration | None = None) -> DraftLength:
    """The policy a drafter (``draft``, ``mtp``, ``ngram``) runs under; ``auto`` prices
    its first rounds by ``calibration`` when this machine has one for the models."""
    count = settings.draft_count(drafter)
    most = settings.max_drafts(drafter)
    policy = policy_name(count)
    if policy is None:
        return FixedLength(int(count))
    if policy == AUTO:
        return AutoLength(most, calibration.drafting_costs(drafter) if calibration else None)
    if policy == GROW:
        return GrowLength(most)
    return PMinLength(most, p_min_of(str(count)))
