"""Why a round drafted what it did, in each policy's own terms: the inspector's "why
this k", the headless summary of a run and the line said before a run of ``auto``.

Everything here reads the record each round carries (``Round.length``), so a replayed
session explains itself as the live run did, with no model and no policy to consult.
"""

from __future__ import annotations

from collections import Counter

from specdeck.engines.auto.adaptive import RULES, AutoLength
from specdeck.engines.auto.grow import START
from specdeck.engines.core.config import MAX_DRAFT_TOKENS, MAX_MTP_DEPTH
from specdeck.engines.core.events import Round
from specdeck.engines.core.formatting import times
from specdeck.engines.measure.calibration import Calibration


def drafts(k: int) -> str:
    return f"{k} draft{'' if k == 1 else 's'}"


def auto_words(event: Round) -> str:
    """Why ``auto`` chose the round's k."""
    choice = event.length
    k = choice.k
    if choice.why == "time":
        return ("auto chose a plain step: it times plain steps to price drafting rounds "
                "against (this pair has no calibration on this machine, or the "
                f"calibration alone predicted no k at {times(RULES.time_below)} a plain "
                "step or more: near enough for its error to flip the choice)")
    if choice.why == "start":
        return (f"auto chose {drafts(k)}: a drafting round timed to price the others (this "
                "pair has no calibration on this machine)")
    if not k:
        return "auto chose a plain step: no k was predicted to pay for its cost"
    expects = ""
    if choice.tokens is not None and choice.cost:
        expects = (f": expects {choice.tokens:.2f} tokens for {choice.cost:.2f} one-token "
                   f"passes ({times(choice.tokens / choice.cost)} a plain step)")
    why = {"best": "",
           "explore": (f"; exploring: a neighbour of the best k, tried every "
                       f"{RULES.explore_every} rounds to keep its estimates honest"),
           "try": ("; a try from plain steps: a drafting round now and then, to judge "
                   "drafts and time them (the draft's guesses, where it makes any, judge "
                   "without timing); each try that leaves it at plain steps makes the "
                   "wait for the next four times as long")}
    return f"auto chose {drafts(k)}{expects}{why.get(choice.why, '')}"


def pmin_words(event: Round) -> str:
    """Why ``pmin`` drafted what it did."""
    choice, drafted = event.length, len(event.drafted)
    threshold = f"{choice.p_min:g}"
    if choice.stopped is None:
        return (f"pmin drafted while the draft's top probability was {threshold} or more, "
                f"up to {drafts(choice.k)} (llama.cpp's --draft-p-min)")
    after = f"drafted {drafted}, then " if drafted else ""
    return (f"pmin {after}stopped drafting where the draft's top probability fell to "
            f"{choice.stopped:.2f}, under {threshold} (llama.cpp's --draft-p-min)")


def grow_words(event: Round) -> str:
    """Why ``grow`` chose the round's k."""
    choice = event.length
    rule = "transformers' schedule: +2 after a round kept whole, -1 after one that was not"
    why = {"start": (f"its start ({START}; transformers starts at 20, and keeps the count "
                     "from one generation to the next)"),
           "grew": "the round before last kept every draft",
           "shrank": "the round before last had a draft rejected"}[choice.why]
    return f"grow chose {drafts(choice.k)}: {why} ({rule})"


WORDS = {"auto": auto_words, "pmin": pmin_words, "grow": grow_words}


def choice_words(event: Round) -> str | None:
    """Why the round's policy drafted what it did, in a sentence; None for a fixed k."""
    choice = event.length
    if choice is None or choice.policy not in WORDS:
        return None
    return WORDS[choice.policy](event) + cut_words(event)


def cut_words(event: Round) -> str:
    """Why a round drafted fewer than its policy asked for ("" when it drafted them all,
    or ``pmin`` stopped it): the run's token limit, or a prompt lookup whose copied text
    ran out first."""
    drafted, choice = len(event.drafted), event.length
    if choice is None or choice.stopped is not None or not 0 < drafted < choice.k:
        return ""
    why = ("the copied text ran out (or the token limit was near)"
           if event.proposer == "ngram" else "the token limit left no room for more")
    return f"; {drafted} drafted: {why}"


def guess_words(event: Round) -> str | None:
    """What the draft's guesses judged after ``event`` showed; None when none were."""
    guesses = event.length.guesses if event.length is not None else None
    if not guesses:
        return None
    n, right = len(guesses), sum(guesses)
    return (f"then auto judged the draft's guesses at the last {n} tokens: {right} right "
            f"({right / n:.0%}), as drafting rounds there would have, with none run")


def length_summary(rounds: list[Round]) -> str | None:
    """What the run's policy chose over it, in a line; None for a fixed k."""
    ran = [r for r in rounds if r.length is not None and r.length.policy in WORDS]
    if not ran:
        return None
    chosen = [r.length for r in ran]
    policy, whys = chosen[0].policy, Counter(c.why for c in chosen)
    if policy == "pmin":  # it asks for its most every round: what it drafted says more
        drafted = Counter(len(r.drafted) for r in ran)
        stops = sum(c.stopped is not None for c in chosen)
        return (f"pmin:{chosen[0].p_min:g} drafted {min(drafted)}..{max(drafted)} a round, "
                f"mostly {usual(drafted)}; it stopped under the draft's top probability "
                f"{chosen[0].p_min:g} in {stops} of {len(chosen)} rounds")
    ks = Counter(c.k for c in chosen)
    line = f"{policy} drafted k = {min(ks)}..{max(ks)}, mostly {usual(ks)}"
    if policy == "grow":
        return line + f"; grew {whys['grew']} times, shrank {whys['shrank']}"
    guesses = [right for c in chosen for right in c.guesses or ()]
    line += (f"; plain steps in {ks[0] / len(chosen):.0%} of rounds; "
             f"{whys['explore']} exploring, {whys['try']} tried from plain steps")
    if guesses:
        line += (f"; {len(guesses)} of the draft's guesses judged at plain steps, "
                 f"{sum(guesses) / len(guesses):.0%} right")
    if whys["start"]:  # no calibration priced drafting: its own rounds did, at a cost
        line += (f"; {whys['start']} rounds drafted to time drafting (no calibration here: "
                 "specdeck calibrate times it once for every run)")
    return line


def usual(counts: Counter) -> int:
    """The most frequent of ``counts``; the smaller on a tie."""
    return max(counts, key=lambda k: (counts[k], -k))


def auto_estimate_line(calibration: Calibration, proposer: str) -> str:
    """What ``auto`` takes from this machine's calibration, said before a run: that it
    prices its first rounds by it, and where it would start."""
    most = MAX_MTP_DEPTH if proposer == "mtp" else MAX_DRAFT_TOKENS
    policy = AutoLength(most, calibration.drafting_costs(proposer))
    first = policy.choose()
    at = f"{RULES.prior_rate:.0%} acceptance"
    start = (f"k={first.k} (predicted {times(first.tokens / first.cost)} a plain step at "
             f"{at})" if first.k and first.tokens and first.cost else
             f"plain steps (no k pays at {at})")
    return (f"calibrated on this machine: auto prices its rounds from it until the run "
            f"has timed its own, and starts at {start}")
