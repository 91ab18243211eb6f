"""Synthetic rounds and calibrations for the draft-length policies' tests."""

from __future__ import annotations

from specdeck.engines.auto.adaptive import AutoLength
from specdeck.engines.core.config import MAX_DRAFT_TOKENS
from specdeck.engines.core.events import LengthChoice, Round
from specdeck.engines.distributed.costs import PASS_SIZES
from specdeck.engines.measure.calibration import Calibration, Timing


def synthetic(drafted: int, accepted: int, *, draft_step: float, verify: float,
              index: int = 1) -> Round:
    """A round of ``drafted`` drafts (``accepted`` kept) taking ``draft_step`` seconds per
    draft and ``verify`` seconds to verify (not the first of its run, which runs cold)."""
    tokens = list(range(accepted + 1))
    return Round(index=index, drafted=list(range(drafted)), accepted=accepted, tokens=tokens,
                 end="target", pieces=[""] * len(tokens),
                 rejected_pieces=[""] * (drafted - accepted),
                 draft_seconds=draft_step * drafted if drafted else 0.0,
                 verify_seconds=verify, t=0.0)


def feed(policy: AutoLength, accept: float, *, draft_step: float, pass_cost,
         rounds: int = 64, most_kept: int = MAX_DRAFT_TOKENS) -> list[LengthChoice]:
    """Run ``policy`` on rounds that keep every draft (up to ``most_kept`` of them) with
    probability ``accept``, deterministically, and none otherwise; a verify pass of n
    tokens costs ``pass_cost(n)`` seconds, a plain step one."""
    choices = []
    for i in range(rounds):
        choice = policy.choose()
        choices.append(choice)
        k = choice.k
        if not k:
            policy.observe(synthetic(0, 0, draft_step=0, verify=1.0, index=i + 1))
            continue
        # Alternate the outcome so that the survival rate at position 1 is ``accept``.
        kept = min(k, most_kept) if (i * accept) % 1 + accept >= 1 else 0
        event = synthetic(k, kept, draft_step=draft_step, verify=pass_cost(k + 1), index=i + 1)
        event.length = choice  # as the loop records it
        policy.observe(event)
    return choices


def made_calibration(draft_step: float, slope: float, mtp_step: float | None = None,
                     over: float = 0.0) -> Calibration:
    """A calibration of a 10 ms target step, verify passes of n tokens costing
    ``1 + slope (n - 1)`` target steps (``over`` more past one token) and a draft step
    of ``draft_step`` steps."""
    def timing(steps: float) -> Timing:
        return Timing(0.010 * steps, 0.0)

    return Calibration(
        machine="m", target="t", target_identity="ti", draft="d", draft_identity="di",
        passes=tuple(timing(1.0 + (over if n > 1 else 0.0) + slope * (n - 1))
                     for n in PASS_SIZES),
        draft_step=timing(draft_step), mtp_step=timing(mtp_step) if mtp_step else None,
        reps=5, measured="2026-11-30T00:00:00+00:00")
