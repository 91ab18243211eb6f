"""``auto``: each round's k from the acceptance and the costs this run has measured.

Per draft position it counts the drafting rounds that reached it (every draft before it
kept) and those that kept it; the counts fade over ``window`` rounds, as a text changes.
It times a draft step, a one-token pass (a plain step between two others, as plain
decoding runs them) and whole rounds of each k it drafted. Before each round it prices
every k from 0 to its most in one-token passes, ``E(k)`` tokens for ``C(k)`` (the cost
model of DESIGN.md), and drafts the k with the most tokens per pass: 0, a plain step,
when none pays. A k it has not drafted is priced by this machine's calibration of the
pair where there is one, else by a straight line through the verify pass timed nearest;
either shifted by what it missed at the nearest k drafted.

Every ``explore_every`` rounds it drafts a neighbour of its best k instead, so that a
wrong estimate corrects itself. Until it has timed a plain step, the calibration prices
one; it stops to time one (plain steps, in place of an exploration) only where the
choice may hang on it: the best k predicted under ``time_below`` times a plain step.
While it stands at plain steps it learns from the draft model's greedy guesses at their
tokens (temperature 0), judged as rounds drafting there would have judged them; with no
guesses to judge (an MTP head, prompt lookup, temperature > 0), or while no drafting
round of its own has priced drafting, it tries its best drafting k. Either waits
``explore_every`` plain steps, then longer after each that leaves it at plain steps:
guesses twice as long (at most ``window`` apart), tries four times as long, so what
learning costs a text that never pays stays small.
docs/auto-k.md says how each part was measured.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import accumulate

from specdeck.engines.core.events import LengthChoice, Round
from specdeck.engines.core.stats import median


@dataclass(frozen=True, slots=True)
class AutoRules:
    """The constants of ``auto`` (docs/auto-k.md: what each was measured to do)."""

    #: Rounds over which the acceptance counts fade.
    window: int = 32
    #: Latest timings of each kind whose median prices it: one slow round barely moves it.
    timings: int = 15
    #: Rounds between explorations of a neighbour of the best k; the first wait, in plain
    #: steps, before the draft's guesses are judged or drafting is tried from them.
    explore_every: int = 8
    #: How many rounds' worth of the acceptance of the position before it each position
    #: starts from, and the acceptance assumed at the first before any draft is judged.
    prior_weight: float = 2.0
    prior_rate: float = 0.5
    #: Priced by a calibration alone, a best k predicted under this many times a plain
    #: step's rate has plain steps run first to time one: a calibration off by a quarter
    #: could flip that choice, not a clearer one.
    time_below: float = 1.25


RULES = AutoRules()


class Timings:
    """The median of the latest timings of one kind."""

    __slots__ = ("values", "value")

    def __init__(self, size: int) -> None:
        self.values: deque[float] = deque(maxlen=size)
        self.value = 0.0

    def add(self, seconds: float) -> None:
        self.values.append(seconds)
        self.value = median(list(self.values))


class AutoLength:
    """``auto``: each round's k from the acceptance and costs measured so far."""

    def __init__(self, most: int, prior: tuple[float, tuple[float, ...]] | None = None,
                 rules: AutoRules = RULES) -> None:
        self.most, self.rules = most, rules
        #: A calibration's draft step and what a round verifying 0, 1, ... drafts costs
        #: besides it, in plain steps (``Calibration.drafting_costs``); None: the run's
        #: own timings alone price rounds.
        self.prior = prior if prior is not None and len(prior[1]) > most else None
        #: Per position, faded: drafting rounds (or guesses) that reached it, and kept it.
        self.reached = [0.0] * most
        self.kept = [0.0] * most
        self.one_token = Timings(rules.timings)
        self.draft_step = Timings(rules.timings)
        #: Verify passes and whole rounds by drafts verified.
        self.verify: dict[int, Timings] = {}
        self.whole: dict[int, Timings] = {}
        #: The latest plain steps in a row (only the middle of three is timed: the first
        #: of a stretch runs on into the next, the last is queued behind nothing).
        self.stretch: deque[float] = deque(maxlen=3)
        self.guessing = False
        self.rounds = self.explored_at = self.explorations = 0
        #: Plain steps to wait before the next guesses judged or try, and those run
        #: since the last.
        self.wait, self.idle = rules.explore_every, 0
        #: The plain step chosen, kept until something is learnt at plain steps.
        self.standing: LengthChoice | None = None
        #: Whether plain steps are run to time one (the calibration priced the start), and
        #: whether a drafting round ran (the first, cold, is not timed).
        self.timing = self.drafted_before = False

    def expect_guesses(self) -> None:
        """The draft's guesses at the plain steps' tokens will be judged: no drafting
        round is run only to try drafting from plain steps."""
        self.guessing = True

    def guess_after(self) -> int | None:
        return self.wait

    def observe(self, event: Round) -> None:
        fade = 1.0 - 1.0 / self.rules.window
        self.reached = [n * fade for n in self.reached]
        self.kept = [n * fade for n in self.kept]
        drafted = len(event.drafted)
        if not drafted:
            self.idle += 1
            if event.index:  # the first round runs cold
                self.stretch.append(event.seconds)
                if len(self.stretch) == 3:
                    self.one_token.add(self.stretch[1])
            return
        self.stretch.clear()
        self.standing, self.idle = None, 0
        self._judge([True] * event.accepted + [False] * (event.accepted < drafted))
        if self.drafted_before:  # the first drafting round runs cold too
            self.draft_step.add(event.draft_seconds / drafted)
            self.verify.setdefault(drafted, Timings(self.rules.timings)).add(event.verify_seconds)
            self.whole.setdefault(drafted, Timings(self.rules.timings)).add(event.seconds)
        self.drafted_before = True

    def observe_guesses(self, matches: list[bool]) -> None:
        """The draft's greedy guesses at consecutive tokens of plain steps, each right or
        not, judged as rounds of the most drafts would have judged them, one after
        another: each keeps the leading run of right guesses from where it starts and
        the next starts after its first wrong one."""
        start = 0
        while start < len(matches):
            run = matches[start:start + self.most]
            self._judge(run)
            start += next((i for i, right in enumerate(run) if not right), len(run)) + 1
        self.standing = None
        if self.whole:  # else what drafting costs is the calibration's word: a try is due
            self.wait, self.idle = min(2 * self.wait, self.rules.window), 0

    def _judge(self, matches: list[bool]) -> None:
        """Drafts (or guesses) from the first position on, up to the first wrong one."""
        for i, right in enumerate(matches[:self.most]):
            self.reached[i] += 1.0
            if not right:
                break
            self.kept[i] += 1.0

    def survival(self) -> list[float]:
        """``s_i`` for i = 1..most: the product of each position's acceptance, each drawn
        towards the position before it where it was reached rarely (the first towards
        ``prior_rate``). A position no round has reached yet is priced as the deepest one
        reached: a run of drafts kept whole says the text copies on."""
        weight = self.rules.prior_weight
        rate, alive, survival = self.rules.prior_rate, 1.0, []
        for reached, kept in zip(self.reached, self.kept):
            rate = (kept + weight * rate) / (reached + weight)
            alive *= rate
            survival.append(alive)
        return survival

    def _calibrated(self, k: int) -> float:
        step, passes = self.prior  # type: ignore[misc]
        return k * step + passes[k]

    def costs(self) -> list[float] | None:
        """``C(k)`` for k = 0..most, in one-token passes: until a one-token pass is timed,
        the calibration's (None without one); then what the run timed."""
        unit = self.one_token.value if self.one_token.values else None
        if unit is None or (self.prior is None and not self.verify):
            return [self._calibrated(k) for k in range(self.most + 1)] if self.prior else None
        if self.prior is not None:
            model = [self._calibrated(k) for k in range(self.most + 1)]
        else:
            step = self.draft_step.value / unit
            model = [1.0] + [k * step + self._line(k, unit) for k in range(1, self.most + 1)]
        timed = {k: t.value / unit for k, t in self.whole.items()}
        costs = [1.0]
        for k in range(1, self.most + 1):
            near = min(timed, key=lambda n: (abs(n - k), n), default=None)
            shifted = model[k] if near is None else model[k] + timed[near] - model[near]
            costs.append(max(1.0, shifted))  # no round is cheaper than a one-token pass
        return costs

    def _line(self, k: int, unit: float) -> float:
        """A verify pass of k drafts on the line through a one-token pass and the verify
        length timed nearest (never falling: a timing below a one-token pass is noise)."""
        near = min(self.verify, key=lambda n: (abs(n - k), n))
        return 1.0 + max(0.0, self.verify[near].value / unit - 1.0) * k / near

    def choose(self) -> LengthChoice:
        self.rounds += 1
        if self.standing is not None and (self.guessing or self.idle < self.wait):
            return self.standing
        costs = self.costs()
        timing = not self.one_token.values and (costs is None or self.timing)
        if timing:  # plain steps until one between two others is timed
            return LengthChoice("auto", 0, "time")
        if costs is None:  # no calibration: a round of one draft, to price the others
            return LengthChoice("auto", 1, "start")
        tokens = list(accumulate(self.survival(), initial=1.0))
        rates = [n / cost for n, cost in zip(tokens, costs)]
        best = fastest(rates, range(self.most + 1))
        k, why = best, "best"
        if best:
            self.wait = self.rules.explore_every
            if self.rounds - self.explored_at >= self.rules.explore_every:
                up = self.explorations % 2 == 0 or best == 1
                k, why = (best + 1 if up and best < self.most else best - 1), "explore"
                self.explored_at, self.explorations = self.rounds, self.explorations + 1
                if not self.one_token.values and rates[best] < self.rules.time_below:
                    k, why, self.timing = 0, "time", True  # priced by a calibration alone
        else:
            self.explored_at = self.rounds
            if (not self.guessing or not self.whole) and self.idle >= self.wait:
                # Four times as long each time: a try costs 1-1.5 plain steps where
                # every k loses (docs/auto-k.md), so two in a 128-token run, not four.
                k, why = fastest(rates, range(1, self.most + 1)), "try"
                self.wait, self.idle = 4 * self.wait, 0
        choice = LengthChoice("auto", k, why, tokens[k], costs[k])
        self.standing = choice if k == 0 and why == "best" else None
        return choice


def fastest(rates: list[float], ks: range) -> int:
    """The k in ``ks`` with the highest rate; the smaller one on a tie."""
    return max(ks, key=lambda k: (rates[k], -k))
