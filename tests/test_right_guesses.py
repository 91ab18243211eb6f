"""The record of the draft's right guesses along the output, and ``auto`` pricing each k
by replaying its rounds over it (``engines.right_guesses``)."""

from __future__ import annotations

import random

import pytest
from helpers.auto import made_calibration, synthetic

from specdeck.engines.auto.draft_length import AdaptiveLength
from specdeck.engines.auto.right_guesses import ROUNDS, WINDOW, RightGuesses

#: A text that repeats every six tokens, the draft wrong at one of them.
PERIODIC = [False, True, True, True, True, True]


def recorded(bits: list[bool | None]) -> RightGuesses:
    """A record of ``bits``, each a round's token (as plain steps judged by guesses)."""
    record = RightGuesses()
    for _ in bits:
        record.plain_step()
    record.guesses(bits)
    return record


def test_a_fixed_k_replayed_keeps_what_its_rounds_would_have() -> None:
    """Period six, one wrong guess: rounds of five or six drafts all start just past
    the wrong guess and keep five (six tokens a round); rounds of four alternate
    between keeping four and starting on the wrong guess (three tokens a round on
    average); each position's acceptance pooled over rounds could not tell them apart."""
    replayed = recorded(PERIODIC * 16).tokens_per_round(8)
    assert replayed[5] > 5.8 and replayed[6] > 5.8 and replayed[8] > 5.8
    assert abs(replayed[4] - 3.0) < 0.1
    # One draft a round: the wrong guess always falls on a round's own token, past it.
    assert replayed[1] > 1.95


def walked(bits: list[bool | None], most: int) -> dict[int, float]:
    """``tokens_per_round`` as its docstring says it, round by round: each k's rounds
    from each of its k + 1 first tokens to the end, those whose end is unknown left
    out, where ``ROUNDS`` ran per starting point."""
    replayed = {}
    for k in range(1, most + 1):
        tokens = rounds = 0
        for p in range(k + 1):
            while p < len(bits):
                run = next((i for i, right in enumerate(bits[p:]) if not right),
                           len(bits) - p)
                kept = min(run, k)
                end = bits[p + run] if p + run < len(bits) else None  # past the record
                unknown = kept == run < k and end is None
                tokens, rounds = tokens + (0 if unknown else kept + 1), rounds + (not unknown)
                p += kept + 1
        if rounds >= ROUNDS * (k + 1):
            replayed[k] = tokens / rounds
    return replayed


def test_every_ks_rounds_are_replayed_as_they_would_run() -> None:
    """The replay, computed back to front once per k (each k's rounds from every
    token), brings what walking each k's rounds from each starting point brings, on
    records of every kind: copied, mixed, poor, with unknown tokens."""
    rng = random.Random(7)
    for _ in range(400):
        right, unknown = rng.random(), rng.random() * 0.3
        bits = [None if rng.random() < unknown else rng.random() < right
                for _ in range(rng.randint(0, 120))]
        most = rng.randint(1, 16)
        expected = walked(bits[-WINDOW:], most)
        assert recorded(bits).tokens_per_round(most) == pytest.approx(expected)


def test_rounds_whose_end_is_unknown_are_left_out() -> None:
    """Two right guesses, then a token nothing judged, over and over: rounds of one or
    two drafts keep what they asked for whatever comes next; a round of three or more
    would end on the unknown token, so those k are left to the per-position counts."""
    replayed = recorded([True, True, None] * 32).tokens_per_round(4)
    assert set(replayed) == {1, 2} and replayed[2] > 2.5


def test_too_few_rounds_replay_no_figure() -> None:
    """Twelve tokens run too few rounds of three drafts per starting point to go by."""
    assert 3 not in recorded(PERIODIC * 2).tokens_per_round(3)
    assert 3 in recorded(PERIODIC * 16).tokens_per_round(3)


def test_the_record_follows_rounds_bonus_guesses_and_plain_steps() -> None:
    record = RightGuesses()
    record.round(3, 1)  # kept one, the second draft wrong
    assert record.bits == [True, False]
    record.round(2, 2)  # kept whole: the token past it waits for the draft's guess
    assert record.bits[-1] is None
    record.bonus(True)  # judged in the next round, as the loop does
    assert record.bits == [True, False, True, True, True]
    record.bonus(False)  # judged before its round is recorded, as a replay does
    record.round(1, 1)
    assert record.bits[-2:] == [True, False]
    record.round(1, 1)  # kept whole, then plain steps: the guesses judge its last token
    record.plain_step()
    record.plain_step()
    record.guesses([False, True, True])
    assert record.bits[-4:] == [True, False, True, True]


def test_the_latest_tokens_are_replayed() -> None:
    """Rounds of three drafts kept whole, then plain steps judged all wrong: a window's
    worth later only the plain steps are replayed, and the record holds few more."""
    record = RightGuesses()
    for _ in range(40):
        record.round(3, 3)
        record.bonus(True)
    assert record.tokens_per_round(3)[3] > 3.9
    for _ in range(WINDOW // 32):
        for _ in range(32):
            record.plain_step()
        record.guesses([False] * 32)
    assert record.tokens_per_round(3) == {1: 1.0, 2: 1.0, 3: 1.0}
    assert len(record.bits) <= 3 * WINDOW


def test_a_shorter_window_replays_fewer_of_the_latest_tokens() -> None:
    """Rounds of three drafts kept whole, then 64 plain steps judged all wrong: replayed
    over the latest 64 tokens no round keeps a draft; over the whole window some do."""
    record = RightGuesses()
    for _ in range(10):
        record.round(3, 3)
        record.bonus(True)
    for _ in range(2):
        for _ in range(32):
            record.plain_step()
        record.guesses([False] * 32)
    assert record.tokens_per_round(3, 64) == {1: 1.0, 2: 1.0, 3: 1.0}
    assert record.tokens_per_round(3)[3] > 1.25


def over_text(policy: AdaptiveLength, text: list[bool], rounds: int,
              draft_step: float = 0.001, slope: float = 0.001, over: float = 0.0
              ) -> list[int]:
    """Run ``policy`` as ``engines.speculative`` does over a text whose draft guesses are
    ``text``: each choice made while the round before it runs, the draft's guess past a
    round kept whole judged, its guesses over plain steps judged when ``guess_after``
    asks. A plain step costs 10 ms, a round of k drafts ``draft_step`` a draft and a
    verify pass of 10 ms + ``over`` + ``slope`` a draft (by default 10 + 2 k ms). The
    tokens each round brought."""
    policy.expect_guesses()
    running = [policy.choose(), policy.choose()]
    p = seen = 0
    brought = []
    for i in range(1, rounds + 1):
        k = running.pop(0).k
        kept = 0
        while kept < k and text[p + kept]:
            kept += 1
        event = synthetic(k, kept, draft_step=draft_step if k else 0.0,
                          verify=0.010 + (over + slope * k if k else 0.0), index=i)
        event.auto_k = k
        if k and kept == k:
            policy.observe_bonus(k, text[p + k])
        p += kept + 1
        brought.append(kept + 1)
        policy.observe(event)
        if k:
            seen = p
        elif (wait := policy.guess_after()) is not None and p - seen >= wait:
            policy.observe_guesses(text[seen:p])
            seen = p
        running.append(policy.choose())
    return brought


def test_auto_follows_a_repeating_text_into_its_new_phase() -> None:
    """A text that repeats every five tokens (k = 4 keeps four a round), then every
    seven: rounds of four drafts now keep four, then start on the wrong guess every
    other round (3.5 tokens a round), while six drafts keep six (seven tokens). Priced
    by the acceptance per position pooled over both kinds of round, the first position
    looks half right and auto stayed near k = 4 (5.4 tokens a round after the change);
    priced by replaying each k over the latest tokens, it moves into phase."""
    calibration = made_calibration(draft_step=0.1, slope=0.1).drafting_costs("draft")
    fives, sevens = [False] + [True] * 4, [False] + [True] * 6
    text = fives * 30 + sevens * 200
    brought = over_text(AdaptiveLength(16, calibration), text, 150)
    done, after = 0, []
    for tokens in brought:
        if done >= len(fives) * 30 + 40:  # past the change and the window's turn
            after.append(tokens)
        done += tokens
    assert len(after) > 40 and sum(after) / len(after) > 6.3


def test_auto_takes_plain_steps_on_a_loop_where_every_k_loses() -> None:
    """A text whose every eight tokens the draft guesses three right in a row, and a
    verify pass costs a quarter more than a plain step whatever its length (as smollm2
    on this CPU): k = 1's rounds start on a wrong guess 4 times in 6 (0.92x of plain
    steps), k = 3's 4 times in 5 (0.86x). Judged from every token, the first position
    looks right 3 times in 8, and the counts per position, priced as if rounds started
    anywhere, said drafting paid once the guesses over a stretch of plain steps were
    judged: auto turned back to drafting every thirty rounds or so. Replayed over the
    latest tokens, no k pays: after its first tries it takes plain steps."""
    loop = [True] * 3 + [False] * 5
    calibration = made_calibration(draft_step=0.15, slope=0.05, over=0.25)
    policy = AdaptiveLength(16, calibration.drafting_costs("draft"))
    over_text(policy, loop * 100, 300, draft_step=0.0015, slope=0.0005, over=0.0025)
    # Its tries, three rounds at k = 3 before the replay has rounds enough, and a round
    # every forty or so where the latest 32 tokens' phase flatters a k (13 in all;
    # before: 58 drafting rounds of 300, the counts turning it back every 30 or so).
    assert policy.drafting_rounds <= 16
