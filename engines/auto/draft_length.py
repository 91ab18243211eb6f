"""How many tokens to draft each round: a fixed k, or ``auto``, chosen round by round.

``auto`` first drafts ``START`` tokens for ``TRIALS`` rounds, to see some drafts judged
(with the draft model's guesses, from one draft, doubled after each try kept whole).
Then it keeps, per draft position, how often a draft there survived once every draft
before it had, and the measured seconds of a draft step, of a one-token pass and of a
verify pass of each length it has run. Before each round it asks ``engines.cost_model``
what every k from 0 to its most would give, ``E(k) / C(k)`` tokens per one-token pass,
and picks the best: 0 (a plain step) when no k pays for itself. Positions and lengths it
has not tried are priced from what it has (the acceptance pooled over positions; the
cost model's straight line through the nearest length measured); a k is not the best
while few rounds have judged the positions before its last (``BEST_REACHED``). Every
eighth round it tries a neighbour of the best k instead (one more draft, one fewer;
never a lone plain step, which teaches nothing), and every 32nd the best drafting k
while it stands at 0, so that a prediction which went wrong can recover (the tries from
plain steps within a budget, charged the slow plain steps each leaves behind:
``IDLE_SHARE``).
It stands at 0 only once the drafts judged rule out a k that pays (``OPTIMISM``): a few
rejections at a text's hard start are not enough; what that hope may cost a run is
bounded (``HOPE_BUDGET``). While it drafts, the same doubt of the positions past its k
sends it deeper at once, from the same budget (charged against the best k's rate), from
a k whose rounds keep half a draft or more (``HOPE_KEPT``); hope reaches one position
past the deepest judged, or any k once drafts are judged half the most deep
(``HOPE_ANY``). At
temperature 0 a draft model needs neither the exploring rounds nor the hope while it
stands at 0: every ``GUESS_EVERY`` plain steps (less often while they keep it there) it
catches up with its output layer on each token they produced, and its greedy guess at
each is judged as a drafting round there would have judged it (``observe_guesses``),
for a fraction of a plain step. After a round that kept all its k drafts, its guess at
the target's token after them (one more row of the output layer in its next first
step) judges position k + 1 as a round of one more draft would have
(``observe_bonus``). With those guesses it also keeps which output tokens the draft
guessed right (``engines.right_guesses``): once the counts say drafting pays, it drafts
only if some k's rounds replayed over the latest of them pay (``PAYS_WINDOW``), and
picks among the drafting k by that replay, which sees
where each k's rounds start (a repeating text, one guess wrong a period: k = 4 alternates
between keeping four and starting on the wrong guess, k = 5 keeps five every round).
The acceptance counts fade over a few dozen rounds: the text changes (a copied block,
then prose) and so does what pays. Costs are medians of the last few rounds of each
kind, which one slow round on a busy machine barely moves; the first round, run cold,
is left out of them.

With this machine's calibration of the model pair (``specdeck calibrate``, cached) it
need not time anything first: it drafts from the first round, pricing every length and
the draft step from the calibration (in plain steps) until its own run has timed them.
Its own timings then win, in one-token passes, and correct the lengths it has not timed.
A plain step is priced by the calibration scaled to this run's speed by the verify
passes it has timed, until it runs plain steps (one between two others is timed, as
plain decoding runs them); while no drafting k is predicted well clear of a plain step
(``TRUST_CALIBRATION``) it runs three to time one before it chooses.

Where no k could pay even were every draft kept (a draft step about as dear as a
plain step), it ends its tries and judges no guesses: what they judge cannot change
that, and each judging costs the run what no draft wins back.

A choice is made while the previous round's drafts compute, from the rounds before
that: it is one round late, and overlaps the loop's work where the models run on a GPU;
on a CPU it shares the cores with them (``bench/auto_replay.py`` times it).
"""

from __future__ import annotations

import math
from collections import deque
from itertools import accumulate
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from specdeck.engines.measure.calibration import Calibration
from specdeck.engines.core.config import AUTO, MAX_DRAFT_TOKENS, DecodeSettings
from specdeck.engines.core.cost_model import CostModel
from specdeck.engines.core.events import Round
from specdeck.engines.core.formatting import times
from specdeck.engines.auto.right_guesses import RightGuesses
from specdeck.engines.core.stats import median

#: Rounds over which the acceptance counts fade (an exponential window).
WINDOW = 32
#: Costs are the median of this many recent measurements of each kind.
RECENT = 15
#: Every this many rounds one explores a neighbour of the best k; while the best is a
#: plain step, a try at drafting costs more than a neighbour does, so less often.
EXPLORE_EVERY = 8
EXPLORE_IDLE = 32
#: What the rounds that try drafting from plain steps (explorations, and hopeful rounds
#: where no guesses are judged) may cost: ``IDLE_FLOOR`` plain steps, and a share of
#: the plain steps run. Each is charged what its round lost and what it left to the
#: plain steps after it (``LEFT_STEPS``); the next waits until the budget covers them. On
#: the demo's MTP head, where every depth loses, one such round of one draft cost about
#: 1.5 plain steps (0.3 its own, 1.15 the step after it; with OpenBLAS on two threads
#: the next dozen ran 10-20 % slow too, but specdeck runs a small target on one:
#: ``engines.blas_threads``). A try that gained pays back what earlier ones lost but
#: banks nothing (``_spend_idle``).
#: Replayed at that head's costs (``bench/auto_replay.py --drafter mtp --blind
#: --round-work 0.33 --linger ...``, the draft's guesses for its drafts, 20 seeds, 24
#: prompts): where every k loses auto 0.863-0.892x of plain -> 0.879-0.907x at 128
#: tokens, 0.893-0.911x -> 0.920-0.934x at 256; of the best fixed k 0.935 -> 0.942 and
#: 0.974 -> 0.982 on average (with no floor, where every k loses 0.925-0.930x, but where
#: a text's hard start hides what drafting gains 0.77-0.82 of the best fixed k). That
#: replay stood the draft's guesses in for the head's drafts; on the head's own, none
#: where the calibration says ordinary text loses (``AdaptiveLength.typical_loses``).
IDLE_FLOOR, IDLE_SHARE = 3.0, 0.02
#: Where typical text loses (``AdaptiveLength.typical_loses``: no floor, no hope), a try
#: from plain steps runs only once the budget covers what it is predicted to lose, its
#: round priced as any other plus ``LEFT_PRICE`` plain steps for what it leaves to the
#: plain step after it (on the demo's MTP head 1.2-2.3), not once the budget is merely
#: positive: the first try had run at round 32 whatever it cost, one round of three
#: drafts and the step after it about four plain steps, 3 % of a 128-token run. And a
#: try that kept every draft is followed by another at once (``follow_try``): tries
#: ``EXPLORE_IDLE`` rounds apart judge each position too seldom for the faded counts to
#: reach ``BEST_REACHED``, and with no hope to try the k past one they could never lead
#: back to drafting (a list of imports, which the demo's head drafts right 99 % of the
#: time and where k = 6 runs 1.38x: auto stayed at plain steps).
#: Replayed (``bench/auto_replay.py --drafter mtp``, 10 seeds, 128 / 256 tokens): where
#: every k loses auto 0.963-0.975x of plain -> 0.964-0.984x and 0.967-0.975x ->
#: 0.978-0.983x; on the imports 0.996x -> 1.055x and 1.009x -> 1.226x. Pricing the step
#: after at nothing, the imports reach 1.19x at 128 tokens but typical text falls to
#: 0.957x; at two plain steps no try runs in 128 tokens (0.998x on all).
LEFT_PRICE = 1.0
#: The k tried first, once a one-token pass has been timed (or a calibration gives the
#: costs), for the first ``TRIALS`` drafting rounds: no choice is made before a few
#: drafts have been judged, or a run would sit at plain steps on the prior alone. Four,
#: not three: the demo's code and prose prompts keep nothing of their first three
#: (a text's hard start), and with three tries auto sat at plain steps there (0.92x
#: and 0.91x of plain against 1.12x and 1.15x with four, 9 interleaved repetitions).
START, TRIALS = 2, 4
#: With the draft model's guesses judged (``observe_bonus``: a round that kept all its
#: k drafts judges position k + 1 too), the tries start at ``GUESSED_START`` drafts and
#: double after one kept whole, as TCP's slow start does (and halve after one that was
#: not, as its fast recovery does), and go on past ``TRIALS``, up to
#: ``TRIALS_MOST``, while the next try is deeper than ``GUESSED_START``: where the first
#: draft is rejected a try costs a round of one draft, not two, for the same positions
#: judged, and copied text is seen keeping deep drafts before the first choice. Halving,
#: not starting over: one wrong guess in a copied text (a held-out demo prompt, a
#: BankAccount class: 1 wrong in its first 145 tokens, at the fifth try's fourth draft)
#: had ended the tries at one draft, and auto climbed to k = 16 a position or two per
#: hopeful round (0.85 and 0.90 of k = 16 at 128 and 256 tokens); replayed, the demo
#: +0.5..+0.8 % on average on 24 prompts (no prompt lower), +1.5..+2.5 % on 8 more;
#: smollm2 unchanged (its tries are of one draft). Replayed against four tries of two drafts
#: (``bench/auto_replay.py``, 20 seeds, 18 prompts, 8 of them held out from the choice):
#: +0.1..+1.8 % on average at 128 and 256 tokens on both families, at this CPU's costs
#: and at a Mac's; see "Slow start" in docs/auto-k.md. (Without the guesses a try of one
#: draft judges one position: after a hard start auto sat at plain steps where only a
#: long k pays.)
GUESSED_START, TRIALS_MOST = 1, 8
#: The first tries where, priced by the calibration, plain steps beat every k at the
#: drafter's survival on ordinary text (``Calibration.guess_survival``), and the draft's
#: guesses over plain steps are judged: two rounds (the loop's first choice serves both),
#: as those guesses judge drafts for a fraction of a plain step and four tries of one
#: draft cost such a pair up to 1.9 plain steps (smollm2 here), most of what auto lost
#: where every k loses (1.3-4.1 % of a 128-token run). Replayed on smollm2 at this CPU's costs (32 % of guesses right; 20 seeds):
#: +0.42 % at 128 tokens and +0.20 % at 256 on 24 prompts (worst thanks -1.5 %), +0.49
#: and +0.33 % on 8 written after (worst -0.3 %), within 5 % on all, as before; the
#: demo pair and smollm2 at a Mac's costs (k = 1 beats plain there) unchanged.
PLAIN_TRIALS = 2
#: How many observations' worth the pooled acceptance weighs in at each position.
PRIOR_WEIGHT = 2.0
#: Standard errors above its estimate that each position's acceptance may be before
#: ``auto`` gives up drafting for plain steps: a few drafts rejected at a text's hard
#: start (the demo's code prompt: 1 of 4 kept, then 70 %) must not make it sit at plain
#: steps for the rest of a text its drafter predicts well. That doubt is reckoned on the
#: whole run's drafts (unfaded counts), so it is spent early in a run: a pair whose
#: drafts do not pay soon stops paying for it, and a long stretch of plain steps is
#: left to the regular explorations.
OPTIMISM = 1.5
#: What hoping may cost a run, in plain steps: the sum over its hopeful rounds, as each
#: is timed, of what it fell short of plain steps (or, while drafting, of the best k's
#: predicted rate) by; a round that beat that rate gives back what it gained, up to one
#: budget's credit: hopeful rounds that paid in a copied stretch had banked so much that
#: auto hoped on at k = 11-15 after the text changed, keeping 0-5 a round (a held-out
#: demo prompt, replayed at 256 tokens; capped, the demo's queue prompt gained 6 % and
#: sql 3 %, picnic lost 1.6 %). A hopeful
#: round rejected at its first draft judges none of the deeper positions whose doubt it
#: hoped on, so that doubt never shrinks: without a bound auto hoped round after round
#: where the first draft is often rejected. Charged what each was predicted to lose
#: instead, a run whose estimates flattered the deeper k (lucky first tries) hoped on
#: while its rounds kept nothing: smollm2's config prompt, replayed on its recorded
#: acceptance, ran eight hopeful rounds of four drafts in a row, none kept.
HOPE_BUDGET = 2.0
#: What a round past the best k would gain is a gamble, and for some pairs a poor one:
#: where on ordinary text (the calibration's ``guess_survival``) every k past one is
#: predicted this much slower than plain steps or k = 1, hope is not spent at all (a
#: margin, as the calibration and a short probe can be off: a pair on the edge keeps
#: it). Replayed (``bench/auto_replay.py``, 20 seeds, 24 prompts, 22 of them other than
#: the two the survival is judged on): smollm2, whose 135M target and two-layer draft
#: agree on about a third of tokens, at this CPU's costs +0.65 % on average at 128
#: tokens and +0.40 % at 256 (apology +2.7 %, timer +2.1 %, lower nowhere), within 5 %
#: of the best fixed k on 24 prompts of 24 (22 and 23 before); at a Mac's costs, where
#: k = 2 comes within 10 % of k = 1, unchanged; the demo pair, whose best k on ordinary
#: text is 4, unchanged (without hope it lost 5 % there).
HOPELESS = 0.9
#: Hope while drafting only from a k whose rounds are predicted to keep at least this
#: many drafts: a hopeful round judges the positions past the best k only when all of
#: the best k's drafts are kept, so from k = 1 kept in 30-45 % of rounds (smollm2) most
#: hopeful rounds judged nothing deeper. Replayed on smollm2 (128 tokens, 20 seeds a
#: prompt): +0.4..+1.5 % on 9 of 11 prompts, stack -0.7 %; the demo, where the best k
#: keeps more, unchanged.
HOPE_KEPT = 0.5
#: Hope reaches one position past the deepest judged, until drafts have been judged
#: this share of the most drafts deep: then, with no hopeful round in flight, any k.
#: A verify pass's cost need not grow evenly with its length (this CPU's calibration:
#: a pass of 13 tokens 0.25 plain steps above one of 12, of 17 only 0.07 above 16), so
#: a climb one position at a time can stop at a k the next few do not beat (the demo's
#: copied letter stood at k = 10-11, 0.93 of k = 16); one such round at a time, as two
#: of 16 drafts in flight on a text that turned lost 9 plain steps (the demo's queue).
#: Replayed (20 seeds): the demo +0.9..+1.5 % on average on 24 prompts (within 5 % of
#: the best fixed k on 19 -> 20, 22 -> 24 of them at this CPU's costs), +1.0..+1.3 % on 8
#: written after it; smollm2 within 0.03 %. 0.25 lost 0.5-7 %; 0.375-0.625 within 0.7 %.
#: See "Hope past the next position" in docs/auto-k.md.
HOPE_ANY = 0.5
#: At temperature 0, while it stands at plain steps, the draft model's greedy guesses
#: over every this many plain steps' tokens are judged (``observe_guesses``); each
#: judging that leaves it at plain steps doubles the wait, up to ``GUESS_MOST``: a
#: judging costs about a draft step and 0.0035 plain steps a token on smollm2 (8 guesses
#: 24 ms, 32 guesses 33 ms, a plain step 150 ms), little above the catch-up (30 ms for
#: 32 tokens) a drafting round after them would run anyway, and a drafting round chosen
#: brings the wait back to ``GUESS_EVERY``.
GUESS_EVERY, GUESS_MOST = 8, 32
#: A k is the best only while every position before its last has this many rounds' worth
#: of the faded counts of rounds that reached it (``reached``: three rounds at the least,
#: as two fade under it): positions past those are priced mostly by the
#: acceptance pooled over positions, and the best of several such guesses is the
#: luckiest. Replayed on smollm2 (128 tokens, 20 seeds a prompt), after two lucky first
#: tries auto chose k = 4-5 as the best on one or two judged drafts there (timer: 5:1,
#: 5:0, 4:1, 4:0, ...) where k = 1 wins; with this bound it gained +0.5..+1.6 % there
#: (timer, stack, moving) and +1.7..+3.9 % on the demo's stack and csv and a held-out
#: refund email; it lost 1.7 % on one held-out demo prompt (merge) and 0.4 % on the demo's
#: queue, and at 256 tokens nowhere over 0.2 %. Hopeful rounds, explorations and the
#: guess after a round kept whole judge the positions past it.
BEST_REACHED = 2.0
#: Without a plain step timed in this run, a drafting k predicted this many times faster
#: than one is chosen on the calibration's plain step (scaled to the run by the verify
#: passes timed); below it three plain steps are run to time one first, as a plain step
#: off by a quarter could flip the choice (seen: smollm2's config on a busy VM, priced
#: by the calibration alone, drafted k = 2 in all 68 rounds at 25 % acceptance, 0.77x of
#: plain). Timing one after every run's first tries cost four plain steps where a deep k
#: pays: replayed at a Mac's costs (``bench/auto_replay.py --costs 0.15,0.06``), the
#: demo's copyable prompts gained up to 14 % at 128 tokens without them (moving: 2.67 ->
#: 3.04x), one lost 3 % (sky); smollm2 moved -0.9..+1.5 % there, and not at all at this
#: CPU's costs, where no k is predicted that far ahead.
TRUST_CALIBRATION = 1.25
#: One-token passes timed before their median stands alone where the choice hangs on
#: it (below ``TRUST_CALIBRATION``). On the demo's MTP head the first plain stretch gave
#: two (13.8 and 19.6 ms against plain's 14.1): priced by their 16.7, every round looked
#: 18 % cheaper than it was, and auto drafted the rest of the run (0.70-0.90x plain).
TIMED_MIN = 3
#: Drafting rounds after which the one-token pass, last timed before them, is timed
#: anew where the choice hangs on it: this VM's speed drifts 10-40 % within a run, and a
#: price gone stale let auto draft 54 rounds predicted at 1.2x and run at 0.6x.
RETIME_EVERY = 32
#: The plain steps after a drafting round that still run slow, charged above a
#: one-token pass to a hopeful round's or an exploration's budget (the first also to
#: the round's cost: ``_charge_left``). On the demo's MTP head, stretches of 40 plain
#: steps after eight rounds of one draft, against plain steps in runs of nothing else
#: (5 runs, OpenBLAS on one thread as specdeck runs the demo): 2.15, 1.0, 1.03, 1.0,
#: 0.98, ... (on two threads: 2.6, 1.24, 1.26, 1.17, ... 1.0 from the 16th).
LEFT_STEPS = 2
#: While ``auto`` stands at plain steps, the prices of every k are made anew only every
#: this many rounds: between drafting rounds nothing but the one-token pass's median
#: moves them, and pricing 17 k was most of a choice, which on a CPU runs on the decode
#: loop's critical path: on the demo's MTP head where every depth loses, choosing took
#: 12.5 ms of a 128-token run of about 600 ms (0.1 ms a round, 2 %), 5 ms after.
#: Replayed (``bench/auto_replay.py --drafter mtp``, 24 prompts, 10 seeds) every choice
#: came out the same, at 0.016 ms a round against 0.040. A drafting
#: round, a guess judged, or a one-token pass that moved by more than ``REPRICE_MOVE``
#: (timed anew, ``RETIME_EVERY``) prices them anew at once.
REPRICE, REPRICE_MOVE = 8, 0.05
#: A calibrated pass within this many plain steps above one is corrected by a shift,
#: not a ratio (``AdaptiveLength.calibrated``).
SHIFT_BELOW = 0.05
#: Drafting rounds the run times before it may find that no k could pay even were
#: every draft kept (``AdaptiveLength.could_pay``): the median of three, as one slow
#: round would otherwise end drafting for good.
RULE_OUT = 3
#: Drafting pays only while some k's rounds, replayed over this many of the latest
#: tokens or over half as many, bring more than they cost (``engines.right_guesses``).
#: The counts per position alone said it paid on a looping text where every k loses
#: (smollm2 wrote a checklist whose every seven tokens the draft guessed three right in
#: a row: judged from every token, the first position looked right 3 times in 7, but
#: k = 3's rounds start on a wrong guess 3 times in 4; auto drafted at 0.945 of plain).
#: Fewer tokens than the replay that picks among the k (``right_guesses.WINDOW``), and
#: the half too: after a stretch of plain steps, a text that turned copyable fills the
#: half within the 32 rounds over which the counts turn (over 64 tokens alone, auto
#: drafted again 20 rounds later; the wrong stretch's many short rounds outweigh the
#: few long ones). Replayed (20 seeds): smollm2 at this CPU's costs +0.03..+0.04 % on
#: 24 prompts, +0.14..+0.22 % on 30 written after them (that checklist +1.8..+3.0 %,
#: within 5 % of the best on all 30, 28-29 before), at a Mac's costs -0.09..+0.01 %;
#: the demo pair within 0.02 %.
PAYS_WINDOW = 64


@dataclass(frozen=True, slots=True)
class LengthChoice:
    """How many drafts a round asks for and, for ``auto``, why."""

    k: int
    #: ``E(k)``: the tokens the choice expects from the round, and ``C(k)``: what the
    #: round costs, in one-token passes (None: a fixed k, or nothing measured yet).
    tokens: float | None = None
    cost: float | None = None
    #: Not the best k predicted: a neighbour of it, tried to keep the measurements
    #: fresh, or (``hoped``) a deeper k that too few judged drafts rule out.
    explored: bool = False
    #: A hopeful round (``HOPE_BUDGET``), not one of the regular explorations.
    hoped: bool = False
    #: A deeper k predicted faster than ``k`` and not chosen, as too few rounds have
    #: judged the positions before its last (``BEST_REACHED``); None when none was.
    held: int | None = None
    #: A plain step because no k could beat one even were every draft kept
    #: (``AdaptiveLength.could_pay``), not only because none was predicted to.
    ruled_out: bool = False


class DraftLength(Protocol):
    """Chooses the drafts of the next round and learns from each round run."""

    def choose(self) -> LengthChoice: ...

    def observe(self, event: Round) -> None: ...


@runtime_checkable
class LearnsFromGuesses(Protocol):
    """A policy that learns from the draft's greedy guesses over plain steps' tokens."""

    def expect_guesses(self) -> None: ...

    def guess_after(self) -> int | None: ...

    def observe_guesses(self, matches: list[bool]) -> None: ...

    def observe_bonus(self, drafts: int, right: bool) -> None: ...


class FixedLength:
    """The same k every round."""

    def __init__(self, k: int) -> None:
        self.choice = LengthChoice(k)

    def choose(self) -> LengthChoice:
        return self.choice

    def observe(self, event: Round) -> None:
        pass


class RecentMedian:
    """The median of the last ``RECENT`` values: one slow round (another process took
    the CPU, a buffer was allocated) barely moves it, and it follows a lasting change
    within a few rounds."""

    __slots__ = ("values", "value")

    def __init__(self) -> None:
        self.values: deque[float] = deque(maxlen=RECENT)
        self.value = 0.0

    def add(self, x: float) -> None:
        self.values.append(x)
        self.value = median(list(self.values))

    def charge(self, extra: float) -> None:
        """The latest value was ``extra`` seconds more (or less) than it seemed."""
        self.values[-1] += extra
        self.value = median(list(self.values))

    @property
    def count(self) -> int:
        return len(self.values)


class AdaptiveLength:
    """``auto``: each round's k from the acceptance and costs measured so far."""

    def __init__(self, most: int,
                 prior: tuple[float, tuple[float, ...]] | None = None,
                 typical: tuple[float, ...] | None = None) -> None:
        self.most = most
        #: A calibration's draft step and verify passes of 1, 2, ... tokens, in plain
        #: steps (``Calibration.drafting_costs``); None: price only what the run timed.
        self.prior = prior if prior is None or len(prior[1]) > most else None
        #: Plain steps hope may lose (``HOPE_BUDGET``): none where, priced by the
        #: calibration, every k past one is ``HOPELESS`` at the drafter's ``typical``
        #: survival on ordinary text (``Calibration.typical_survival``).
        self.hope_budget = hope_budget(most, self.prior, typical)
        #: Whether plain steps beat every k at that survival (``PLAIN_TRIALS``).
        self.plain_typical = max(typical_speeds(most, self.prior, typical) or (1.0,)) < 1.0
        #: And every k past one by ``HOPELESS`` too. Where no guesses are judged (an
        #: MTP head; a draft model at temperature > 0), ``auto`` then starts at plain
        #: steps with no tries, and the rounds trying drafting from them get no
        #: ``IDLE_FLOOR``, only ``IDLE_SHARE`` of the plain steps run (and no hope:
        #: ``HOPELESS``). The demo's MTP head on this CPU: its drafts on the built-in
        #: prompts survive 71 % 32 % 10 %, k = 1 0.83x, k = 2 0.80x, and the plain step
        #: after each round runs 2.5 plain steps. Replayed on that head's own drafts
        #: (``bench/auto_replay.py --drafter mtp``, 20 seeds, 24 prompts, every k losing
        #: on all of them): auto 0.898-0.915x of plain -> 0.962-0.973x at 128 tokens,
        #: 0.935-0.948x -> 0.969-0.973x at 256; on 8 prompts written to be easy to
        #: predict (a copied paragraph, counting, a table, an enum) the same where every
        #: k loses, but on the one where k = 3 pays 1.30x, after a hard start, 1.04x ->
        #: 0.98x: text like that is what the tries were for, and typical text is not.
        self.typical_loses = self.plain_typical and not self.hope_budget
        #: What the acceptance pooled over positions starts from before any draft is
        #: judged (``PRIOR_WEIGHT`` rounds' worth, ``survival``): the drafter's first
        #: position on ordinary text where the calibration judged it, else one in two.
        #: With no tries (``typical_loses``) the first choices rest on it alone: from
        #: one in two, a head whose first draft survives 20 % of ordinary text drafted
        #: its first round where a round of one draft cost 1.4 plain steps. Replayed
        #: (20 seeds, 24 prompts, 128 tokens): the demo's MTP head +0.2 % where every k
        #: loses, the demo pair +0.3 % of the best fixed k (22 -> 23 within 5 %),
        #: smollm2 +0.2 %; at a Mac's costs the demo pair and smollm2 within +0.1 %, the
        #: MTP head +0.4 % (lowest 0.862 -> 0.854).
        self.first_rate = typical[0] if typical else 0.5
        #: Per position: faded counts of drafting rounds that reached it (every draft
        #: before it accepted) and of those that kept it.
        self.reached = [0.0] * most
        self.kept = [0.0] * most
        #: Per position: drafting rounds that reached it and that kept it, over the
        #: whole run (unfaded).
        self.judged = [0] * most
        self.kept_all = [0] * most
        self.one_token = RecentMedian()
        #: The round the one-token pass was last timed in (``RETIME_EVERY``).
        self.timed_at = 0
        #: The seconds of the last three plain steps since the last drafting round (a
        #: stretch of thousands keeps three). A plain step followed by another queues it
        #: before reading its own token, so a stretch's first step runs on into the
        #: second and its last, queued behind nothing, is short (measured on smollm2:
        #: 92, 48, 48, ..., 8 ms): only the steps between are timed, as plain decoding
        #: runs them. A plain step between two drafting rounds is queued behind nothing
        #: and costs more (130 against 113 ms on smollm2): priced by it, every drafting
        #: round looked 15 % cheaper than it is, and auto drafted at 20 % acceptance
        #: where every k loses.
        self.stretch: deque[float] = deque(maxlen=3)
        self.draft_step = RecentMedian()
        #: Verify pass seconds by drafts verified (1..most), and whole rounds' seconds
        #: (drafting, verifying and the loop's own work) by drafts.
        self.verify: dict[int, RecentMedian] = {}
        self.totals: dict[int, RecentMedian] = {}
        self.rounds = self.explored_at = self.explorations = self.drafting_rounds = 0
        #: Plain steps run, and what the rounds trying drafting from them cost
        #: (``IDLE_SHARE``); for each exploring or hopeful round chosen and not yet
        #: observed, whether it was one.
        self.plain_steps = 0
        self.idle_spent = 0.0
        self.idling: deque[bool] = deque()
        #: Whether the latest round trying drafting from plain steps kept every draft:
        #: the next choice tries again at once (``LEFT_PRICE``).
        self.follow_try = False
        #: The k of the last choice: the loop runs it while the next choice is made
        #: (``engines.speculative``), so a drafting choice is a round in flight.
        self.in_flight = 0
        #: Plain steps the hopeful rounds run so far lost (``HOPE_BUDGET``), and, for
        #: each hopeful round chosen and not yet observed, the best k's predicted
        #: rate (one-token passes per token) it is measured against.
        self.hope_spent = 0.0
        self.hoping: deque[float] = deque()
        #: Whether its first tries have all run (a plain step after them does not
        #: make the count of drafting rounds fall short again).
        self.tried = False
        #: Plain steps' tokens to wait for before the next guesses are judged (None:
        #: none judged, as no k could pay even with every draft kept).
        self.guess_wait: int | None = GUESS_EVERY
        #: The drafts of the next try (``TRIALS``; ``GUESSED_START``).
        self.next_try = START
        #: With the guesses: which output tokens the draft guessed right, replayed as
        #: each k's rounds would have run over them for its expected tokens.
        self.right: RightGuesses | None = None
        #: The drafts of the latest drafting round and whether it was hopeful or an
        #: exploration from plain steps, while the plain steps after it still run what
        #: it left (``_charge_left``).
        self.left_by: tuple[int, bool, bool] | None = None
        #: ``round_costs`` and the timings it priced them from.
        self._priced: tuple[tuple, list[float]] | None = None
        #: ``predictions`` (by optimism), the round they were made in and the one-token
        #: pass they were priced in, while only plain steps ran since (``REPRICE``).
        self._stood: tuple[int, float | None, dict[float, list[tuple[float, float]]]] | None \
            = None

    @property
    def guessed(self) -> bool:
        """Whether the draft's guesses over plain steps' tokens are judged: they make
        exploring and hopeful rounds from plain steps needless."""
        return self.right is not None

    def observe(self, event: Round) -> None:
        fade = 1.0 - 1.0 / WINDOW  # per round: a long stretch of plain steps forgets too
        self.reached = [n * fade for n in self.reached]
        self.kept = [n * fade for n in self.kept]
        drafted = len(event.drafted)
        # A round chosen to try drafting from plain steps (prompt lookup may find
        # nothing to draft in it).
        idle = event.auto_explored and bool(self.idling) and self.idling.popleft()
        if self.right is not None:
            if drafted:
                self.right.round(drafted, event.accepted)
            else:
                self.right.plain_step()
        if not drafted:
            self.plain_steps += 1
            if event.index:  # the first round runs cold: its time says little
                self._charge_left(event)
                self.stretch.append(event.seconds)
                if len(self.stretch) > 2:  # the one before sat between two: steady
                    self.one_token.add(self.stretch[-2])
                    self.timed_at = self.rounds
            return
        self._stood = None
        self.stretch.clear()
        self.drafting_rounds += 1
        self.follow_try = idle and self.typical_loses and event.accepted == drafted
        if self.guessed and not self.tried:
            self.next_try = (2 * drafted if event.accepted == drafted
                             else max(GUESSED_START, drafted // 2))
        if event.auto_hoped and self.hoping:
            self._charge_hope(event, self.hoping.popleft())
        if idle and (unit := self.unit()):
            self._spend_idle(event.seconds / unit - len(event.tokens))
        self._judge([i < event.accepted for i in range(min(event.accepted + 1, drafted))], 0)
        if event.index:
            self.draft_step.add(event.draft_seconds / drafted)
            self.verify.setdefault(drafted, RecentMedian()).add(event.verify_seconds)
            self.totals.setdefault(drafted, RecentMedian()).add(event.seconds)
            self.left_by = (drafted, event.auto_hoped, idle)

    def _charge_left(self, event: Round) -> None:
        """A plain step right after a drafting round runs what that round left behind
        (its record, the rollback of its rejected drafts, the loop's work on it: on the
        demo's MTP head 15-24 ms against 7-10 ms between two plain steps): what it took
        over a one-token pass is that round's cost, not the plain step's; what it and the
        next (``LEFT_STEPS``) took over one is what a hopeful round or one trying drafting
        from plain steps cost its budget, too."""
        unit = self.unit()
        if self.left_by is None or not unit:
            return
        drafted, hoped, idle = self.left_by
        if len(self.stretch) >= LEFT_STEPS:
            self.left_by = None
            return
        if not self.stretch:
            self.totals[drafted].charge(event.seconds - unit)
        lost = event.seconds / unit - 1.0
        if hoped:  # what hoping cost includes it (``HOPE_BUDGET``)
            self._spend_hope(lost)
        if idle:
            self._spend_idle(lost)

    def _spend_idle(self, lost: float) -> None:
        """Plain steps a try from plain steps lost; one that gained pays back earlier
        losses but banks nothing: on the MTP head two lucky rounds of three drafts
        (1.7-1.9x) banked three plain steps, and the deeper tries they paid for lost
        seven."""
        self.idle_spent = max(0.0, self.idle_spent + lost)

    def _charge_hope(self, event: Round, rate: float) -> None:
        """What a hopeful round lost against ``rate``, as it ran."""
        unit = self.unit()
        if unit:
            self._spend_hope(event.seconds / unit - len(event.tokens) * rate)

    def _spend_hope(self, lost: float) -> None:
        """Plain steps a hopeful round lost (or, below zero, gained), banking at most
        one budget of credit."""
        self.hope_spent = max(-self.hope_budget, self.hope_spent + lost)

    def expect_guesses(self) -> None:
        """The loop will judge the draft's guesses over the plain steps' tokens: from
        the first plain step on, no round is run only to try drafting (without guesses,
        up to ``HOPE_BUDGET`` plain steps' worth of hopeful rounds: ten rounds of four
        drafts on smollm2's csv prompt, each about 0.7 plain steps short), and the first
        tries start from ``GUESSED_START`` drafts. Told before the first choice."""
        self.next_try = GUESSED_START
        self.right = RightGuesses()

    def guess_after(self) -> int | None:
        """How many plain steps' tokens the next guesses wait for; None: none are
        judged (no drafting round could pay for its cost)."""
        return self.guess_wait

    def observe_guesses(self, matches: list[bool]) -> None:
        """The draft's greedy guesses at consecutive tokens, each right or not: at
        temperature 0 a round drafting from any of those tokens would have kept the
        leading run of right guesses from there (up to the last guess judged). Plain
        steps thus measure the acceptance per position without a drafting round.

        Each token judges the first position, as a round from there would have. The
        deeper positions are judged only by the rounds of the deepest k that would have
        drafted these tokens one after another (each from the token after the previous
        one's first wrong guess): judged from every token, a run of n right guesses
        counted n rounds kept deep, and a copied stretch, where runs are long,
        outweighed the rest (smollm2's ``stack`` prompt, replayed: auto drew k = 7-15
        from one such stretch and kept 0-1 tokens a round for ten rounds)."""
        self.guess_wait = min(2 * self.guess_wait, GUESS_MOST)
        if self.right is not None:
            self.right.guesses(matches)
        deep = 0  # where the next of those rounds starts
        for start in range(len(matches)):
            judged = matches[start:start + (self.most if start == deep else 1)]
            self._judge(judged, 0)
            if start == deep:
                deep += next((i for i, right in enumerate(judged) if not right),
                             len(judged)) + 1

    def observe_bonus(self, drafts: int, right: bool) -> None:
        """The draft's greedy guess at the target's token after a round of ``drafts``,
        all kept: a round of one more draft would have kept that one or not, so the
        next position is judged without a round run to try it (the upward
        explorations only judged it when every draft before it was kept, too)."""
        self._judge([right], drafts)
        if self.right is not None:
            self.right.bonus(right)

    def _judge(self, matches: list[bool], depth: int) -> None:
        """Count right drafts (or guesses) in a row from position ``depth`` on, up to
        the first wrong one: what a drafting round's verdict counts, too."""
        self._stood = None
        for i, right in enumerate(matches[:self.most - depth], depth):
            self.reached[i] += 1.0
            self.judged[i] += 1
            if not right:
                break
            self.kept[i] += 1.0
            self.kept_all[i] += 1

    def survival(self, optimism: float = 0.0) -> list[float]:
        """``s_i`` for i = 1..most: the product of each position's conditional
        acceptance, drawn towards the acceptance pooled over positions where a position
        was reached rarely (the pooled one alone where never). With ``optimism``: on
        the whole run's counts, each that many standard errors higher."""
        reached_counts, kept_counts = (
            (self.judged, self.kept_all) if optimism else (self.reached, self.kept))
        pooled = ((sum(kept_counts) + PRIOR_WEIGHT * self.first_rate)
                  / (sum(reached_counts) + PRIOR_WEIGHT))
        survival, alive = [], 1.0
        for reached, kept in zip(reached_counts, kept_counts):
            weight = reached + PRIOR_WEIGHT
            rate = (kept + PRIOR_WEIGHT * pooled) / weight
            if optimism:
                rate = min(1.0, rate + optimism * math.sqrt(rate * (1.0 - rate) / weight))
            alive *= rate
            survival.append(alive)
        return survival

    def models(self, optimism: float = 0.0) -> dict[int, CostModel]:
        """A cost model per verify length measured, priced in one-token passes."""
        survival = self.survival(optimism)
        return {
            drafts: CostModel.measured(
                survival, drafts, self.draft_step.value, mean.value, self.one_token.value,
                "one-token passes",
            )
            for drafts, mean in self.verify.items()
        }

    def unit(self) -> float | None:
        """The seconds of a one-token pass on this run: timed, or (with a calibration and
        no plain step run yet) the verify passes timed over what the calibration says
        they cost in plain steps; None when neither is known."""
        if self.one_token.count:
            return self.one_token.value
        if self.prior is None or not self.verify:
            return None
        passes = self.prior[1]
        return median([mean.value / passes[drafts] for drafts, mean in self.verify.items()])

    def calibrated(self, optimism: float = 0.0) -> CostModel:
        """The cost model with a calibration: the run's timings where it has them, in
        one-token passes. A length the run has not timed keeps the calibration's
        shape, corrected by the lengths it has: what each pass costs above a plain
        step, over what the calibration said, scales the others' (a shift where the
        calibration's pass cost about one step), so one wrong calibration does not hold
        ``auto`` back from lengths it never tried; the corrections are blended by how
        often each length was timed and how near it is (``nearness``)."""
        assert self.prior is not None
        unit, (draft_step, passes) = self.unit(), self.prior
        if unit and self.draft_step.count:
            draft_step = self.draft_step.value / unit
        timed = {k: mean.value / unit for k, mean in self.verify.items()} if unit else {}

        def corrected(k: int, near: int) -> float:
            over = passes[near] - 1.0
            if over <= SHIFT_BELOW:
                return passes[k] + timed[near] - passes[near]
            return 1.0 + (passes[k] - 1.0) * max(0.0, timed[near] - 1.0) / over

        def verify(k: int) -> float:
            if k in timed or not timed:
                return timed.get(k, passes[k])
            return blend({n: corrected(k, n) for n in timed}, nearness(self.verify, k))

        costs = (1.0, *(verify(k) for k in range(1, self.most + 1)))
        return CostModel(tuple(self.survival(optimism)), float(self.most), draft_step,
                         costs[self.most], "one-token passes", verify_passes=costs)

    def predictions(self, optimism: float = 0.0) -> list[tuple[float, float]]:
        """``(E(k), C(k))`` for k = 0..most, in one-token passes: E from
        ``survival(optimism)``, C from ``round_costs``."""
        tokens = accumulate(self.survival(optimism), initial=1.0)
        return list(zip(tokens, self.round_costs()))

    def round_costs(self) -> list[float]:
        """``C(k)`` for k = 0..most, in one-token passes. A k the run has drafted costs
        what its rounds took as a whole; any other is priced by the calibration
        (``calibrated``) or, without one, by the model of the verify length measured
        nearest to it, shifted by what that model missed at the nearest k timed (the
        loop's own work each round, which a split into draft steps and a verify pass
        spreads over the drafts); with a calibration, what it missed at each k timed,
        blended by ``nearness``. Kept until the timings change: a choice prices the k
        twice (the estimates, then hope's), and choosing runs on the decode loop's
        critical path on a CPU."""
        unit = self.unit()
        timings = (unit, self.draft_step.value, self.draft_step.count,
                   *((k, mean.value, mean.count) for k, mean in self.verify.items()), None,
                   *((k, mean.value, mean.count) for k, mean in self.totals.items()))
        if self._priced is not None and self._priced[0] == timings:
            return self._priced[1]
        if self.prior is not None:
            calibrated = self.calibrated()
            priced = [calibrated.round_cost(k) for k in range(1, self.most + 1)]
        else:
            models = self.models()
            measured = sorted(models)
            priced = [models[min(measured, key=lambda n: (abs(n - k), n))].round_cost(k)
                      for k in range(1, self.most + 1)]
        timed = {k: mean.value / unit for k, mean in self.totals.items()} if unit else {}
        missed = {n: timed[n] - priced[n - 1] for n in timed}
        costs = [1.0]
        for k, cost in enumerate(priced, 1):
            if missed:
                weights = (nearness(self.totals, k) if self.prior is not None
                           else {min(missed, key=lambda n: (abs(n - k), n)): 1.0})
                cost += blend(missed, weights)
            costs.append(cost)
        self._priced = (timings, costs)
        return costs

    def standing_predictions(self, optimism: float = 0.0) -> list[tuple[float, float]]:
        """``predictions(optimism)``, kept for up to ``REPRICE`` rounds while no drafting
        round is in flight, no draft or guess was judged since they were made, and the
        one-token pass they are priced in moved by less than ``REPRICE_MOVE``."""
        unit = self.unit()
        if (self._stood is None or self.in_flight or self.rounds - self._stood[0] >= REPRICE
                or not unit or not self._stood[1]
                or abs(unit / self._stood[1] - 1.0) > REPRICE_MOVE):
            self._stood = (self.rounds, unit, {})
        made = self._stood[2]
        if optimism not in made:
            made[optimism] = self.predictions(optimism)
        return made[optimism]

    def could_pay(self, predicted: list[tuple[float, float]] | None = None) -> bool:
        """Whether drafting could beat a plain step were every draft kept: some k whose
        k + 1 tokens cost less than k + 1 one-token passes, priced as the choice prices
        rounds (``predicted``, else ``predictions``): by the calibration until the run
        times a drafting round, then by ``RULE_OUT`` of them at the least (always while
        neither prices one)."""
        timed = self.draft_step.count
        if (self.prior is None and not timed) or 0 < timed < RULE_OUT:
            return True
        if predicted is None:
            predicted = self.predictions()
        return any(cost < k + 1 for k, (_, cost) in enumerate(predicted) if k)

    def hope(self) -> int:
        """The k that would pay most were each position's acceptance ``OPTIMISM``
        standard errors higher, at most one position past the deepest judged (hope
        spent on positions no draft reaches would never run out) until half of the most
        drafts are judged (``HOPE_ANY``); the best k on the estimates once the drafts
        judged rule every deeper one out."""
        frontier = sum(1 for n in self.judged if n) + 1
        hopeful = [tokens / cost for tokens, cost in self.standing_predictions(OPTIMISM)]
        reach = frontier + 1
        if frontier >= HOPE_ANY * self.most and not self.hoping:
            reach = len(hopeful)
        return fastest(hopeful, range(min(len(hopeful), reach)))

    def choose(self) -> LengthChoice:
        choice = self._choose()
        self.in_flight = choice.k
        return choice

    def _choose(self) -> LengthChoice:
        self.rounds += 1
        if self.prior is None and not self.one_token.count:
            return LengthChoice(0)  # time a plain step first
        if not self.tried:
            tried = self.drafting_rounds + (self.in_flight > 0)
            growing = self.next_try > GUESSED_START and self.guessed and tried < TRIALS_MOST
            trials = PLAIN_TRIALS if self.plain_typical and self.guessed else TRIALS
            if self.typical_loses and not self.guessed:
                trials = 0  # ``typical_loses``
            if (tried < trials or growing) and self.could_pay():
                return LengthChoice(min(self.next_try, self.most))
            self.tried = tried >= trials
        predicted = self.standing_predictions()
        payable = self.could_pay(predicted)
        if not payable:
            # A draft as dear as the target (SmolLM2-135M drafting for itself: a draft
            # step 1.04-1.28 plain steps, k = 16 kept whole 0.84-0.91x): what its
            # guesses judge cannot make any k pay, and each judging is the draft reading
            # the latest tokens, as dear as the target reading them. Only a round timed
            # anew (an exploration, where no guesses are judged) can change that.
            self.guess_wait = None
        elif self.guess_wait is None:
            self.guess_wait = GUESS_EVERY
        speed = [tokens / cost for tokens, cost in predicted]
        if self.tried and max(speed) < TRUST_CALIBRATION:  # the choice may hang on it
            if self.one_token.count and self.rounds - self.timed_at >= RETIME_EVERY:
                self.one_token = RecentMedian()  # stale: timed anew, from nothing
            if self.one_token.count < TIMED_MIN:
                return LengthChoice(0)  # time plain steps
        trusted = sum(1 for n in self.reached if n >= BEST_REACHED)  # leading positions
        best = fastest(speed, range(min(len(speed), trusted + 2)))
        pays = True
        if best and self.right is not None:
            # Which k, once drafting pays: each k's rounds replayed over the latest
            # tokens (``engines.right_guesses``); and whether it pays after all, replayed
            # over fewer of them (``PAYS_WINDOW``).
            deepest = min(trusted + 1, self.most)
            drafting = range(1, deepest + 1)
            recent = (self.right.tokens_per_round(deepest, window)
                      for window in (PAYS_WINDOW // 2, PAYS_WINDOW))  # the cheaper first
            pays = any(tokens.get(k, predicted[k][0]) > predicted[k][1]
                       for tokens in recent for k in drafting)
            if not pays:
                best = 0
            else:
                replayed = self.right.tokens_per_round(deepest)
                predicted = [(replayed.get(k, tokens), cost)
                             for k, (tokens, cost) in enumerate(predicted)]
                speed = [tokens / cost for tokens, cost in predicted]
                best = fastest(speed, drafting)
        unbounded = fastest(speed, range(len(speed)))
        follow, self.follow_try = not best and self.follow_try, False
        k, explored, hoped = best, follow or self.rounds - self.explored_at >= (
            EXPLORE_EVERY if best else EXPLORE_IDLE), False
        floor = 0.0 if self.typical_loses else IDLE_FLOOR
        allowed = floor + IDLE_SHARE * self.plain_steps
        idle_affordable = self.idle_spent <= allowed
        trying = 0  # the k of a try from plain steps
        if explored and not best:
            trying = fastest(speed, range(1, len(speed)))
            explored = idle_affordable
            if self.typical_loses and not follow:
                lost = max(0.0, predicted[trying][1] - predicted[trying][0]) + LEFT_PRICE
                explored = self.idle_spent + lost <= allowed
        if best:
            self.guess_wait = GUESS_EVERY
        if best == 0 and self.guessed:
            explored = False  # the guesses judge drafts with no round run to try
        elif explored and best == 0:
            k = trying
        elif explored:
            up = self.explorations % 2 == 0 and best < self.most
            k = best + 1 if up else best - 1
            if not k:
                # One plain step between drafting rounds is not timed (only one between
                # two others is) and judges no draft: from k = 1 the turn down is
                # skipped (and counted). Replayed on smollm2, where k = 1 is often the
                # best: +0.5..+1 %.
                k = best
        elif self.hope_spent < self.hope_budget and (
                best or (not self.guessed and idle_affordable)) and (
                not best or predicted[best][0] - 1.0 >= HOPE_KEPT):
            k = max(best, self.hope())
            explored = hoped = k > best
            if hoped:
                self.hoping.append(predicted[best][1] / predicted[best][0])
        if explored:  # an exploring turn taken, or a hopeful round
            self.explored_at, self.explorations = self.rounds, self.explorations + 1
            explored = k != best
            if explored:
                self.idling.append(best == 0)
        tokens, cost = predicted[k]
        held = unbounded if pays and unbounded > max(best, k) else None
        return LengthChoice(k, tokens, cost, explored, hoped, held, k == 0 and not payable)


def nearness(timings: dict[int, RecentMedian], k: int) -> dict[int, float]:
    """How much what each timed length missed says of length ``k``: all of it for ``k``
    itself, else its count of timings over one plus its distance. A length timed twice
    (a pair of hopeful rounds) is a noisy median; corrected by the nearest length alone,
    one such pair 12 % slow priced every deeper k that much dearer and held auto at
    k = 9-10 on a copied text where k = 16 wins (a held-out demo prompt, replayed)."""
    if k in timings:
        return {k: 1.0}
    return {n: mean.count / (1 + abs(n - k)) for n, mean in timings.items()}


def blend(values: dict[int, float], weights: dict[int, float]) -> float:
    """The mean of ``values`` weighted by ``weights`` (the lengths both have)."""
    total = sum(weights[n] for n in values if n in weights)
    return sum(value * weights[n] for n, value in values.items() if n in weights) / total


def typical_speeds(most: int, prior: tuple[float, tuple[float, ...]] | None,
                   typical: tuple[float, ...] | None) -> tuple[float, ...] | None:
    """The speedup over plain steps of each k from 1 to ``most`` at the drafter's
    ``typical`` survival on ordinary text, priced by a calibration's draft step and
    verify passes (``prior``); None without either."""
    if not typical or prior is None or len(prior[1]) <= most:
        return None
    survival = tuple(typical[:most])
    model = CostModel(survival, float(len(survival)), prior[0], prior[1][len(survival)],
                      "plain steps", verify_passes=prior[1])
    return tuple(model.predicted(k) for k in range(1, len(survival) + 1))


def hope_budget(most: int, prior: tuple[float, tuple[float, ...]] | None,
                typical: tuple[float, ...] | None) -> float:
    """The plain steps ``auto`` may lose hoping (``HOPE_BUDGET``): none where, priced by
    a calibration's draft step and verify passes (``prior``), every k from 2 to ``most``
    is ``HOPELESS`` at the ``typical`` survival."""
    speeds = typical_speeds(most, prior, typical)
    if speeds and all(speed < HOPELESS * max(1.0, speeds[0]) for speed in speeds[1:]):
        return 0.0
    return HOPE_BUDGET


def fastest(rates: list[float], ks: range) -> int:
    """The k in ``ks`` with the highest rate; the smaller one on a tie."""
    return max(ks, key=lambda k: (rates[k], -k))


def draft_length(settings: DecodeSettings, drafter: str,
                 calibration: Calibration | None = None) -> DraftLength:
    """The policy a drafter (``draft``, ``mtp``, ``ngram``) runs under; ``auto`` starts
    from ``calibration``'s costs when this machine has one for the models."""
    count = settings.draft_count(drafter)
    if count != AUTO:
        return FixedLength(count)
    prior = calibration.drafting_costs(drafter) if calibration else None
    typical = calibration.typical_survival(drafter) if calibration else None
    return AdaptiveLength(settings.max_drafts(drafter), prior, typical)


def auto_estimate_line(calibration: Calibration, proposer: str, guesses: bool = True) -> str:
    """What ``auto`` takes from this machine's calibration, said before a run: how it
    starts, and what it would choose at one draft in two kept (``guesses``: whether a
    draft model's guesses are judged, as at temperature 0)."""
    policy = AdaptiveLength(MAX_DRAFT_TOKENS, calibration.drafting_costs(proposer),
                            calibration.typical_survival(proposer))
    if not policy.could_pay():
        return ("calibrated on this machine: no k pays here even with every draft kept, "
                "so auto starts at plain steps")
    if policy.typical_loses and not (guesses and proposer == "draft"):
        return ("calibrated on this machine: at what its drafts keep of the built-in "
                "prompts no k pays, so auto starts at plain steps, with no tries, and "
                "tries drafting from them now and then")
    k, speed = calibration.best_k(proposer, 0.5)
    then = f"k={k} (predicted {times(speed)} plain)" if k else "plain steps"
    return (f"calibrated on this machine: auto prices its rounds from it until the run "
            f"has timed its own; after its first tries it goes by the drafts judged "
            f"({then} at 50% acceptance)")


def choice_words(event: Round) -> str | None:
    """Why ``auto`` drafted what it did in ``event``, in a sentence; None for a fixed k."""
    if event.auto_k is None:
        return None
    drafts = f"{event.auto_k} draft{'' if event.auto_k == 1 else 's'}"
    if event.auto_tokens is None or event.auto_cost is None:
        if event.auto_k == 0:
            return ("auto chose a plain step: it times plain steps to price drafting "
                    "rounds against, before it chooses and again once a close choice has "
                    f"rested {RETIME_EVERY} rounds on an old timing")
        return (f"auto chose {drafts}: one of its first tries, before it chooses from the "
                "drafts they judge")
    why = ""
    if event.auto_hoped:
        why = ("; hoping: deeper than the best predicted, as too few drafts were judged "
               "there to rule it out (within a budget of plain steps it may lose)")
    elif event.auto_explored:
        why = "; exploring: a k other than the best predicted, to keep its estimates honest"
    elif event.auto_held and event.auto_k:
        why = (f"; not k={event.auto_held}, predicted faster: too few rounds have reached "
               "its deeper drafts to trust that")
    if event.auto_k == 0:
        if event.auto_ruled_out and not why:
            return ("auto chose a plain step: no k could pay for its cost even were every "
                    "draft kept, at the draft and verify costs measured so far")
        if event.auto_held and not why:
            return (f"auto chose a plain step: k={event.auto_held} was predicted to pay, "
                    "but too few rounds have reached its deeper drafts to trust that")
        return f"auto chose a plain step: no k was predicted to pay for its cost{why}"
    gain = event.auto_tokens / event.auto_cost
    return (f"auto chose {drafts}: expects {event.auto_tokens:.2f} tokens for "
            f"{event.auto_cost:.2f} one-token passes ({times(gain)} a plain step){why}"
            f"{cut_words(event)}")


def cut_words(event: Round) -> str:
    """Why a round drafted fewer than ``auto`` chose ("" when it drafted them all): the
    run's token limit, or a prompt lookup whose copied text ran out first."""
    drafted = len(event.drafted)
    if event.auto_k is None or not 0 < drafted < event.auto_k:
        return ""
    why = ("the copied text ran out (or the token limit was near)"
           if event.proposer == "ngram" else "the token limit left no room for more")
    return f"; {drafted} drafted: {why}"


def guess_words(event: Round) -> str | None:
    """What the draft's guesses judged after ``event`` showed, in a sentence; None when
    none were judged there."""
    if not event.guesses:
        return None
    n, right = len(event.guesses), sum(event.guesses)
    return (f"then auto judged the draft's guesses at the last {n} tokens: {right} right "
            f"({right / n:.0%}), as drafting rounds there would have, with none run")


def auto_summary(rounds: list[Round]) -> str | None:
    """What ``auto`` chose over a run, in a line; None when no round ran under it."""
    chosen = [r.auto_k for r in rounds if r.auto_k is not None]
    if not chosen:
        return None
    counts = {k: chosen.count(k) for k in sorted(set(chosen))}
    usual = max(counts, key=lambda k: (counts[k], -k))
    plain = counts.get(0, 0) / len(chosen)
    hoped = sum(r.auto_hoped for r in rounds)
    explored = sum(r.auto_explored for r in rounds) - hoped
    guesses = [right for r in rounds for right in r.guesses or ()]
    judged = (f"; {len(guesses)} of the draft's guesses judged at plain steps, "
              f"{sum(guesses) / len(guesses):.0%} right" if guesses else "")
    ruled = [r.index for r in rounds if r.auto_ruled_out]
    ruled_out = (f"; no k could pay even were every draft kept at {len(ruled)} plain "
                 f"step{'' if len(ruled) == 1 else 's'} (from round {ruled[0]})"
                 if ruled else "")
    return (f"auto drafted k = {min(counts)}..{max(counts)}, mostly {usual}; plain steps in "
            f"{plain:.0%} of rounds; {explored} exploring round{'' if explored == 1 else 's'}, "
            f"{hoped} hopeful{judged}{ruled_out}")
