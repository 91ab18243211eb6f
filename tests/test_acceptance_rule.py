"""The acceptance rule tested where it lives: ``judge_drafts`` as a function of p, q and
its random draws.

What a round emits (the accepted drafts, then the correction or the bonus) must follow
the target: at every position the round reaches, the token there is drawn from that
position's p, whatever the drafts' q (filtered, one-hot, disjoint from p, equal to it)
and whatever k. 10^5 rounds are judged in one batched call of the real function
(``mx.vmap``, a key stream per round); the seeds are fixed, so the outcome is
deterministic. Plausible wrong rules fail the same check. What the rule alone cannot
prove (the right p and q reaching it, every cache rewound) is left to the end-to-end
runs of each strategy.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import mlx.core as mx
import numpy as np
import pytest

from helpers.lossless import chi_square_pvalue
from specdeck.engines.core.config import Sampling
from specdeck.engines.decode.sampling import Verdict, judge_drafts, sampling_logprobs

ROUNDS = 100_000
VOCAB = 8
SAMPLING = Sampling(temperature=1.0)
#: Far below any p-value a right rule gets here, far above any a wrong one does.
P_MIN = 1e-5


class Keys:
    """One round's key stream (``KeyStream``'s, from a key rather than a seed), so that
    vmap gives every round its own draws."""

    def __init__(self, key: mx.array) -> None:
        self.key = key

    def next(self) -> mx.array:
        self.key, sub = mx.random.split(self.key)
        return sub


def distributions(seed: int, rows: int, sampling: Sampling = SAMPLING,
                  scale: float = 2.0) -> mx.array:
    """``rows`` log-distributions over the vocabulary, from random logits through the
    engine's own filters (``sampling_logprobs``)."""
    logits = mx.array(np.random.default_rng(seed).normal(0, scale, (rows, VOCAB)), mx.float32)
    return sampling_logprobs(logits - mx.logsumexp(logits, axis=-1, keepdims=True), sampling)


def one_hot(tokens: list[int]) -> mx.array:
    return mx.log(mx.array(np.eye(VOCAB, dtype=np.float32)[tokens]))


def judge_rounds(target_lp: mx.array, draft_lp: mx.array | None, judge=judge_drafts,
                 drafts: list[int] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """``ROUNDS`` rounds judged at once: drafts drawn from ``draft_lp`` ((k, V)), or the
    fixed ``drafts`` of a deterministic drafter (``draft_lp`` None: prompt lookup)."""
    k = target_lp.shape[0] - 1
    keys = mx.random.split(mx.random.key(seed), ROUNDS + 1)
    if drafts is None:
        drawn = mx.random.categorical(mx.broadcast_to(draft_lp, (ROUNDS, k, VOCAB)),
                                      key=keys[ROUNDS])
    else:
        drawn = mx.broadcast_to(mx.array(drafts), (ROUNDS, k))
    drawn = drawn.astype(mx.uint32)

    def one(round_drafts: mx.array, key: mx.array) -> tuple[mx.array, ...]:
        verdict = judge(round_drafts, target_lp, draft_lp, SAMPLING, Keys(key))
        return verdict.passed, verdict.fallback, verdict.exact_match

    passed, fallback, exact = mx.vmap(one)(drawn, keys[:ROUNDS])
    return {"drafts": np.array(drawn), "passed": np.array(passed),
            "fallback": np.array(fallback), "exact": np.array(exact)}


def problems(target_lp: mx.array, draft_lp: mx.array | None, judged: dict) -> list[str]:
    """Where the rounds stray from the target: at each position, the tokens of the rounds
    that reach it against p; how often each draft passes against sum(min(p, q)) (what
    the rule keeps, as much as any lossless rule can); how often the target's own
    sample equals it against sum(p q) (mlx-lm's rule, recorded beside)."""
    p = np.array(mx.exp(target_lp), dtype=np.float64)
    k = p.shape[0] - 1
    if draft_lp is None:
        q = np.eye(VOCAB)[judged["drafts"][0]]
    else:
        q = np.array(mx.exp(draft_lp), dtype=np.float64)
    passed, drafts, fallback = judged["passed"], judged["drafts"], judged["fallback"]
    accepted = np.where(passed.all(axis=1), k, passed.argmin(axis=1))
    found = []
    for i in range(k + 1):
        reach = accepted >= i
        if not reach.any():
            break
        kept = accepted[reach] > i
        tokens = np.where(kept, drafts[reach, min(i, k - 1)], fallback[reach, i])
        pvalue = chi_square_pvalue(tokens.tolist(), p[i] / p[i].sum())
        if pvalue < P_MIN:
            found.append(f"position {i}: tokens do not follow p (p-value {pvalue:.2g})")
        if i == k:
            break
        rates = {"passes": (kept.mean(), np.minimum(p[i], q[i]).sum(), reach.sum()),
                 "exact match": (judged["exact"][:, i].mean(), (p[i] * q[i]).sum(), ROUNDS)}
        for what, (seen, expected, n) in rates.items():
            expected = min(max(expected, 0.0), 1.0)
            if abs(seen - expected) > 5 * np.sqrt(expected * (1 - expected) / n) + 1e-6:
                found.append(f"position {i}: {what} {seen:.4f}, expected {expected:.4f}")
    return found


def random_rows(k: int) -> tuple[mx.array, mx.array]:
    return distributions(k, k + 1), distributions(100 + k, k)


@pytest.mark.parametrize("k", range(1, 9))
def test_rounds_follow_the_target_for_every_k(k) -> None:
    target_lp, draft_lp = random_rows(k)
    assert problems(target_lp, draft_lp, judge_rounds(target_lp, draft_lp)) == []


FILTERED = Sampling(temperature=0.7, top_p=0.8, top_k=5, min_p=0.05)


@pytest.mark.parametrize("case", [
    "filtered", "p one-hot", "q one-hot", "lookup", "disjoint", "q equals p", "tempered q"])
def test_rounds_follow_the_target_whatever_p_and_q(case) -> None:
    """p and q through top-p, top-k and min-p (zeros in both, in different places); a
    certain target; a one-hot draft (and prompt lookup's, with no q at all: a point
    mass); supports with nothing in common (nothing passes, every correction is p);
    q = p (everything passes, the bonus is p); q flatter than p."""
    k = 3
    target_lp, draft_lp = random_rows(k)
    drafts = None
    if case == "filtered":
        target_lp, draft_lp = distributions(1, k + 1, FILTERED), distributions(2, k, FILTERED)
    elif case == "p one-hot":
        target_lp = one_hot([3, 0, 7, 5])
    elif case in ("q one-hot", "lookup"):
        drafts = [2, 6, 2]
        draft_lp = one_hot(drafts) if case == "q one-hot" else None
    elif case == "disjoint":
        target_lp = mx.log(mx.array(np.repeat([[0.4, 0.3, 0.2, 0.1, 0, 0, 0, 0]], k + 1, 0)))
        draft_lp = mx.log(mx.array(np.repeat([[0, 0, 0, 0, 0.1, 0.2, 0.3, 0.4]], k, 0)))
    elif case == "q equals p":
        draft_lp = target_lp[:k]
    elif case == "tempered q":
        draft_lp = distributions(5, k, scale=0.5)
    judged = judge_rounds(target_lp, draft_lp, drafts=drafts)
    assert problems(target_lp, draft_lp, judged) == []
    if case == "disjoint":
        assert not judged["passed"][:, 0].any()
    if case == "q equals p":
        assert judged["passed"].all()


def exact_match_rule(verdict: Verdict, target_lp: mx.array, keys: Keys) -> Verdict:
    """mlx-lm's test (the target's own sample equals the draft) with the real correction."""
    return replace(verdict, passed=verdict.exact_match)


def correction_from_p(verdict: Verdict, target_lp: mx.array, keys: Keys) -> Verdict:
    """A rejected draft replaced by a draw from p instead of norm(max(0, p - q))."""
    return replace(verdict, fallback=mx.random.categorical(target_lp, axis=-1, key=keys.next()))


def bonus_one_early(verdict: Verdict, target_lp: mx.array, keys: Keys) -> Verdict:
    """The bonus drawn from the last draft's position instead of the one after it."""
    bonus = mx.random.categorical(target_lp[-2], key=keys.next())
    return replace(verdict, fallback=mx.concatenate([verdict.fallback[:-1], bonus[None]]))


def accept_everything(verdict: Verdict, target_lp: mx.array, keys: Keys) -> Verdict:
    return replace(verdict, passed=mx.ones_like(verdict.passed))


@pytest.mark.parametrize("wrong", [exact_match_rule, correction_from_p, bonus_one_early,
                                   accept_everything])
def test_the_check_fails_wrong_rules(wrong) -> None:
    """The check has teeth: plausible wrong rules, each a change to the real verdict."""

    def judge(drafts, target_lp, draft_lp, sampling, keys) -> Verdict:
        return wrong(judge_drafts(drafts, target_lp, draft_lp, sampling, keys), target_lp, keys)

    target_lp, draft_lp = random_rows(2)
    assert problems(target_lp, draft_lp, judge_rounds(target_lp, draft_lp, judge)) != []


def test_greedy_keeps_the_drafts_up_to_the_first_that_is_not_the_argmax() -> None:
    """At temperature 0, every draft sequence of a small vocabulary: the verdict is the
    argmax at every position, and a draft passes exactly where it is that argmax."""
    k, vocab = 3, 4
    target_lp = distributions(7, k + 1)[:, :vocab]
    best = np.array(mx.argmax(target_lp, axis=-1))
    for drafts in itertools.product(range(vocab), repeat=k):
        verdict = judge_drafts(mx.array(drafts, mx.uint32), target_lp, None, Sampling(), None)
        assert verdict.fallback.tolist() == best.tolist()
        assert verdict.passed.tolist() == [d == b for d, b in zip(drafts, best)]
        assert verdict.exact_match.tolist() == verdict.passed.tolist()
