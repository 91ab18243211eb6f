"""``grow``: transformers' schedule for assisted generation.

``num_assistant_tokens`` (the ``heuristic`` schedule of transformers'
``generation/candidate_generator.py``) grows by two after a round that kept every draft
and shrinks by one, to no fewer than one, after a round that did not. It starts at
transformers' default, 20, capped at the most drafts a round may have here (16 for a
draft model, 8 for an MTP head). Here the change lands one round late, as every
policy's choice does.
"""

from __future__ import annotations

from specdeck.engines.core.events import LengthChoice, Round

#: transformers' ``num_assistant_tokens`` default.
START = 20


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
