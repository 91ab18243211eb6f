"""``auto`` on synthetic rounds: the k it chooses is the cost model's best over what it
measured, it explores, it times what it prices by, and at plain steps it learns from the
draft's guesses (or tries drafting) after waits that grow."""

from __future__ import annotations

from itertools import accumulate

import pytest

from specdeck.engines.auto.adaptive import RULES, AutoLength, AutoRules
from specdeck.engines.core.cost_model import CostModel
from helpers.auto import feed, synthetic

PASS = 1.0  # seconds of a one-token pass (``feed``'s plain steps)


def plain_steps(policy: AutoLength, n: int, seconds: float = PASS, start: int = 1) -> None:
    for i in range(n):
        policy.observe(synthetic(0, 0, draft_step=0, verify=seconds, index=start + i))


def timed(most: int = 8, prior=None, rules: AutoRules = RULES) -> AutoLength:
    """``auto`` that has timed its one-token pass (three plain steps in a row)."""
    policy = AutoLength(most, prior, rules)
    plain_steps(policy, 3)
    return policy


def test_without_a_calibration_it_times_plain_steps_then_drafts_once_to_price_rounds() -> None:
    policy = AutoLength(8)
    assert [(c.k, c.why) for c in (policy.choose(), policy.choose())] == [(0, "time")] * 2
    plain_steps(policy, 3)  # the first run cold, then one between two others is timed
    assert policy.one_token.value == PASS
    assert (policy.choose().k, policy.choose().why) == (1, "start")
    policy.observe(synthetic(1, 1, draft_step=0.5, verify=9.0))  # the first runs cold
    assert (policy.choose().k, policy.choose().why) == (1, "start")
    policy.observe(synthetic(1, 1, draft_step=0.1, verify=1.1))
    choice = policy.choose()
    assert choice.why in ("best", "explore") and choice.tokens and choice.cost


def test_only_a_plain_step_between_two_others_is_timed() -> None:
    """A stretch's first step runs on into the next and its last is queued behind
    nothing: only the ones between are timed, as plain decoding runs them."""
    policy = AutoLength(8)
    for i, seconds in enumerate([0.050, 0.010, 0.011, 0.002], start=1):
        policy.observe(synthetic(0, 0, draft_step=0, verify=seconds, index=i))
    assert list(policy.one_token.values) == [0.010, 0.011]
    policy.observe(synthetic(2, 1, draft_step=0.001, verify=0.012, index=5))
    plain_steps(policy, 2, seconds=0.5, start=7)  # two in a row: neither is timed
    assert list(policy.one_token.values) == [0.010, 0.011]


def test_one_slow_round_barely_moves_the_costs() -> None:
    policy = timed()
    for i in range(9):
        policy.observe(synthetic(3, 3, draft_step=0.002, verify=0.015, index=4 + i))
    before = policy.costs()
    policy.observe(synthetic(3, 3, draft_step=0.002, verify=0.150, index=20))
    assert policy.costs()[3] == pytest.approx(before[3])


def test_cheap_right_drafts_go_long_and_useless_ones_go_plain() -> None:
    cheap = feed(timed(16), 0.95, draft_step=0.05, pass_cost=lambda n: PASS * (1 + 0.02 * n))
    assert min(c.k for c in cheap[-16:] if c.why == "best") >= 6
    dear = feed(timed(16), 0.05, draft_step=0.4, pass_cost=lambda n: PASS * (1 + 0.2 * n))
    assert all(c.k == 0 for c in dear[-16:] if c.why == "best")
    assert sum(c.why == "best" for c in dear[-16:]) >= 12


def test_the_choice_is_the_cost_models_best_k() -> None:
    """What it drafts is the k whose E(k) / C(k), from the survival and costs it
    measured, is the most: checked against the cost model built from them alone."""
    policy = timed(8)
    feed(policy, 0.7, draft_step=0.001, pass_cost=lambda n: PASS * (1 + 0.1 * (n - 1)))
    costs, survival = policy.costs(), policy.survival()
    choice = policy.choose()
    assert choice.why == "best" or choice.why == "explore"
    tokens = list(accumulate(survival, initial=1.0))
    best = max(range(9), key=lambda k: (tokens[k] / costs[k], -k))
    if choice.why == "best":
        assert choice.k == best
    assert choice.tokens == pytest.approx(tokens[choice.k])
    model = CostModel(tuple(survival), 8.0, 0.1, costs[8], "one-token passes")
    assert model.expected_tokens(best) == pytest.approx(tokens[best])


def test_it_explores_a_neighbour_every_few_rounds_and_recovers() -> None:
    policy = timed(8)
    choices = feed(policy, 0.8, draft_step=0.001, pass_cost=lambda n: PASS * (1 + 0.05 * n),
                   rounds=80)
    explored = [i for i, c in enumerate(choices) if c.why == "explore"]
    assert explored and all(b - a == RULES.explore_every for a, b in zip(explored, explored[1:]))
    best = [c.k for c in choices if c.why == "best"][-1]
    assert {choices[i].k for i in explored[-4:]} <= {best - 1, best + 1}
    # The text turns: every draft rejected. It comes down to plain steps.
    rest = feed(policy, 0.0, draft_step=0.001, pass_cost=lambda n: PASS * (1 + 0.05 * n),
                rounds=150)
    assert rest[-1].k == 0


def test_a_calibration_prices_the_first_round_and_the_runs_timings_correct_it() -> None:
    step, passes = 0.1, tuple(1.0 + 0.05 * k for k in range(17))
    policy = AutoLength(16, (step, passes))
    first = policy.choose()
    assert first.cost == pytest.approx(first.k * step + passes[first.k])
    assert first.k > 0  # at one draft in two kept, a cheap pair pays from the start
    # The run's rounds of 3 cost twice the calibration's: a length it drafted costs what
    # its rounds took, the others are shifted by what the calibration missed there.
    plain_steps(policy, 3)
    for i in range(5):
        policy.observe(synthetic(3, 1, draft_step=PASS * step,
                                 verify=PASS * (2 * (3 * step + passes[3]) - 3 * step),
                                 index=10 + i))
    costs = policy.costs()
    missed = 3 * step + passes[3]
    assert costs[3] == pytest.approx(2 * missed)
    assert costs[5] == pytest.approx(5 * step + passes[5] + missed)


def test_priced_by_a_calibration_it_stops_to_time_a_plain_step_only_where_it_is_close() -> None:
    """A plain step untimed, the calibration prices it: where the best k is predicted
    well ahead, its explorations draft (plain steps there cost what a copied text's
    rounds gain); under ``time_below`` they time a plain step, as the choice may hang
    on it."""
    def run(cost: float, accept: float, most_kept: int) -> tuple[AutoLength, list]:
        policy = AutoLength(8, (cost, tuple(1.0 + cost * k for k in range(9))))
        choices = feed(policy, accept, draft_step=cost * PASS, rounds=24, most_kept=most_kept,
                       pass_cost=lambda n: PASS * (1 + cost * (n - 1)))
        return policy, choices

    clear, choices = run(0.05, 0.9, 16)  # k = 8 predicted at 3-4x a plain step
    assert {c.why for c in choices} == {"best", "explore"} and not clear.one_token.values
    close, choices = run(0.15, 0.6, 1)  # k = 1 predicted at 1.0-1.2x
    timing = [i for i, c in enumerate(choices) if c.why == "time"]
    assert timing[0] == RULES.explore_every - 1 and close.one_token.value == PASS
    assert all(c.tokens / c.cost < RULES.time_below for c in choices[:timing[0]])


def test_without_a_calibration_untimed_lengths_lie_on_the_line_through_the_nearest() -> None:
    policy = timed(8)
    for i in range(3):
        policy.observe(synthetic(2, 2, draft_step=0.1 * PASS, verify=1.4 * PASS, index=5 + i))
    costs = policy.costs()
    assert costs[2] == pytest.approx(2 * 0.1 + 1.4)
    # A pass of 4 drafts on the line from a one-token pass (1) through 2 drafts (1.4).
    assert costs[4] == pytest.approx(4 * 0.1 + 1.8)


def test_the_guesses_count_as_rounds_of_the_most_drafts_one_after_another() -> None:
    policy = AutoLength(4)
    policy.expect_guesses()
    # Rounds from token 0: keeps 2, rejected at the third; from 3: keeps all 4, and its
    # fifth token is the target's own (no draft judged there); from 8: a right guess at
    # the last token, nothing judged past it.
    policy.observe_guesses([True, True, False, True, True, True, True, False, True])
    assert policy.reached == [3.0, 2.0, 2.0, 1.0]
    assert policy.kept == [3.0, 2.0, 1.0, 1.0]


def test_at_plain_steps_the_guesses_wait_twice_as_long_each_time_up_to_the_window() -> None:
    prior = (0.2, tuple(1.0 + 0.1 * k for k in range(9)))
    policy = timed(8, prior)
    policy.expect_guesses()
    for i in (5, 6):  # drafting timed (the first drafting round runs cold)
        policy.observe(synthetic(2, 0, draft_step=0.2, verify=1.2, index=i))
    waits = []
    for _ in range(6):
        waits.append(policy.guess_after())
        plain_steps(policy, policy.guess_after(), start=10)
        policy.observe_guesses([False] * policy.guess_after())
        assert policy.choose().k == 0
    assert waits == [8, 16, 32, 32, 32, 32]
    # Guesses that say drafting pays: a drafting k, and the wait starts over.
    fresh = timed(8, prior)
    fresh.expect_guesses()
    for i in (5, 6):
        fresh.observe(synthetic(2, 0, draft_step=0.2, verify=1.2, index=i))
    fresh.observe_guesses([False] * 8)
    assert fresh.guess_after() == 16
    fresh.observe_guesses([True] * 64)
    assert fresh.choose().k > 0 and fresh.guess_after() == RULES.explore_every


def test_priced_by_a_calibration_alone_it_tries_a_drafting_round_to_time_one() -> None:
    """Guesses say how often drafts would be kept, not what drafting costs: a calibration
    that overprices rounds (taken on a busy machine) would hold it at plain steps for
    good. So until a drafting round of its own is timed, it tries one after its wait."""
    dear = (0.5, tuple(1.0 + 1.0 * k for k in range(9)))  # priced three times the truth
    policy = timed(8, dear)
    policy.expect_guesses()
    assert policy.choose().k == 0
    plain_steps(policy, 8, start=4)
    policy.observe_guesses([True] * 8)
    tried = policy.choose()
    assert (tried.why, tried.k > 0) == ("try", True)
    for i in range(4):  # what its rounds really cost: a tenth of a step a draft
        policy.observe(synthetic(tried.k, tried.k, draft_step=0.1, verify=1.0 + 0.1 * tried.k,
                                 index=20 + i))
    assert policy.choose().k > 0


def test_at_plain_steps_it_reprices_only_when_it_learnt_something(monkeypatch) -> None:
    policy = timed(8)
    policy.expect_guesses()
    priced = []
    original = AutoLength.costs
    monkeypatch.setattr(AutoLength, "costs", lambda self: priced.append(1) or original(self))
    feed(policy, 0.0, draft_step=0.004, pass_cost=lambda n: PASS * (1 + 0.3 * n), rounds=6)
    assert policy.choose().k == 0
    priced.clear()
    for i in range(20):
        policy.choose()
        plain_steps(policy, 1, start=30 + i)
    assert not priced
    policy.observe_guesses([False] * 8)
    policy.choose()
    assert priced


def test_without_guesses_it_tries_drafting_from_plain_steps_ever_more_seldom() -> None:
    """An MTP head or prompt lookup: no guesses to judge, so a try of its best drafting
    k after 8 plain steps, then 32, 128, ...: two in a 128-token run that never pays, a
    handful in a long one."""
    policy = timed(8)
    choices = feed(policy, 0.0, draft_step=0.004, pass_cost=lambda n: PASS * (1 + 0.3 * n),
                   rounds=2000)
    tries = [i for i, c in enumerate(choices) if c.why == "try"]
    assert all(choices[i].k > 0 for i in tries)
    # Each wait four times the last (a try is the round after its wait).
    gaps = [b - a - 1 for a, b in zip(tries, tries[1:])]
    assert len(tries) == 4 and gaps == [4 * RULES.explore_every * 4 ** n for n in range(3)]
    assert sum(i < 128 for i in tries) == 2


def test_the_counts_fade_so_a_changed_text_is_followed() -> None:
    policy = AutoLength(4)
    policy.observe_guesses([False] * 32)
    reached = policy.reached[0]
    plain_steps(policy, RULES.window)
    assert policy.reached[0] == pytest.approx(reached * (1 - 1 / RULES.window) ** RULES.window)
