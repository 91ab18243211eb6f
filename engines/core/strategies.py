"""Every strategy and every drafter, described once.

A strategy is a name, the drafters it uses, the models it needs and the module whose
``run(models, prompt, settings, clock)`` decodes with it; requests, memory estimates,
loading, sweeps and the decode entry point all read this table. Adding a strategy is a
proposer module with a ``run`` and one entry here. Pure data: no mlx.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: Who drafts: an external draft model, a model's own MTP head, or prompt lookup.
Drafter = Literal["draft", "mtp", "ngram"]


@dataclass(frozen=True, slots=True)
class DrafterInfo:
    """A drafter: the setting that holds its drafts per round, and how a sentence names it."""

    setting: str
    words: str


DRAFTERS: dict[str, DrafterInfo] = {
    "draft": DrafterInfo("num_draft_tokens", "the draft model"),
    "mtp": DrafterInfo("mtp_depth", "the MTP head"),
    "ngram": DrafterInfo("ngram_k", "prompt lookup"),
}


@dataclass(frozen=True, slots=True)
class Strategy:
    """How a strategy drafts and what it needs before it can run."""

    name: str
    #: Who drafts its rounds (``chain``: prompt lookup first, then the others).
    drafters: tuple[str, ...]
    #: The module (under ``specdeck.engines``) whose ``run`` decodes with it.
    runner: str
    #: Whether it drafts with the draft model: ``always`` (refused without one),
    #: ``if_given`` (used when one is named) or ``never``.
    draft_model: Literal["always", "if_given", "never"] = "never"
    #: Whether it drafts with an MTP head: ``always``, ``without_draft`` (when no draft
    #: model is named) or ``never``.
    mtp_head: Literal["always", "without_draft", "never"] = "never"
    #: Whether ``specdeck sweep`` sweeps its drafts per round.
    swept: bool = False
    #: What a refusal says it needs.
    needs: str = ""

    def uses_draft(self, draft_named: bool) -> bool:
        return self.draft_model == "always" or (self.draft_model == "if_given" and draft_named)

    def uses_mtp(self, draft_named: bool) -> bool:
        return self.mtp_head == "always" or (self.mtp_head == "without_draft"
                                             and not draft_named)


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("plain", (), "decode.plain"),
    Strategy("draft", ("draft",), "proposers.draft", draft_model="always", swept=True,
             needs="the draft strategy needs a draft model (--draft PATH)"),
    Strategy("mtp", ("mtp",), "proposers.mtp", mtp_head="always", swept=True,
             needs="the mtp strategy needs a model with an MTP head"),
    Strategy("ngram", ("ngram",), "proposers.ngram", swept=True),
    Strategy("chain", ("ngram", "draft", "mtp"), "proposers.chain", draft_model="if_given",
             mtp_head="without_draft",
             needs="the chain strategy needs a draft model (--draft PATH) or a target with an "
             "MTP head to fall back on where prompt lookup finds no match"),
)}
#: The strategies ``specdeck sweep`` sweeps.
SWEPT = tuple(name for name, s in STRATEGIES.items() if s.swept)
#: Between a strategy and its own drafts per round in a pane's name (``draft@grow``,
#: ``mtp@2``): one strategy under several settings, side by side.
OWN = "@"


def strategy_of(name: str) -> Strategy | None:
    """The strategy a pane named ``name`` runs (``draft@grow`` runs ``draft``); None for
    a name no strategy has (a session from another engine)."""
    return STRATEGIES.get(name.partition(OWN)[0])


def names() -> str:
    """The strategies, as an error message lists them."""
    return ", ".join(STRATEGIES)


def uses_draft(strategies: list[str], draft_named: bool) -> bool:
    """Whether any of ``strategies`` drafts with the draft model."""
    return any(s.uses_draft(draft_named) for s in map(strategy_of, strategies) if s)


def uses_mtp(strategies: list[str], draft_named: bool) -> bool:
    """Whether any of ``strategies`` drafts with an MTP head."""
    return any(s.uses_mtp(draft_named) for s in map(strategy_of, strategies) if s)
