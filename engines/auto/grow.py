"""``grow``: transformers' schedule for assisted generation.

``num_assistant_tokens`` (the ``heuristic`` schedule of transformers'
``generation/candidate_generator.py``) grows by two after a round that kept every draft
and shrinks by one, to no fewer than one, after a round that did not, up to the most
drafts a round may have here (16 for a draft model, 8 for an MTP head). It starts at 5,
not transformers' 20: transformers keeps the count from one generation to the next, so
it comes down from 20 once; here every run starts afresh, and on a CPU, where a verify
pass of 17 tokens costs about three plain steps, the rounds it takes to come down cost
a run more than grow gains (docs/adaptive-k.md has the replayed figures). Here the change
lands one round late, as every policy's choice does.
"""

from __future__ import annotations

from specdeck.engines.core.events import LengthChoice, Round

#: The first k (transformers' ``num_assistant_tokens`` starts at 20).
START = 5


class GrowLength:
    """k + 2 after a round kept whole, k - 1 after one that was not."""

    def __init__(self, most: int, start: int = START) -> None:
        self.most = most
        self.choice = LengthChoice("grow", min(start, most), "start")

    def choose(self) -> LengthChoice:
        return self.choice

    def observe(self, event: Round) -> None:
        drafted = len(event.drafted)
        if not drafted:  # prompt lookup found nothing to copy: nothing judged
            return
        k = self.choice.k
        self.choice = (LengthChoice("grow", min(k + 2, self.most), "grew")
                       if event.accepted == drafted
                       else LengthChoice("grow", max(1, k - 1), "shrank"))
