"""``auto`` draft lengths (issue 18, item 1): the controller's choices on synthetic rounds,
and losslessness whatever sequence of k a run goes through (0 included)."""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import pytest

from specdeck.engines.proposers import draft
from specdeck.engines.proposers import mtp
from specdeck.engines.proposers import ngram
from specdeck.engines.auto import draft_length as draft_length_module
from specdeck.engines.core.config import (
    AUTO, DecodeSettings, Sampling, parse_draft_count,
)
from specdeck.engines.core.cost_model import CostModel
from specdeck.engines.auto.draft_length import (
    EXPLORE_EVERY, EXPLORE_IDLE, IDLE_FLOOR, IDLE_SHARE, GUESS_EVERY, GUESS_MOST, HOPE_BUDGET, HOPE_KEPT, GUESSED_START, LEFT_PRICE, PLAIN_TRIALS, REPRICE, RULE_OUT, RETIME_EVERY, START, TIMED_MIN, TRIALS, TRIALS_MOST, TRUST_CALIBRATION, WINDOW, AdaptiveLength, FixedLength, LengthChoice,
    choice_words, draft_length,
)
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.core.events import Round, Trace
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.proposers.mtp import load_mtp
from specdeck.engines.core.stats import compute_stats
from specdeck.engines.decode.run import Models, run_strategy
from helpers.lossless import lossless_pvalues
from helpers.auto import feed, made_calibration, synthetic

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return"
TOKENS = 40


def on_estimates(choice: LengthChoice) -> bool:
    """Whether ``choice`` was made on the estimates: not an exploration, nor a plain
    step to time the one-token pass."""
    return not choice.explored and choice.tokens is not None


def settled(choices: list[LengthChoice]) -> list[int]:
    """The k of the choices made after the start, explorations left out."""
    return [c.k for c in choices[16:] if not c.explored]


def test_a_first_plain_step_then_a_first_try() -> None:
    policy = AdaptiveLength(8)
    assert policy.choose() == LengthChoice(0)
    policy.observe(synthetic(0, 0, draft_step=0, verify=50.0, index=0))  # cold: not timed
    assert policy.choose() == LengthChoice(0)
    # Plain steps in a row share their time unevenly (each queues the next before
    # reading its own token): the first runs long, and only a step between two others
    # is timed as it ran.
    for i, seconds in enumerate((1.8, 1.0), 1):
        policy.observe(synthetic(0, 0, draft_step=0, verify=seconds, index=i))
        assert policy.choose() == LengthChoice(0)
    policy.observe(synthetic(0, 0, draft_step=0, verify=1.0, index=3))
    assert policy.choose().k == START and policy.choose().tokens is None
    assert policy.one_token.value == 1.0


def test_only_a_plain_step_between_two_others_is_timed() -> None:
    """A plain step is priced as plain decoding runs it, queued behind the one before:
    not by a lone plain step between drafting rounds (queued behind nothing, dearer),
    nor by a stretch's first (which ran on into the next) or last."""
    policy = AdaptiveLength(4)
    steps = [(0, 1.9), (0, 0.1), (2, 1.5), (0, 1.2), (2, 1.5), (0, 1.3), (0, 1.0), (0, 0.9),
             (0, 0.2), (2, 1.5)]
    for i, (k, seconds) in enumerate(steps, 1):
        policy.observe(synthetic(k, 1, draft_step=0.1, verify=seconds, index=i) if k else
                       synthetic(0, 0, draft_step=0, verify=seconds, index=i))
    assert list(policy.one_token.values) == [1.0, 0.9]


def test_a_plain_step_charges_the_drafting_round_before_it_what_it_left() -> None:
    """A plain step right after a drafting round runs what that round left behind (its
    record, its rollback): what it took over a one-token pass is charged to that
    round's cost; a plain step after a plain step charges nothing."""
    policy = AdaptiveLength(4)
    for i, seconds in enumerate((1.0, 1.0, 1.0, 1.0), 1):
        policy.observe(synthetic(0, 0, draft_step=0, verify=seconds, index=i))
    assert policy.one_token.value == 1.0
    policy.observe(synthetic(2, 1, draft_step=0.1, verify=1.3, index=5))
    assert policy.totals[2].value == pytest.approx(1.5)
    policy.observe(synthetic(0, 0, draft_step=0, verify=2.25, index=6))
    assert policy.totals[2].value == pytest.approx(2.75)
    policy.observe(synthetic(0, 0, draft_step=0, verify=2.0, index=7))
    assert policy.totals[2].value == pytest.approx(2.75)  # charged once
    # The verify pass and draft step are what they were: only the round's whole cost.
    assert policy.verify[2].value == pytest.approx(1.3)
    # A hopeful round's is charged to what hoping cost too (HOPE_BUDGET).
    hopeful = synthetic(1, 0, draft_step=0.1, verify=1.2, index=8)
    hopeful.auto_hoped = True
    policy.observe(hopeful)
    spent = policy.hope_spent
    policy.observe(synthetic(0, 0, draft_step=0, verify=1.75, index=9))
    assert policy.hope_spent == pytest.approx(spent + 0.75)


def test_one_slow_round_barely_moves_the_costs() -> None:
    policy = AdaptiveLength(4)
    for i, seconds in enumerate([1.0, 1.1, 0.9, 30.0, 1.0, 1.0], 1):
        policy.observe(synthetic(0, 0, draft_step=0, verify=seconds, index=i))
    assert policy.one_token.value == pytest.approx(1.0, abs=0.1)


def test_cheap_right_drafts_go_long_and_useless_ones_go_plain() -> None:
    line = lambda n: 1.0 + 0.02 * (n - 1)  # noqa: E731 (a verify pass almost free)
    good = feed(AdaptiveLength(8), 1.0, draft_step=0.05, pass_cost=line)
    assert set(settled(good)) == {8}
    bad = feed(AdaptiveLength(8), 0.0, draft_step=0.4, pass_cost=line)
    assert set(settled(bad)) == {0}


def test_standing_at_plain_steps_prices_the_k_anew_only_every_few_rounds(monkeypatch) -> None:
    """Pricing every k is most of a choice, and a choice runs on a CPU's critical path:
    while only plain steps run, their timing alone moves the prices, and they are made
    anew every ``REPRICE`` rounds; a drafting round (an exploration), or a one-token pass
    that moved, prices them at once."""
    line = lambda n: 1.0 + 0.1 * (n - 1)  # noqa: E731
    policy = AdaptiveLength(8)
    feed(policy, 0.0, draft_step=0.3, pass_cost=line, rounds=40)
    priced = []
    made = policy.predictions
    monkeypatch.setattr(policy, "predictions",
                        lambda optimism=0.0: priced.append(policy.rounds) or made(optimism))
    choices = feed(policy, 0.0, draft_step=0.3, pass_cost=line, rounds=4 * EXPLORE_IDLE)
    standing = [policy.rounds - len(choices) + 1 + i for i, c in enumerate(choices)
                if not c.k]
    assert len(standing) > 3 * REPRICE and len(priced) < len(standing) / 2
    explored = [policy.rounds - len(choices) + 1 + i for i, c in enumerate(choices) if c.k]
    assert explored
    for at in explored:  # the choice after the one made while its round was in flight
        assert at + 2 in priced
    assert all(b - a <= REPRICE for a, b in zip(priced, priced[1:]))
    assert set(settled(choices)) == {0}
    # The machine slows: the choice after the one-token pass moved is priced anew.
    moved = None
    for i in range(16):
        policy.choose()
        if moved is None and policy.unit() > 1.05:
            moved = policy.rounds + 1
        policy.observe(synthetic(0, 0, draft_step=0, verify=1.3, index=200 + i))
    assert moved is not None and moved in priced


def test_explores_a_neighbour_every_few_rounds_and_recovers() -> None:
    line = lambda n: 1.0 + 0.1 * (n - 1)  # noqa: E731
    policy = AdaptiveLength(8)
    bad = feed(policy, 0.0, draft_step=0.3, pass_cost=line, rounds=144)
    explored = [c for c in bad[16:] if c.explored]
    assert explored and all(c.k >= 1 and not c.hoped for c in explored)
    assert len(explored) == pytest.approx(len(bad[16:]) / EXPLORE_IDLE, abs=1)
    # The text turns copyable: the drafts start surviving, and the exploration sees it.
    recovered = feed(policy, 1.0, draft_step=0.3, pass_cost=line, rounds=96)
    assert settled(recovered)[-8:] == [max(settled(recovered))] * 8
    assert max(settled(recovered)) >= 4


def test_the_choice_is_the_cost_models_best_k() -> None:
    """With every length measured, ``auto`` settles where ``engines.cost_model`` puts the
    best k for the same survival and costs (no second arithmetic)."""
    pass_cost = lambda n: 1.0 + 0.25 * (n - 1)  # noqa: E731
    policy = AdaptiveLength(6)
    for k in range(7):  # every length, and plain steps, timed alike
        for i in range(40):
            policy.observe(synthetic(k, min(k, i % 3), draft_step=0.1, verify=pass_cost(k + 1))
                           if k else synthetic(0, 0, draft_step=0, verify=1.0))
    policy.rounds = 1  # not an exploring round
    choice = policy.choose()
    model = CostModel.measured(policy.survival(), 6, 0.1, pass_cost(7), 1.0, "one-token passes")
    assert not choice.explored and choice.k == model.best_k()
    assert choice.tokens / choice.cost == pytest.approx(model.predicted(choice.k))


def test_a_k_drafted_costs_what_its_rounds_took() -> None:
    """The loop's own work each round (0.3 plain steps here) lands in the drafting time,
    which a split per draft spreads over the drafts: a k the run has drafted is priced
    by its rounds as a whole, and one it has not, shifted by what the split missed at
    the nearest k drafted."""
    policy = AdaptiveLength(6)
    verify = lambda n: 1.0 + 0.1 * (n - 1)  # noqa: E731
    for i in range(1, 7):
        policy.observe(synthetic(0, 0, draft_step=0, verify=1.0, index=i))
    for k in (2, 4):
        for i in range(6):
            round_ = synthetic(k, i % 2, draft_step=0.05, verify=verify(k + 1), index=i + 1)
            policy.observe(replace(round_, draft_seconds=round_.draft_seconds + 0.3))
    costs = [cost for _, cost in policy.predictions()]
    assert costs[2] == pytest.approx(2 * 0.05 + 0.3 + verify(3))
    assert costs[4] == pytest.approx(4 * 0.05 + 0.3 + verify(5))
    # k = 1, priced from k = 2's verify line and shifted by what it missed there.
    model = policy.models()[2]
    assert costs[1] == pytest.approx(model.round_cost(1) + costs[2] - model.round_cost(2))


def test_a_calibration_prices_the_first_round() -> None:
    """With this machine's calibration ``auto`` times nothing first: it tries ``START``
    drafts for ``TRIALS`` rounds (counting the one in flight), then picks the best k for
    the costs and the drafts judged, a plain step priced by the calibration scaled to the
    verify passes timed (no plain step is run only to time one); a calibration where no
    k could pay even with every draft kept starts with plain steps."""
    cheap = made_calibration(draft_step=0.05, slope=0.02)
    policy = draft_length(DecodeSettings(num_draft_tokens=AUTO), "draft", cheap)
    assert isinstance(policy, AdaptiveLength)
    # As the loop runs it: the first choice serves two rounds, and each later one is
    # made while the round before it runs, so TRIALS tries take TRIALS - 1 choices after
    # the first (a count of rounds judged alone would run one try more).
    assert policy.choose() == LengthChoice(START)
    for i in range(TRIALS - 1):
        # Every draft kept, at the calibrated costs (a plain step of 10 ms).
        policy.observe(synthetic(START, START, draft_step=0.0005,
                                 verify=0.010 * cheap.verify_passes("draft")[START], index=i + 1))
        choice = policy.choose()
        assert (choice == LengthChoice(START)) == (i < TRIALS - 2)
    assert not policy.one_token.count and policy.unit() == pytest.approx(0.010)
    # The cost model's best k among those at most one position past the positions
    # judged often enough (BEST_REACHED): the tries judged START positions.
    model = cheap.cost_model("draft", survival=policy.survival())
    assert model.best_k() > START + 1
    assert choice.k == max(range(1, START + 2), key=model.predicted) == START + 1
    assert not choice.explored
    assert choice.tokens / choice.cost == pytest.approx(model.predicted(choice.k))
    dear = draft_length(DecodeSettings(mtp_depth=AUTO), "mtp",
                        made_calibration(draft_step=0.05, slope=0.5, mtp_step=0.6))
    assert dear.choose() == LengthChoice(0, 1.0, 1.0, False, ruled_out=True)
    # Prompt lookup drafts for free; a proposer the calibration did not time has no prior.
    assert cheap.drafting_costs("ngram") == (0.0, cheap.verify_passes("ngram"))
    assert draft_length(DecodeSettings(mtp_depth=AUTO), "mtp", cheap).choose() == LengthChoice(0)


def test_near_break_even_a_plain_step_is_timed_before_the_first_choice() -> None:
    """First tries that keep one draft in four, at costs where that barely pays: a
    plain step priced by the calibration alone could flip the choice, so auto runs three
    plain steps to time ``TIMED_MIN`` (each between two others) before it chooses."""
    calibration = made_calibration(draft_step=0.1, slope=0.1)
    policy = draft_length(DecodeSettings(num_draft_tokens=AUTO), "draft", calibration)
    choices = [policy.choose()]
    for i in range(TRIALS - 1):
        policy.observe(synthetic(START, i % 2, draft_step=0.001,
                                 verify=0.010 * calibration.verify_passes("draft")[START], index=i + 1))
        choices.append(policy.choose())
    for i in range(TIMED_MIN + 2):
        policy.observe(synthetic(0, 0, draft_step=0, verify=0.010, index=TRIALS + i))
        choices.append(policy.choose())
    assert [c.k for c in choices[:TRIALS]] == [START] * (TRIALS - 1) + [0]
    assert [c.k for c in choices[TRIALS:-1]] == [0] * (TIMED_MIN + 1) and choices[-1].k
    assert choices[-1].tokens / choices[-1].cost < TRUST_CALIBRATION
    assert policy.one_token.count == TIMED_MIN


def test_a_k_is_the_best_only_one_position_past_those_judged_often(monkeypatch) -> None:
    """Every draft kept, positions 3 to 6 judged by one round of six: a k past three
    rests there on the acceptance pooled over positions and is not yet the best, nor
    after a second such round (the counts fade under ``BEST_REACHED``); after a third the
    best goes one position past the six judged."""
    monkeypatch.setattr(draft_length_module, "HOPE_BUDGET", 0.0)  # no hopeful rounds
    cheap = made_calibration(draft_step=0.05, slope=0.02)
    policy = AdaptiveLength(8, cheap.drafting_costs("draft"))

    def kept_all(k: int, index: int) -> Round:
        return synthetic(k, k, draft_step=0.0005, verify=0.010 * cheap.verify_passes("draft")[k],
                         index=index)

    rounds = [synthetic(0, 0, draft_step=0, verify=0.010, index=i) for i in (1, 2, 3)]
    rounds += [kept_all(START, i) for i in range(4, 4 + TRIALS)]
    for event in rounds:
        policy.observe(event)
    assert cheap.cost_model("draft", survival=policy.survival()).best_k() == 8
    for index, best in ((8, START + 1), (9, START + 1), (10, 7)):
        policy.observe(kept_all(6, index))
        choice = policy.choose()
        assert (choice.k, choice.explored, choice.held) == (best, False, 8)


def test_the_runs_own_timings_win_over_the_calibration() -> None:
    """A calibration that promised cheap drafts on a run where they cost 0.6 of a plain
    step and never survive: ``auto`` settles on plain steps; one that promised dear
    passes on a run where they are nearly free and drafts always survive: long k."""
    flat = lambda n: 1.0 + 0.02 * (n - 1)  # noqa: E731
    wrong_cheap = AdaptiveLength(8, made_calibration(0.01, 0.0).drafting_costs("draft"))
    assert wrong_cheap.choose().k == START  # a first try
    assert set(settled(feed(wrong_cheap, 0.0, draft_step=0.6, pass_cost=flat))) == {0}
    wrong_dear = AdaptiveLength(8, made_calibration(0.9, 1.0).drafting_costs("draft"))
    assert wrong_dear.choose().k == 0
    # It stands at plain steps until its first exploration; what that one round times
    # corrects every length the calibration priced.
    choices = [c.k for c in feed(wrong_dear, 1.0, draft_step=0.05, pass_cost=flat)]
    assert choices[:EXPLORE_IDLE - 2] == [0] * (EXPLORE_IDLE - 2)
    later = feed(wrong_dear, 1.0, draft_step=0.05, pass_cost=flat, rounds=16)
    assert {c.k for c in later if not c.explored} == {8}


def test_a_length_timed_twice_corrects_the_untimed_ones_less_than_one_timed_often() -> None:
    """The calibration is right; the run timed k = 9 eight times as calibrated and
    k = 11 twice, 12 % slow (two noisy rounds). The lengths it never ran (12-16) are
    priced between the two corrections, nearer the one timed eight times: corrected by
    k = 11 alone, k = 16 was priced about 12 % dearer and held auto below it."""
    calibration = made_calibration(draft_step=0.1, slope=0.1)
    passes = calibration.drafting_costs("draft")[1]
    policy = AdaptiveLength(16, calibration.drafting_costs("draft"))
    for i in range(1, 4):  # plain steps of 10 ms, to time one
        policy.observe(synthetic(0, 0, draft_step=0.0, verify=0.010, index=i))
    for i in range(4, 12):
        policy.observe(synthetic(9, 9, draft_step=0.001, verify=0.010 * passes[9], index=i))
    for i in range(12, 14):
        policy.observe(synthetic(11, 11, draft_step=0.001,
                                 verify=0.010 * (1 + 1.12 * (passes[11] - 1)), index=i))
    priced = policy.calibrated().verify_passes
    assert priced[9] == pytest.approx(passes[9])
    assert priced[11] == pytest.approx(1 + 1.12 * (passes[11] - 1))
    for k in range(12, 17):
        by_eleven_alone = 1 + 1.12 * (passes[k] - 1)
        assert passes[k] < priced[k] < passes[k] + (by_eleven_alone - passes[k]) / 2


def hard_start(policy: AdaptiveLength, later: float, rounds: int = 48) -> list[LengthChoice]:
    """Of its first tries only the last keeps its drafts (a text's hard start: the demo's
    code prompt keeps 2 of its first 8 drafts so), then each draft survives with
    probability ``later``; a plain step costs 1 s, a round of k drafts
    1.65 + 0.25 (k - 1) s (the demo pair's shape: only a long k at high acceptance pays)."""
    pass_cost = lambda n: 1.45 + 0.05 * (n - 2)  # noqa: E731
    for i in range(1, TIMED_MIN + 3):  # plain steps, to time TIMED_MIN between others
        policy.observe(synthetic(0, 0, draft_step=0.0, verify=1.0, index=i))
    for i, kept in enumerate((0,) * (TRIALS - 1) + (START,), TIMED_MIN + 3):
        policy.observe(synthetic(START, kept, draft_step=0.3, verify=pass_cost(START + 1),
                                 index=i))
    return feed(policy, later, draft_step=0.2, pass_cost=pass_cost, rounds=rounds)


def test_a_hard_start_does_not_make_auto_give_up() -> None:
    """After first tries that kept 2 drafts in 8, plain steps win on the estimates,
    but too few drafts were judged to rule drafting out: ``auto`` drafts on, finds the
    drafts now survive and settles on a long k (without that doubt it sat at plain
    steps until its first exploration, 32 rounds on). Where they keep failing, the
    doubt is soon spent: plain steps, drafting only on the regular explorations."""
    good = hard_start(AdaptiveLength(8), 1.0)
    assert good[0].k and good[0].explored and good[0].hoped  # not predicted to pay
    assert min(settled(good)) >= 4
    bad = hard_start(AdaptiveLength(8), 0.0, rounds=96)
    assert bad[0].k and bad[0].explored
    assert set(settled(bad)) == {0}
    assert len([c for c in bad[16:] if c.k]) <= len(bad[16:]) // EXPLORE_IDLE + 1


def test_hoping_costs_a_run_a_bounded_number_of_plain_steps(monkeypatch) -> None:
    """Drafts just short of paying (3 rounds in 10 keep all their drafts): the doubt of
    the positions its failed rounds never reach does not shrink, so unbounded hope
    drafted round after round; the budget bounds what hoping was predicted to cost."""
    def drafting(budget: float) -> tuple[int, float]:
        monkeypatch.setattr(draft_length_module, "HOPE_BUDGET", budget)
        policy = AdaptiveLength(8)
        choices = feed(policy, 0.3, draft_step=0.2, pass_cost=lambda n: 1.1 + 0.15 * (n - 2),
                       rounds=192)
        return sum(1 for c in choices[8:] if c.k), policy.hope_spent

    bounded_rounds, bounded_cost = drafting(HOPE_BUDGET)
    unbounded_rounds, unbounded_cost = drafting(math.inf)
    assert HOPE_BUDGET <= bounded_cost < HOPE_BUDGET + 1.0
    assert unbounded_cost > HOPE_BUDGET + 2.0 and unbounded_rounds > bounded_rounds + 20


def test_hope_is_charged_what_its_rounds_lose_as_they_run() -> None:
    """Lucky first tries (every draft kept), then nothing kept again: the estimates
    flatter the deeper k, so each hopeful round was predicted to lose little and, so
    charged, hope ran on for many rounds. Charged what each lost as it ran (here at
    least ``least`` plain steps: its drafts and pass, less the one token it gave),
    hope stops once the budget is spent; one more may be in flight."""
    calibration = made_calibration(draft_step=0.1, slope=0.1).drafting_costs("draft")
    policy = AdaptiveLength(8, calibration)
    policy.expect_guesses()
    hopeful = []
    for i in range(1, 97):
        choice = policy.choose()
        k = choice.k
        lucky = policy.drafting_rounds < TRIALS
        event = synthetic(k, k if lucky else 0, draft_step=0.001 if k else 0,
                          verify=0.010 * (1.0 + 0.1 * k), index=i)
        event.auto_k, event.auto_hoped = k, choice.hoped
        spent = policy.hope_spent
        policy.observe(event)
        if choice.hoped:
            hopeful.append((k, spent))
    assert hopeful and policy.hope_spent >= HOPE_BUDGET
    # k draft steps of 0.1 and a pass of 1 + 0.1 k plain steps, less one token at the
    # best k's rate (under one plain step a token, as that k pays).
    least = min(0.1 * k + (1.0 + 0.1 * k) - 1.0 for k, _ in hopeful)
    assert len(hopeful) <= HOPE_BUDGET / least + 1


def test_while_drafting_auto_hopes_on_the_positions_past_its_k() -> None:
    """Three rounds in five keep every draft: drafting, auto tries deeper k at once, as
    hopeful rounds on the doubt of positions it has not drafted (before, it went one
    deeper per exploration). Each is charged, as it ran, what it lost against the best
    k's predicted rate, and the rounds kept whole give back what they gained: charged
    only their losses, these would have spent more than the budget."""
    calibration = made_calibration(draft_step=0.1, slope=0.1).drafting_costs("draft")
    policy = AdaptiveLength(8, calibration)
    policy.expect_guesses()
    for i in range(1, TIMED_MIN + 3):  # the one-token pass timed, as near break-even
        policy.observe(synthetic(0, 0, draft_step=0.0, verify=1.0, index=i))
    choices = feed(policy, 0.6, draft_step=0.1, pass_cost=lambda n: 1.0 + 0.1 * (n - 1),
                   rounds=10, bonus=True)
    hopeful = [c for c in choices if c.hoped]
    assert len(hopeful) >= 3 and all(c.explored and c.k > START for c in hopeful)
    assert policy.hope_spent < HOPE_BUDGET / 2 and not policy.hoping


def test_hope_banks_at_most_one_budget_of_credit(monkeypatch) -> None:
    """Every hopeful round keeps all its drafts, far beyond the best k's predicted rate:
    what they gain is given back to the budget only up to one budget's worth, so that
    a copied stretch cannot fund hoping long after the text has changed. (The tries
    stop at four, at k = 8: left to double on, they reach the most drafts themselves.)"""
    monkeypatch.setattr(draft_length_module, "TRIALS_MOST", TRIALS)
    calibration = made_calibration(draft_step=0.1, slope=0.1).drafting_costs("draft")
    policy = AdaptiveLength(16, calibration)
    policy.expect_guesses()
    choices = feed(policy, 1.0, draft_step=0.01, pass_cost=lambda n: 1.0 + 0.01 * n,
                   rounds=40)
    assert sum(c.hoped for c in choices) >= 4  # uncapped, they gained 8.2 plain steps
    assert policy.hope_spent == -HOPE_BUDGET


def test_once_drafts_are_judged_halfway_hope_may_reach_any_k(monkeypatch) -> None:
    """Copied text, every draft kept, and verify passes whose cost does not grow evenly:
    one more token each up to 12 drafts, then a step up, and the pass of 17 tokens
    cheaper than those of 13-16 (a calibration on this CPU had such bumps). Hoping one
    position past the deepest judged, auto climbs to 11 drafts and stays, as 12 looks
    worse; once drafts are judged ``HOPE_ANY`` of the most deep, a hopeful round may
    reach any k, and finds 16. (The tries stop at four, at k = 4: left to double on,
    they reach 16 themselves.)"""
    monkeypatch.setattr(draft_length_module, "TRIALS_MOST", TRIALS)
    passes = tuple(1.0 + 0.1 * k if k < 12 else 3.0 for k in range(16)) + (2.6,)

    def settle(reach_any: float) -> list[int]:
        monkeypatch.setattr(draft_length_module, "HOPE_ANY", reach_any)
        policy = AdaptiveLength(16, (0.05, passes))
        policy.expect_guesses()
        choices = feed(policy, 1.0, draft_step=0.05, pass_cost=lambda n: passes[n - 1],
                       rounds=48, bonus=True)
        return [c.k for c in choices[-16:]]

    assert draft_length_module.HOPE_ANY == 0.5
    assert set(settle(math.inf)) <= {10, 11, 12}
    assert settle(0.5).count(16) >= 12


def test_far_hope_waits_for_the_hopeful_round_in_flight() -> None:
    """Past half the most drafts judged, a hopeful round may reach any k, but not while
    another is in flight: two deep rounds started together on a text that has turned
    lose twice (the demo's queue prompt lost 5-6 plain steps so)."""
    policy = AdaptiveLength(16, (0.05, tuple(1.0 + 0.02 * k for k in range(17))))
    policy.expect_guesses()
    feed(policy, 1.0, draft_step=0.05, pass_cost=lambda n: 1.0 + 0.02 * (n - 1),
         rounds=6, bonus=True, most_kept=9)
    frontier = sum(1 for n in policy.judged if n) + 1
    assert 8 <= frontier < 15
    assert policy.hope() > frontier + 1
    policy.hoping.append(1.0)  # a hopeful round chosen, not yet observed
    assert policy.hope() <= frontier + 1


def test_no_hope_from_a_k_whose_drafts_are_mostly_rejected(monkeypatch) -> None:
    """Drafting one pays (a cheap draft, kept in 4 rounds of 10; nothing past it ever
    is) but a hopeful round past it judges the deeper positions only when that draft
    is kept: from a k whose rounds keep fewer than ``HOPE_KEPT`` drafts auto does not
    hope; with no such bound it spends its budget there."""
    def run(least: float) -> tuple[list[LengthChoice], float]:
        monkeypatch.setattr(draft_length_module, "HOPE_KEPT", least)
        policy = AdaptiveLength(8, made_calibration(draft_step=0.02, slope=0.2)
                                .drafting_costs("draft"))
        policy.expect_guesses()
        choices = feed(policy, 0.4, draft_step=0.02, pass_cost=lambda n: 1.0 + 0.2 * (n - 1),
                       rounds=96, most_kept=1)
        assert {c.k for c in choices[-16:] if on_estimates(c)} == {1}
        return choices, policy.hope_spent

    bounded, spent = run(HOPE_KEPT)
    assert not any(c.hoped for c in bounded) and spent == 0.0
    unbounded, spent = run(0.0)
    assert sum(c.hoped for c in unbounded) >= 2 and spent > 0.0


def test_from_one_draft_auto_never_explores_a_lone_plain_step() -> None:
    """One plain step between drafting rounds is neither timed nor judges a draft: from
    k = 1 the exploration's turn down is skipped, and it explores up (to 2) every
    other turn, as it would."""
    calibration = made_calibration(draft_step=0.02, slope=0.2).drafting_costs("draft")
    policy = AdaptiveLength(8, calibration)
    policy.expect_guesses()
    choices = feed(policy, 0.4, draft_step=0.02, pass_cost=lambda n: 1.0 + 0.2 * (n - 1),
                   rounds=128, most_kept=1)
    late = choices[32:]
    assert [c.k for c in late if on_estimates(c)] == [1] * sum(map(on_estimates, late))
    # Plain steps only to time the one-token pass anew (``RETIME_EVERY``), in a stretch.
    timing = [i for i, c in enumerate(late) if not c.k]
    assert all(i - 1 in timing or i + 1 in timing for i in timing)
    explored = [c.k for c in late if c.explored]
    assert explored and set(explored) == {2}
    assert len(explored) == pytest.approx(len(late) / (2 * EXPLORE_EVERY), abs=1)


def test_without_a_plain_step_the_calibration_is_scaled_to_the_run() -> None:
    """No one-token pass timed yet: the verify passes the run timed, over what the
    calibration says they cost, give this run's target step; other lengths keep the
    calibration's shape."""
    cal = made_calibration(draft_step=0.1, slope=0.1)
    policy = AdaptiveLength(6, cal.drafting_costs("draft"))
    # This machine runs 2.5x slower than when calibrated: a pass of 3 tokens (1.2 steps)
    # takes 30 ms, and a draft step 5 ms, i.e. 0.2 of this run's 25 ms step.
    for i in range(1, 4):
        policy.observe(synthetic(2, 1, draft_step=0.005, verify=0.030, index=i))
    assert policy.unit() == pytest.approx(0.025)
    model = policy.calibrated()
    assert model.draft_step == pytest.approx(0.2)
    assert model.verify_cost(2) == pytest.approx(1.2)
    assert model.verify_cost(5) == pytest.approx(cal.verify_passes("draft")[5]) == pytest.approx(1.5)


def test_fixed_and_auto_settings() -> None:
    assert parse_draft_count(" Auto ") == AUTO and parse_draft_count("3") == 3
    with pytest.raises(ValueError):
        parse_draft_count("lots")
    settings = DecodeSettings(num_draft_tokens=AUTO, mtp_depth=AUTO, ngram_k=AUTO)
    settings.validate()
    assert (settings.max_drafts("draft"), settings.max_drafts("mtp")) == (16, 8)
    assert isinstance(draft_length(settings, "draft"), AdaptiveLength)
    assert isinstance(draft_length(DecodeSettings(), "draft"), FixedLength)
    assert DecodeSettings.from_dict(settings.to_dict()) == settings
    assert DecodeSettings.from_dict({"num_draft_tokens": "many"}) is None
    with pytest.raises(SettingsError, match="or auto"):
        DecodeSettings(num_draft_tokens="many").validate()


def test_the_command_lines_take_auto(tiny_family) -> None:
    from specdeck.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["compare", "--prompt", "x", "-k", "auto", "--depth", "auto",
                              "--ngram-k", "3"])
    assert (args.num_draft_tokens, args.depth, args.ngram_k) == (AUTO, AUTO, 3)
    sweep = parser.parse_args(["sweep", "-k", "1,2,auto"])
    assert sweep.num_draft_tokens == [1, 2, AUTO]
    with pytest.raises(SystemExit):
        parser.parse_args(["compare", "--prompt", "x", "-k", "lots"])


# --- lossless whatever the lengths ------------------------------------------------------


class Scripted:
    """A length policy that asks for the ks of a script in turn (0 included): the
    proposers' catching up after a plain step, and every k after every other."""

    def __init__(self, script: list[int]) -> None:
        self.script, self.turn = script, 0

    def choose(self) -> LengthChoice:
        self.turn += 1
        return LengthChoice(self.script[(self.turn - 1) % len(self.script)])

    def observe(self, event: Round) -> None:
        pass


SCRIPT = [0, 3, 1, 0, 0, 5, 2, 0, 4, 1]


class ScriptedGuesses(Scripted):
    """``Scripted``, learning from the draft's guesses as ``auto`` does."""

    def __init__(self, script: list[int]) -> None:
        super().__init__(script)
        self.judged: list[list[bool]] = []
        self.bonuses: list[tuple[int, bool]] = []
        self.expected = False

    def expect_guesses(self) -> None:
        self.expected = True

    def guess_after(self) -> int:
        return 1  # every token's guess judged

    def observe_guesses(self, matches: list[bool]) -> None:
        self.judged.append(matches)

    def observe_bonus(self, drafts: int, right: bool) -> None:
        self.bonuses.append((drafts, right))


@pytest.fixture
def scripted(monkeypatch):
    for module in (draft, mtp, ngram):
        monkeypatch.setattr(module, "draft_length", lambda settings, name, calibration=None: Scripted(SCRIPT))


@pytest.fixture(scope="module")
def store() -> ModelStore:
    return ModelStore()


def run(name: str, models: Models, settings: DecodeSettings) -> Trace:
    ids = models.target.tokenizer.encode(PROMPT)
    return Trace(name, list(run_strategy(name, models, ids, settings)))


def greedy(**kw) -> DecodeSettings:
    kw.setdefault("max_tokens", TOKENS)
    return DecodeSettings(stop_at_eos=False, **kw)


@pytest.mark.parametrize("target,drafter", [
    ("llama_target", "llama_draft"), ("hybrid_target", "hybrid_draft"),
    ("llama_target", "hybrid_draft"),
])
def test_any_sequence_of_k_equals_plain_at_temperature_zero(
        tiny_family, store, scripted, target, drafter) -> None:
    models = Models(store.get(str(tiny_family[target])), store.get(str(tiny_family[drafter])))
    plain = run("plain", models, greedy())
    for name in ("draft", "ngram"):
        trace = run(name, models, greedy())
        assert trace.tokens == plain.tokens, name
    # Choices are made one round late: the first serves the first two rounds.
    lengths = [len(r.drafted) for r in run("draft", models, greedy()).rounds]
    assert lengths[:len(SCRIPT) + 1] == [SCRIPT[0], *SCRIPT]


def test_mtp_with_any_sequence_of_k_equals_plain(tiny_family, store, scripted) -> None:
    target = store.get(str(tiny_family["mtp_target"]))
    models = Models(target, mtp=load_mtp(target))
    assert run("mtp", models, greedy()).tokens == run("plain", models, greedy()).tokens


class Hoping(AdaptiveLength):
    """``auto`` whose every other choice is a hopeful round of 2 drafts, the rest
    explorations of 2: which the loop must record as it was told."""

    def choose(self) -> LengthChoice:
        self.rounds += 1
        return LengthChoice(2, 1.5, 1.2, explored=True, hoped=self.rounds % 2 == 0)


def test_the_loop_records_which_rounds_were_hopeful(tiny_family, store, monkeypatch) -> None:
    monkeypatch.setattr(draft, "draft_length", lambda *a, **kw: Hoping(8))
    models = Models(store.get(str(tiny_family["llama_target"])),
                    store.get(str(tiny_family["llama_draft"])))
    rounds = run("draft", models, greedy(num_draft_tokens=AUTO)).rounds
    # Choices are made one round late: the first serves the first two rounds.
    assert [r.auto_hoped for r in rounds[1:]] == [i % 2 == 0 for i in range(1, len(rounds))]
    assert all(r.auto_explored for r in rounds)
    assert all("hoping" in choice_words(r) for r in rounds if r.auto_hoped)
    assert not any("hoping" in choice_words(r) for r in rounds if not r.auto_hoped)


class Deep(AdaptiveLength):
    """``auto`` that chooses 8 drafts every round."""

    def choose(self) -> LengthChoice:
        return LengthChoice(8, 3.0, 2.0)


def test_a_round_cut_by_the_token_limit_says_so(tiny_family, store, monkeypatch) -> None:
    monkeypatch.setattr(draft, "draft_length", lambda *a, **kw: Deep(8))
    models = Models(store.get(str(tiny_family["llama_target"])),
                    store.get(str(tiny_family["llama_draft"])))
    rounds = run("draft", models, greedy(num_draft_tokens=AUTO, max_tokens=12)).rounds
    cut = [r for r in rounds if 0 < len(r.drafted) < 8]
    assert cut, "the last rounds must meet the limit of 12 tokens"
    for r in rounds:
        words = choice_words(r)
        if r in cut:
            assert words.endswith(f"; {len(r.drafted)} drafted: the token limit left no "
                                  "room for more")
        else:
            assert "drafted:" not in words


@pytest.mark.parametrize("name", ["draft", "ngram"])
def test_auto_equals_plain_and_records_its_choices(tiny_family, store, name) -> None:
    models = Models(store.get(str(tiny_family["llama_target"])),
                    store.get(str(tiny_family["llama_draft"])))
    trace = run(name, models, greedy(num_draft_tokens=AUTO, ngram_k=AUTO, max_tokens=96))
    assert trace.tokens == run("plain", models, greedy(max_tokens=96)).tokens
    assert all(r.auto_k is not None and len(r.drafted) <= r.auto_k for r in trace.rounds)
    assert trace.rounds[0].auto_k == 0 and trace.rounds[0].auto_tokens is None
    # It learns past the k it chose: by exploring, or (a draft model at temperature 0,
    # sitting at plain steps) by judging the draft's guesses; unless its first drafting
    # rounds, timed cold, priced every k out even were every draft kept (a loaded CI
    # machine, 1 run in ~10), which its plain steps then say. The run's timings decide.
    assert any(r.auto_explored or r.guesses is not None or r.auto_ruled_out
               for r in trace.rounds)
    assert all("even were every draft kept" in choice_words(r)
               for r in trace.rounds if r.auto_ruled_out)
    if name == "ngram":
        assert any(r.auto_explored for r in trace.rounds)
    assert any(r.drafted for r in trace.rounds)
    assert all(choice_words(r).startswith("auto chose") for r in trace.rounds)
    fixed = run(name, models, greedy(num_draft_tokens=2))
    assert all(r.auto_k is None and choice_words(r) is None for r in fixed.rounds)


def test_a_round_that_drafts_nothing_is_all_the_targets_time(tiny_family, store,
                                                               scripted) -> None:
    models = Models(store.get(str(tiny_family["llama_target"])),
                    store.get(str(tiny_family["llama_draft"])))
    trace = run("draft", models, greedy())
    plain_steps = [r for r in trace.rounds if not r.drafted]
    assert plain_steps and all(r.draft_seconds == 0.0 for r in plain_steps)
    assert all(r.proposer is None for r in plain_steps)
    assert all(r.proposer == "draft" for r in trace.rounds if r.drafted)
    assert compute_stats(trace.events).single_pass_seconds > 0


@pytest.mark.parametrize("drafter", ["llama_draft", "hybrid_draft"])
def test_a_draft_catches_up_on_the_rounds_it_skipped(tiny_family, store, scripted,
                                                     drafter) -> None:
    """After plain steps (a script's 0s, two in a row too) the draft model proposes what
    it would from the whole text so far: its catching up fed every skipped token."""
    draft_model = store.get(str(tiny_family[drafter]))
    models = Models(store.get(str(tiny_family["llama_target"])), draft_model)
    trace = run("draft", models, greedy())
    prompt = models.target.tokenizer.encode(PROMPT)
    done: list[int] = []
    after_skips = 0
    for i, r in enumerate(trace.rounds):
        if r.drafted:
            own = run_strategy("plain", Models(draft_model), prompt + done,
                               greedy(max_tokens=len(r.drafted)))
            assert r.drafted == Trace("plain", list(own)).tokens, f"round {i}"
            after_skips += i > 1 and not trace.rounds[i - 1].drafted
        done += r.tokens
    assert after_skips >= 3

SAMPLING = Sampling(temperature=0.9, top_k=30)


@pytest.mark.slow
@pytest.mark.parametrize("script", [[0, 2], [1, 0], [2, 1], [0, 0, 2]])
def test_changing_k_keeps_the_targets_distribution(tiny_family, store, monkeypatch,
                                                   script) -> None:
    """The first two tokens from a plain step then drafts the draft model must catch up
    on, from drafts then a plain step, and from plain steps queued one on the other's
    token before it is read: all drawn from the target's distribution."""
    monkeypatch.setattr(draft, "draft_length", lambda settings, name, calibration=None: Scripted(script))
    models = Models(store.get(str(tiny_family["llama_target"])),
                    store.get(str(tiny_family["llama_draft"])))
    ids = models.target.tokenizer.encode(PROMPT)
    settings = DecodeSettings(max_tokens=3, stop_at_eos=False, sampling=SAMPLING)

    def tokens(seed: int) -> list[int]:
        s = replace(settings, sampling=replace(SAMPLING, seed=seed))
        return Trace("draft", list(run_strategy("draft", models, ids, s))).tokens

    p_first, p_second = lossless_pvalues(tokens, models.target.model, ids, SAMPLING, 1500)
    assert p_first > 1e-3 and p_second > 1e-3, (p_first, p_second)


@pytest.mark.slow
def test_auto_sampling_keeps_the_targets_distribution(tiny_family, store) -> None:
    """``auto`` itself at temperature > 0, starting from a calibration where drafting
    pays (so it drafts from the first round): the target's law."""
    models = Models(store.get(str(tiny_family["llama_target"])),
                    store.get(str(tiny_family["llama_draft"])),
                    calibration=made_calibration(draft_step=0.05, slope=0.05))
    ids = models.target.tokenizer.encode(PROMPT)
    settings = DecodeSettings(max_tokens=2, stop_at_eos=False, num_draft_tokens=AUTO,
                              sampling=SAMPLING)

    def tokens(seed: int) -> list[int]:
        s = replace(settings, sampling=replace(SAMPLING, seed=seed))
        return Trace("draft", list(run_strategy("draft", models, ids, s))).tokens

    first = Trace("draft", list(run_strategy("draft", models, ids, settings))).rounds[0]
    assert first.auto_k and first.auto_k >= 2
    p_first, p_second = lossless_pvalues(tokens, models.target.model, ids, SAMPLING, 1500)
    assert p_first > 1e-3 and p_second > 1e-3, (p_first, p_second)


def test_a_sweep_runs_auto_beside_fixed_k(tiny_family) -> None:
    """``-k 1,auto``: auto is a cell like any other (checked against plain, saved, read
    back); the chart places the fixed k by k and draws auto as a level across them."""
    from specdeck.sessions.chart import auto_levels, series_of
    from specdeck.engines.core.requests import SweepPrompt, SweepRequest
    from specdeck.engines.runs.sweep import recommendations, run_sweep
    from specdeck.sessions.session import sweep_document
    from specdeck.sessions.sweep_file import sweep_from_document

    request = SweepRequest(
        target=str(tiny_family["llama_target"]), draft=str(tiny_family["llama_draft"]),
        prompts=[SweepPrompt("p", PROMPT)], strategies=["draft", "ngram"], ks=[1, AUTO],
        reps=1, warmup=0, max_tokens=24)
    cells, complete = run_sweep(request)
    assert complete
    labels = [c.label for c in cells]
    assert labels == ["plain", "draft k=1", "draft k=auto", "ngram n=3 k=1", "ngram n=3 k=auto"]
    assert all(c.correct for c in cells)
    document = sweep_document(request, cells, recommendations(cells), True, {})
    sweep = sweep_from_document(document)
    assert [c["k"] for c in sweep.cells] == [None, 1, AUTO, 1, AUTO]
    assert [x for points in series_of(sweep.cells).values() for x, _ in points] == [1, 1]
    levels = auto_levels(sweep.cells)
    assert list(levels) == list(series_of(sweep.cells)) == ["p: draft", "p: ngram n=3"]
    assert list(levels.values()) == [c["speedup"] for c in sweep.cells if c["k"] == AUTO]


# --- the draft's guesses over plain steps ----------------------------------------------


def test_guesses_count_as_the_rounds_that_would_have_drafted_there() -> None:
    """Right, right, wrong, wrong, then five right: every token judges the first
    position (seven of nine right). The deeper ones are judged by the rounds of three
    drafts that would have run one after another: from the first token (keeps two,
    judged at three positions), from the fourth (keeps none), from the fifth (keeps
    three; the token after them is its bonus) and from the ninth, the run's end (one
    position only). The five right in a row count one round kept deep, not four."""
    policy = AdaptiveLength(3)
    policy.observe_guesses([True, True, False, False, True, True, True, True, True])
    assert policy.judged == [9, 2, 2] and policy.kept_all == [7, 2, 1]
    assert policy.reached == [9.0, 2.0, 2.0] and policy.kept == [7.0, 2.0, 1.0]


def test_a_guess_after_a_round_kept_in_full_judges_the_next_position() -> None:
    """Two rounds of two drafts kept, the guess after the first right and after the
    second wrong: position three judged twice, kept once; past the deepest position
    auto drafts there is nothing to judge."""
    policy = AdaptiveLength(3)
    for right in (True, False):
        policy.observe(synthetic(2, 2, draft_step=0.3, verify=1.0))
        policy.observe_bonus(2, right)
    policy.observe_bonus(3, True)
    assert policy.judged == [2, 2, 2] and policy.kept_all == [2, 2, 1]


def plain_steps(policy: AdaptiveLength, rounds: int, guesses: list[bool] | None,
                every: int = 8) -> list[LengthChoice]:
    """``rounds`` choices at a plain step's cost, the guesses judged every ``every``
    rounds (None: none); a choice to draft runs a round that keeps nothing."""
    choices = []
    for i in range(rounds):
        choice = policy.choose()
        choices.append(choice)
        policy.observe(synthetic(choice.k, 0, draft_step=0.3,
                                 verify=1.0 + 0.2 * choice.k, index=i + 1))
        if guesses is not None and i % every == every - 1:
            policy.observe_guesses(guesses)
    return choices


def first_tries(policy: AdaptiveLength, kept, rounds: int = 12,
                guesses: bool = True, draft_step: float = 0.001) -> list[LengthChoice]:
    """Run ``policy`` as ``engines.speculative`` does: the first choice serves two
    rounds and each later one is made while the round before it runs; round i (from 1)
    of k drafts keeps ``kept(i, k)``. With ``guesses`` (a draft model at temperature 0),
    after a round kept whole the draft's guess past it is judged, right if round i keeps
    ``k + 1`` of ``k + 1``. A plain step costs 10 ms, a round of k drafts 10 + k ms
    and k draft steps (``draft_step`` seconds each).
    The choice each round ran, then the one made after the last."""
    if guesses:
        policy.expect_guesses()
    choices = [policy.choose()]
    running = [choices[0], choices[0]]
    for i in range(1, rounds + 1):
        k = running.pop(0).k
        event = synthetic(k, kept(i, k) if k else 0, draft_step=draft_step if k else 0.0,
                          verify=0.010 + 0.001 * k, index=i)
        event.auto_k = k
        if guesses and k and event.accepted == k:
            policy.observe_bonus(k, kept(i, k + 1) == k + 1)
        policy.observe(event)
        choices.append(policy.choose())
        running.append(choices[-1])
    return [choices[0], *choices]


def test_with_the_drafts_guesses_the_first_tries_start_at_one_and_double() -> None:
    """With the draft model's guesses judged, a try kept whole also judges the position
    past it: the first tries start at one draft (a try rejected at once costs a round
    of one, not two) and double after each try kept whole (halve after one that was
    not), going on past ``TRIALS`` while the next is deeper than one draft, up to
    ``TRIALS_MOST``."""
    calibration = made_calibration(draft_step=0.1, slope=0.1).drafting_costs("draft")
    tries = lambda choices: [c.k for c in choices if c.k and c.tokens is None]  # noqa: E731
    # Copied text: every draft kept. One round late, each try kept whole doubles the
    # one after next; eight tries, then it drafts deep (hoping up to the most).
    copied = first_tries(AdaptiveLength(16, calibration), lambda i, k: k, rounds=20)
    assert GUESSED_START == 1 and TRIALS_MOST == 8
    assert tries(copied) == [1, 1, 2, 2, 4, 4, 8, 8]
    assert min(c.k for c in copied[8:]) >= 7
    assert [c.k for c in copied[-8:] if not c.explored] == [16] * 7
    # A hard text: nothing kept. Four tries of one draft, then plain steps.
    hard = first_tries(AdaptiveLength(16, calibration), lambda i, k: 0)
    assert tries(hard) == [1] * TRIALS and hard[TRIALS].k == 0
    # A try kept whole, then one rejected: the tries fall back to one draft and end at four.
    mixed = first_tries(AdaptiveLength(16, calibration), lambda i, k: k if i == 1 else 0)
    assert tries(mixed) == [1, 1, 2, 1]
    # Copied text with one wrong guess, at the fifth try: the try chosen after it is
    # half as deep, not one draft, and the tries go on (they ended at six).
    slip = first_tries(AdaptiveLength(16, calibration), lambda i, k: 0 if i == 5 else k,
                       rounds=20)
    assert tries(slip) == [1, 1, 2, 2, 4, 4, 2, 8]
    assert [c.k for c in slip[-8:]] == [16] * 8
    # Without the guesses (prompt lookup, MTP, temperature > 0) a try of one draft
    # judges one position: START drafts for TRIALS rounds, kept whole or not.
    blind = first_tries(AdaptiveLength(16, calibration), lambda i, k: k, guesses=False)
    assert tries(blind) == [START] * TRIALS


def test_a_draft_as_dear_as_the_target_stops_auto_judging_drafts() -> None:
    """A draft step dearer than a plain step (a model drafting for itself): once
    ``RULE_OUT`` tries are timed, no k could pay even were every draft kept, so auto
    runs plain steps from there on and judges no guesses (each judging is the draft
    reading the latest tokens, as dear as the target reading them)."""
    policy = AdaptiveLength(16)
    choices = first_tries(policy, lambda i, k: k, rounds=300, draft_step=0.011)
    # Three tries timed, and the one in flight (they had gone on to eight: 1, 1, ..., 8).
    assert RULE_OUT == 3 and [c.k for c in choices if c.k] == [1, 1, 2, 2]
    assert not policy.could_pay() and policy.guess_after() is None
    # After the tries, plain steps time the one-token pass (no price yet); every choice
    # priced from then on is a plain step that says no k could pay.
    after = choices[8:]
    assert not any(c.ruled_out for c in choices[:8])
    assert all(c.ruled_out == (c.cost is not None) and not c.k for c in after)
    assert sum(c.ruled_out for c in after) > 280
    # Fewer tries timed do not rule drafting out: one slow round must not end it.
    unsure = AdaptiveLength(16)
    first_tries(unsure, lambda i, k: k, rounds=6, draft_step=0.011)
    assert unsure.draft_step.count == 2 and unsure.could_pay()
    # With a calibration that rules it out, no try at all.
    dear = made_calibration(draft_step=1.1, slope=0.07).drafting_costs("draft")
    calibrated = AdaptiveLength(16, dear)
    assert not any(c.k for c in first_tries(calibrated, lambda i, k: k, rounds=100,
                                            draft_step=0.011))
    assert calibrated.guess_after() is None
    # A draft a fifth as dear judges its guesses, as before.
    cheap = AdaptiveLength(16)
    assert not any(c.ruled_out for c in first_tries(cheap, lambda i, k: 0, rounds=100,
                                                    draft_step=0.002))
    assert cheap.could_pay() and cheap.guess_after() == GUESS_EVERY


def test_where_plain_wins_on_ordinary_text_the_first_tries_are_two() -> None:
    """A pair whose draft guesses a third of ordinary text right, where (priced by the
    calibration) plain steps beat every k: with the draft's guesses judged, two tries,
    not four, then plain steps (the guesses judge drafts from there); where k = 1 would
    pay at that survival, four as before. Without the guesses (at temperature > 0)
    none: it starts at plain steps (``typical_loses``), four where k = 1 pays."""
    typical = (0.32, 0.1, 0.02) + (0.0,) * 13
    costly = (0.25, tuple(1.0 + 0.42 * k for k in range(17)))
    cheap = (0.05, tuple(1.0 + 0.02 * k for k in range(17)))
    tries = lambda choices: [c.k for c in choices if c.k and c.tokens is None]  # noqa: E731
    assert PLAIN_TRIALS == 2 < TRIALS
    plain = AdaptiveLength(16, costly, typical)
    assert plain.plain_typical
    assert tries(first_tries(plain, lambda i, k: 0)) == [1] * PLAIN_TRIALS
    pays = AdaptiveLength(16, cheap, typical)
    assert not pays.plain_typical
    assert tries(first_tries(pays, lambda i, k: 0)) == [1] * TRIALS
    blind = AdaptiveLength(16, costly, typical)
    assert blind.typical_loses and not pays.typical_loses
    assert tries(first_tries(blind, lambda i, k: 0, guesses=False)) == []
    blind = AdaptiveLength(16, cheap, typical)
    assert tries(first_tries(blind, lambda i, k: 0, guesses=False)) == [START] * TRIALS


def blind_run(policy: AdaptiveLength, kept_from: int, rounds: int) -> list[LengthChoice]:
    """``policy`` on rounds priced as ``made_blind`` says (a plain step 1 s), whose
    drafts are all rejected before round ``kept_from`` and all kept from it on."""
    choices = []
    for i in range(1, rounds + 1):
        choice = policy.choose()
        choices.append(choice)
        if not choice.k:
            policy.observe(synthetic(0, 0, draft_step=0, verify=1.0, index=i))
            continue
        k = choice.k
        event = synthetic(k, k if i >= kept_from else 0, draft_step=0.05,
                          verify=2.1 + 0.05 * k, index=i)
        event.auto_k, event.auto_explored = k, choice.explored
        policy.observe(event)
    return choices


def made_blind() -> AdaptiveLength:
    """``auto`` for a drafter whose drafts no guesses judge, where typical text loses
    (``typical_loses``), as the demo's MTP head on a CPU: a round dear whatever its k (a
    draft step 0.05 plain steps, a verify pass of k drafts 2.1 + 0.05 k), so that k = 1
    loses even with every draft kept and a deep k pays only then; a third of first
    drafts kept on typical text."""
    typical = (0.32, 0.1, 0.02) + (0.0,) * 13
    passes = (1.0, *(2.1 + 0.05 * k for k in range(1, 17)))
    policy = AdaptiveLength(16, (0.05, passes), typical)
    assert policy.typical_loses
    return policy


def test_where_typical_text_loses_a_try_waits_until_the_budget_covers_it() -> None:
    """A try from plain steps runs once ``IDLE_SHARE`` of the plain steps run covers
    what it is predicted to lose and ``LEFT_PRICE``, not at the first turn it is due
    (``EXPLORE_IDLE``), so what the tries lose stays within that share."""
    policy = made_blind()
    choices = blind_run(policy, kept_from=10**9, rounds=400)
    tries = [i for i, c in enumerate(choices) if c.k]
    assert len(tries) > 3 and tries[0] >= LEFT_PRICE / IDLE_SHARE > EXPLORE_IDLE
    assert 0 < policy.idle_spent <= IDLE_SHARE * policy.plain_steps


def test_a_try_from_plain_steps_kept_whole_is_followed_by_another() -> None:
    """Tries ``EXPLORE_IDLE`` rounds apart judge each position too seldom for its faded
    counts to reach ``BEST_REACHED``: where no hope tries the k past one, a try that
    kept every draft is followed by another at once, and auto goes back to drafting
    when the text turns copyable."""
    choices = blind_run(made_blind(), kept_from=60, rounds=256)
    tries = [i for i, c in enumerate(choices) if c.k]
    first = next(i for i in tries if i + 1 >= 60)
    assert all(c.k for c in choices[first + 8:])  # drafting from soon after
    assert settled(choices)[-1] >= 4


def test_guesses_replace_the_rounds_that_tried_drafting_from_plain_steps() -> None:
    """Where nothing pays, without guesses auto tries drafting from its plain steps now
    and then (exploring, hoping); once guesses all wrong are judged it never drafts
    again, and once the guesses turn right it drafts again within the window over which
    its counts fade."""
    calibration = made_calibration(draft_step=0.3, slope=0.2).drafting_costs("draft")
    blind = plain_steps(AdaptiveLength(8, calibration), 200, None)
    assert sum(c.k > 0 for c in blind[TRIALS:]) >= 200 // EXPLORE_IDLE
    guided = AdaptiveLength(8, calibration)
    guided.expect_guesses()
    choices = plain_steps(guided, 200, [False] * 8)
    assert choices[0].k == GUESSED_START
    assert all(c.k == 0 and not c.explored for c in choices[8:])
    turned = plain_steps(guided, WINDOW, [True] * 8)
    assert any(c.k > 0 for c in turned)


def test_guesses_that_keep_auto_at_plain_steps_are_judged_less_often() -> None:
    """Each judging that leaves auto at plain steps doubles the plain steps the next one
    waits for, up to ``GUESS_MOST``; once drafting pays again, back to ``GUESS_EVERY``."""
    calibration = made_calibration(draft_step=0.3, slope=0.2).drafting_costs("draft")
    policy = AdaptiveLength(8, calibration)
    policy.expect_guesses()
    plain_steps(policy, 8, None)
    waits = [policy.guess_after()]
    for _ in range(4):
        policy.observe_guesses([False] * 8)
        assert policy.choose().k == 0
        waits.append(policy.guess_after())
    assert waits == [GUESS_EVERY, 16, GUESS_MOST, GUESS_MOST, GUESS_MOST]
    for _ in range(12):  # against the 32 wrong
        policy.observe_guesses([True] * 8)
    assert policy.choose().k > 0 and policy.guess_after() == GUESS_EVERY


def greedy_text(model, before: list[int], n: int) -> list[int]:
    """``model``'s own greedy continuation of ``before``, ``n`` tokens."""
    return Trace("plain", list(run_strategy("plain", Models(model), before,
                                            greedy(max_tokens=n)))).tokens


class Unjudged(ScriptedGuesses):
    """``ScriptedGuesses`` asking for no guesses, as ``auto`` where no k could pay."""

    def guess_after(self) -> int | None:
        return None


def test_a_draft_that_judged_no_guesses_drafts_from_the_whole_text(
        tiny_family, store, monkeypatch) -> None:
    """Where no guesses are judged over the plain steps, the draft reads the tokens it
    skipped only when it next drafts: its drafts are those it would make from the
    whole text, and the output is plain decoding's."""
    policy = Unjudged([0] * 9 + [3])
    monkeypatch.setattr(draft, "draft_length", lambda settings, name, calibration=None: policy)
    draft_model = store.get(str(tiny_family["llama_draft"]))
    models = Models(store.get(str(tiny_family["llama_target"])), draft_model)
    trace = run("draft", models, greedy())
    assert trace.tokens == run("plain", models, greedy()).tokens
    assert not policy.judged and not any(r.guesses for r in trace.rounds)
    prompt, position, drafting = models.target.tokenizer.encode(PROMPT), 0, 0
    for r in trace.rounds:
        if r.drafted:
            drafting += 1
            assert r.drafted == greedy_text(draft_model, prompt + trace.tokens[:position],
                                            len(r.drafted))
        position += len(r.tokens)
    assert drafting >= 2


@pytest.mark.parametrize("drafter", ["llama_draft", "hybrid_draft"])
def test_the_guesses_judged_are_the_drafts_a_round_would_have_made(
        tiny_family, store, monkeypatch, drafter) -> None:
    """Each plain step's token, judged against the draft model's own greedy guess from
    the text before it (what a round drafting there would have proposed first): the
    tokens judged after a round are the last ones it and the plain steps before it
    produced, each verdict is the one a round drafting there would have got, and the
    draft's later rounds propose what it would from the whole text."""
    policy = ScriptedGuesses(SCRIPT)
    monkeypatch.setattr(draft, "draft_length", lambda settings, name, calibration=None: policy)
    draft_model = store.get(str(tiny_family[drafter]))
    models = Models(store.get(str(tiny_family["llama_target"])), draft_model)
    trace = run("draft", models, greedy())
    assert trace.tokens == run("plain", models, greedy()).tokens
    prompt = models.target.tokenizer.encode(PROMPT)
    own = functools.partial(greedy_text, draft_model)
    expected = [own(prompt + trace.tokens[:i], 1) == [token]
                for i, token in enumerate(trace.tokens)]
    judged = [r.guesses for r in trace.rounds if r.guesses]
    assert judged == policy.judged and len(judged) >= 3 and policy.expected
    position, seen = 0, []
    for r in trace.rounds:
        if r.drafted:
            assert r.drafted == own(prompt + trace.tokens[:position], len(r.drafted))
        position += len(r.tokens)
        if r.guesses:
            seen += expected[position - len(r.guesses):position]
    assert [right for batch in judged for right in batch] == seen
    assert len(seen) >= 5 and (drafter != "llama_draft" or any(seen) and not all(seen))
    # A round kept in full, then another drafted: the draft's guess at the target's
    # token after the first's drafts, judged (from the second's first step) as a round
    # of one more draft would have judged it.
    position, bonuses = 0, []
    for r, after in zip(trace.rounds, trace.rounds[1:]):
        position += len(r.tokens)
        if r.drafted and r.accepted == len(r.drafted) and after.drafted:
            bonuses.append((len(r.drafted), expected[position - 1]))
    assert policy.bonuses == bonuses and (bonuses or drafter != "llama_draft")


def try_from_plain(after_drafting: float, rounds: int = 320) -> tuple[AdaptiveLength, int, int]:
    """``auto`` with no guesses judged (an MTP head) where every draft is rejected: a
    round of k drafts costs 0.2 k + 1.3 plain steps, and the plain step after it
    ``after_drafting`` (what the round left behind). Returns the policy and how many
    rounds tried drafting from plain steps (explorations and hopeful rounds) after its
    first tries, and how many plain steps it ran."""
    calibration = made_calibration(draft_step=0.2, slope=0.3).drafting_costs("mtp")
    policy = AdaptiveLength(8, calibration)
    tried = previous = plain = 0
    for i in range(1, rounds + 1):
        choice = policy.choose()
        k = choice.k
        seconds = (0.2 * k + 1.3 if k else (after_drafting if previous else 1.0)) * 0.01
        event = synthetic(k, 0, draft_step=0.002 if k else 0,
                          verify=seconds - 0.002 * k, index=i)
        event.auto_k, event.auto_hoped, event.auto_explored = k, choice.hoped, choice.explored
        tried += bool(k) and choice.explored and policy.tried
        plain += not k
        policy.observe(event)
        previous = k
    return policy, tried, plain


def test_trying_drafting_from_plain_steps_spends_a_budget() -> None:
    """Where every k loses and no guesses are judged, ``auto`` stands at plain steps and
    tries drafting now and then: each try costs its round's loss and what it leaves to
    the plain step after it (on the demo's MTP head 1.4 plain steps more). Those tries
    spend at most ``IDLE_FLOOR`` plus ``IDLE_SHARE`` of the plain steps run (one more
    may be in flight); where a try leaves nothing behind they come as often as before
    (every ``EXPLORE_IDLE`` rounds)."""
    _, cheap_tries, _ = try_from_plain(after_drafting=1.0)
    dear, dear_tries, plain = try_from_plain(after_drafting=2.4)
    assert cheap_tries >= (320 - 32) // EXPLORE_IDLE - 1
    one_try = 0.2 + 1.3 - 1.0 + 2.4 - 1.0  # a round of one draft and the step after it
    budget = IDLE_FLOOR + IDLE_SHARE * plain
    assert 1 <= dear_tries <= budget / one_try + 1 and dear_tries < cheap_tries
    assert dear.idle_spent <= budget + 2 * one_try


def test_a_try_from_plain_steps_that_drafted_nothing_keeps_the_count_in_step() -> None:
    """Prompt lookup may find nothing to draft in a round chosen to explore: that round
    still answers for its choice, so the next exploring round is charged as what it was
    (here one from plain steps) and not as the one before it."""
    policy = AdaptiveLength(4)
    for i in range(1, 4):  # a one-token pass timed: 10 ms
        policy.observe(synthetic(0, 0, draft_step=0, verify=0.010, index=i))
    policy.idling.extend([False, True])  # a neighbour explored, then a try from plain
    nothing = synthetic(0, 0, draft_step=0, verify=0.010, index=4)
    nothing.auto_k, nothing.auto_explored = 2, True
    policy.observe(nothing)
    tried = synthetic(1, 0, draft_step=0.002, verify=0.018, index=5)
    tried.auto_k, tried.auto_explored = 1, True
    policy.observe(tried)
    assert not policy.idling
    assert policy.idle_spent == pytest.approx(0.020 / 0.010 - 1)  # 2 steps for 1 token


def drifting(accept: float, *, round_seconds: float, later_step: float,
             rounds: int = 96) -> tuple[AdaptiveLength, list[LengthChoice]]:
    """``auto`` (no calibration, no guesses) on rounds of any k that keep each draft with
    probability ``accept`` (deterministically) and take ``round_seconds`` per draft; its
    plain steps take 1 s at first and ``later_step`` s once it has drafted 16 rounds
    (the machine's speed drifted)."""
    policy = AdaptiveLength(4)
    choices: list[LengthChoice] = []
    drafted = 0
    for i in range(1, rounds + 1):
        choice = policy.choose()
        choices.append(choice)
        k = choice.k
        if not k:
            step = later_step if drafted >= 16 else 1.0
            policy.observe(synthetic(0, 0, draft_step=0, verify=step, index=i))
            continue
        drafted += 1
        kept = sum(1 for _ in range(k) if (drafted * accept) % 1 + accept >= 1)
        event = synthetic(k, kept, draft_step=0.0, verify=round_seconds * k, index=i)
        event.auto_k, event.auto_hoped = k, choice.hoped
        event.auto_explored = choice.explored
        policy.observe(event)
    return policy, choices


def test_a_one_token_pass_gone_stale_near_break_even_is_timed_anew() -> None:
    """Drafting barely pays (predicted under ``TRUST_CALIBRATION`` times a plain step):
    after ``RETIME_EVERY`` rounds with no plain step timed, ``auto`` forgets the one-token
    pass it priced them by and times it anew (up to ``TIMED_MIN`` times while the choice
    hangs on it), so a machine that slowed (plain steps 1 s, then 1.3 s) is priced as
    it runs now. Where drafting pays by far, it drafts on and times nothing."""
    near, choices = drifting(0.6, round_seconds=1.3, later_step=1.3, rounds=128)
    ks = [c.k for c in choices]
    drafting = next(i for i, c in enumerate(choices) if c.k and on_estimates(c))
    timing = [i for i, c in enumerate(choices[drafting:], drafting)
              if not c.k and c.tokens is None]
    timed = max(i for i in range(drafting) if not ks[i])  # the last plain step before
    assert timing and timing[0] - timed >= RETIME_EVERY, ks  # plain steps to time anew
    assert all(i - 1 in timing or i + 1 in timing for i in timing)  # in a stretch
    # The old 1 s forgotten; priced by the new 1.3 s, drafting pays by far: it drafts on.
    assert list(near.one_token.values) == [pytest.approx(1.3)] and choices[-1].k
    far, choices = drifting(1.0, round_seconds=0.3, later_step=1.3)
    assert not any(not c.k and c.tokens is None for c in choices[8:])
    assert far.one_token.value == pytest.approx(1.0)


def test_a_try_from_plain_steps_that_gained_banks_nothing() -> None:
    """A try from plain steps that ran faster than plain steps pays back what earlier
    tries lost, but no more: two lucky rounds do not fund a string of tries after."""
    policy = AdaptiveLength(4)
    for i in range(1, 4):  # a one-token pass timed: 10 ms
        policy.observe(synthetic(0, 0, draft_step=0, verify=0.010, index=i))
    for i, (kept, seconds) in enumerate(((0, 0.025), (3, 0.020), (3, 0.020)), 4):
        tried = synthetic(3, kept, draft_step=0.0, verify=seconds, index=i)
        tried.auto_k, tried.auto_explored = 3, True
        policy.idling.append(True)
        policy.observe(tried)
        if i == 4:
            assert policy.idle_spent == pytest.approx(1.5)  # 2.5 steps for one token
    assert policy.idle_spent == 0.0  # 4 tokens in 2 steps, twice: -4, not banked
