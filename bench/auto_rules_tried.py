"""The rules of the controller ``auto`` replaced (git 92e24a8), each added alone to the
rebuilt core, for ``bench/auto_replay.py --variants bench/auto_rules_tried.py``: the
figures of docs/auto-k.md, "Rules of the previous controller". None was kept; each is
the smallest subclass that does what the old rule did.
"""

from __future__ import annotations

import importlib
import math
import sys
import tempfile
from itertools import accumulate
from pathlib import Path

from specdeck.engines.auto.adaptive import AutoLength, AutoRules, fastest
from specdeck.engines.core.events import LengthChoice, Round  # noqa: F401 (the replay's Round)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from revisions import engines_at  # noqa: E402

#: The record of right and wrong guesses, as the old controller kept it.
RightGuesses = importlib.import_module(
    f"{engines_at('92e24a8', Path(tempfile.mkdtemp())).__name__}.auto.right_guesses"
).RightGuesses


class Bonus(AutoLength):
    """After a round kept whole, the draft's guess at the target's token after it judges
    position k + 1 (``observe_bonus``)."""

    def observe_bonus(self, drafts: int, right: bool) -> None:
        if drafts < self.most:
            self.reached[drafts] += 1.0
            self.kept[drafts] += right


class Replayed(Bonus):
    """Among the drafting k, the one whose rounds, replayed over the latest right and wrong
    guesses, bring the most (where each k's rounds start: a text that repeats); the
    record fed as the old controller fed it, by ``Bonus``'s guesses too."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.right = RightGuesses()

    def observe(self, event: Round) -> None:
        if self.guessing:
            if event.drafted:
                self.right.round(len(event.drafted), event.accepted)
            else:
                self.right.plain_step()
        super().observe(event)

    def observe_guesses(self, matches: list[bool]) -> None:
        self.right.guesses(matches)
        super().observe_guesses(matches)

    def observe_bonus(self, drafts: int, right: bool) -> None:
        self.right.bonus(right)
        super().observe_bonus(drafts, right)

    def choose(self) -> LengthChoice:
        choice = super().choose()
        if not self.guessing or not choice.k or choice.why != "best":
            return choice
        costs, replayed = self.costs(), self.right.tokens_per_round(self.most)
        tokens = [replayed.get(k, n) for k, n in enumerate(accumulate(self.survival(),
                                                                      initial=1.0))]
        k = fastest([n / c for n, c in zip(tokens, costs)], range(1, self.most + 1))
        return LengthChoice("auto", k, "best", tokens[k], costs[k])


class Reached(AutoLength):
    """A k is the best only while every position before its last was reached by two
    rounds' worth of the faded counts (``BEST_REACHED``)."""

    def choose(self) -> LengthChoice:
        choice = super().choose()
        if choice.why != "best" or not choice.k:
            return choice
        costs = self.costs()
        tokens = list(accumulate(self.survival(), initial=1.0))
        trusted = sum(1 for n in self.reached if n >= 2.0)
        k = fastest([n / c for n, c in zip(tokens, costs)], range(min(len(costs), trusted + 2)))
        return LengthChoice("auto", k, "best", tokens[k], costs[k])


class Hope(AutoLength):
    """An exploration up goes to the k that pays most with each position's acceptance 1.5
    standard errors higher on the whole run's counts, at most one position past the
    deepest judged, any once half are (``OPTIMISM``, ``HOPE_ANY``)."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.judged, self.kept_all = [0] * self.most, [0] * self.most

    def _judge(self, matches: list[bool]) -> None:
        for i, right in enumerate(matches[:self.most]):
            self.judged[i] += 1
            if not right:
                break
            self.kept_all[i] += 1
        super()._judge(matches)

    def choose(self) -> LengthChoice:
        choice = super().choose()
        if choice.why != "explore" or not choice.k:
            return choice
        weight, rate, alive, optimistic = self.rules.prior_weight, self.rules.prior_rate, 1.0, []
        for n, kept in zip(self.judged, self.kept_all):
            rate = (kept + weight * rate) / (n + weight)
            alive *= min(1.0, rate + 1.5 * math.sqrt(rate * (1 - rate) / (n + weight)))
            optimistic.append(alive)
        costs = self.costs()
        tokens = list(accumulate(optimistic, initial=1.0))
        frontier = sum(1 for n in self.judged if n) + 1
        reach = self.most if frontier >= self.most / 2 else min(self.most, frontier + 1)
        hope = fastest([n / c for n, c in zip(tokens, costs)], range(1, reach + 1))
        if hope <= choice.k:
            return choice
        estimate = list(accumulate(self.survival(), initial=1.0))
        return LengthChoice("auto", hope, "explore", estimate[hope], costs[hope])


class Follow(AutoLength):
    """An exploration up that kept every draft is followed by another at once
    (``follow_try``)."""

    def observe(self, event: Round) -> None:
        choice = event.length
        if (choice is not None and choice.why == "explore" and event.drafted
                and event.accepted == len(event.drafted) and self.explorations % 2 == 1):
            self.explored_at -= self.rules.explore_every
            self.explorations -= 1
        super().observe(event)


class Uncapped(AutoLength):
    """The guesses at plain steps judged ever more seldom, the wait never capped
    (``GUESS_MOST``)."""

    def observe_guesses(self, matches: list[bool]) -> None:
        wait = self.wait
        super().observe_guesses(matches)
        if self.whole:
            self.wait = 2 * wait


class FirstTries(AutoLength):
    """The first eight drafting rounds from one draft, doubling after a round kept whole,
    halving after one that was not (``GUESSED_START``, ``TRIALS_MOST``)."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.tries, self.next_try = 0, 1

    def observe(self, event: Round) -> None:
        if self.tries < 8 and event.drafted:
            self.tries += 1
            drafted = len(event.drafted)
            self.next_try = (min(2 * drafted, self.most) if event.accepted == drafted
                             else max(1, drafted // 2))
        super().observe(event)

    def choose(self) -> LengthChoice:
        choice = super().choose()
        if self.tries < 8 and choice.why in ("best", "explore") and choice.k:
            return LengthChoice("auto", self.next_try, "start")
        return choice


def typical(most: int, prior) -> AutoLength:
    """The first position's acceptance before any draft is judged: the calibration's
    survival of the drafter on ordinary text (``typical_survival``), not one in two."""
    from specdeck.engines.measure.calibration import load_calibration
    from specdeck.engines.models.families import require_family

    family = sys.argv[sys.argv.index("--family") + 1] if "--family" in sys.argv else "demo"
    drafter = sys.argv[sys.argv.index("--drafter") + 1] if "--drafter" in sys.argv else "draft"
    pair = require_family(family)
    survival = load_calibration(pair.target, pair.draft).typical_survival(drafter)
    return AutoLength(most, prior, AutoRules(prior_rate=survival[0]))


VARIANTS = {"bonus": Bonus, "replayed": Replayed, "reached": Reached, "hope": Hope,
            "follow": Follow, "uncapped": Uncapped, "first-tries": FirstTries,
            "typical": typical}
