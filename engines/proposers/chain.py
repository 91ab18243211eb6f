"""Chained drafters (the ``chain`` strategy): prompt lookup where the text offers a
match, a model otherwise.

Copying is free and, where the text repeats itself (code being edited, a quoted
passage), right for many tokens at once; a draft model (or, without one, the target's
own MTP head) costs a step per draft but drafts anywhere. Each round asks the lookup
first: when the last ``ngram_n`` tokens occurred before, the tokens that followed them
are the drafts (up to ``ngram_k``); else the model drafts (``num_draft_tokens``, or
``mtp_depth`` for the head). Both drafters see every verified token, whoever drafted,
and each round records which one proposed (``Round.proposer``). Lossless as each of
them: the acceptance rule is the same, with q a point mass for a copied draft.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, Mapping, Sequence, TYPE_CHECKING

import mlx.core as mx

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.decode.shared import Clock
from specdeck.engines.proposers.draft import DraftModel
from specdeck.engines.auto.length import draft_length
from specdeck.engines.core.events import Event
from specdeck.engines.proposers.mtp import MtpDrafter
from specdeck.engines.proposers.ngram import PromptLookup
from specdeck.engines.decode.sampling import KeyStream
from specdeck.engines.decode.speculative import Proposer, run_speculative

if TYPE_CHECKING:  # run.py imports this module when it runs a strategy
    from specdeck.engines.decode.run import Models


class Chain:
    """Prompt lookup when it has a match, else ``fallback`` (a draft model or an MTP head)."""

    def __init__(self, lookup: PromptLookup, fallback: DraftModel | MtpDrafter) -> None:
        self.lookup = lookup
        self.fallback = fallback
        self.wants_hidden = fallback.wants_hidden
        self.guesser = fallback.guesser
        self.copying = False

    def drafter(self) -> str:
        self.copying = self.lookup.match() is not None
        return self.lookup.drafter() if self.copying else self.fallback.drafter()

    def companions(self) -> list[tuple[Any, Sequence[Any]]]:
        return self.fallback.companions()

    def begin(self, prompt: list[int], rest: mx.array) -> None:
        self.lookup.begin(prompt, rest)
        self.fallback.begin(prompt, rest)

    def may_draft(self, counts: Mapping[str, int]) -> bool:
        return self.lookup.may_draft(counts) or self.fallback.may_draft(counts)

    def propose(self, count: int, p_min: float | None = None
                ) -> tuple[mx.array, mx.array | None, float | None]:
        """Drafts from the drafter ``drafter`` named for this round."""
        return (self.lookup if self.copying else self.fallback).propose(count, p_min)

    def guesses(self, at_least: int) -> list[bool] | None:
        return self.fallback.guesses(at_least)

    def settle(
        self, drafts: list[int], accepted: int, token: int, hidden: mx.array | None
    ) -> None:
        self.lookup.settle(drafts, accepted, token, hidden)
        self.fallback.settle(drafts, accepted, token, hidden)


def run(
    models: Models,
    prompt: list[int],
    settings: DecodeSettings,
    clock: Clock = time.perf_counter,
) -> Iterator[Event]:
    """Prompt lookup, falling back to the draft model (or, without one, the MTP head,
    which then drafts for its own model: that model verifies, as in the mtp strategy);
    ``auto`` starts from the machine's calibration when there is one."""
    keys = KeyStream(settings.sampling.seed)
    fallback: DraftModel | MtpDrafter
    if models.draft is not None:
        target, fallback = models.target, DraftModel(models.draft, settings, keys)
        calibration = models.calibration
    else:
        target, fallback = models.mtp.model, MtpDrafter(models.mtp.head, settings, keys)
        calibration = models.mtp_calibration()
    proposer: Proposer = Chain(PromptLookup.for_run(settings, target.tokenizer), fallback)
    lengths = {name: draft_length(settings, name, calibration)
               for name in ("ngram", fallback.drafter())}
    return run_speculative(target, proposer, prompt, settings, lengths, keys, clock)
