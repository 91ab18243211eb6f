"""``pmin``: llama.cpp's rule (``--draft-p-min``): draft while the draft is sure.

Each round drafts up to its most and stops before the first position where the draft's
top probability falls under the threshold (llama.cpp's ``common/speculative.cpp``). The
proposer applies it as it drafts (``Proposer.propose``), as the rule needs each step's
distribution before the next; an MTP head has the same signal, and prompt lookup, whose
copied drafts are certain, drafts its whole match. Lossless like any k: whether to draft
one more depends on the draft's own distribution, never on the target's.
"""

from __future__ import annotations

from specdeck.engines.core.events import LengthChoice, Round


class PMinLength:
    """Up to ``most`` drafts a round, while the draft's top probability is ``p_min`` or
    more; it learns nothing from the rounds."""

    def __init__(self, most: int, p_min: float) -> None:
        self.choice = LengthChoice("pmin", most, "p_min", p_min=p_min)

    def choose(self) -> LengthChoice:
        return self.choice

    def observe(self, event: Round) -> None:
        pass
