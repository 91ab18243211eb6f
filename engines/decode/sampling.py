"""Token choice and the speculative acceptance rule, on mlx arrays.

The filters (top-p, min-p, top-k) are mlx-lm's own, applied in mlx-lm's order, so the
distribution we sample from is exactly the one ``mlx_lm.sample_utils.make_sampler``
samples from. Randomness comes from an explicit key stream per run, so a seed
reproduces a run and two runs in two threads never share random state.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p

from specdeck.engines.core.config import Sampling
from specdeck.engines.decode.shared import log_probs


class KeyStream:
    """A seeded stream of independent PRNG keys."""

    def __init__(self, seed: int) -> None:
        self._key = mx.random.key(seed)

    def next(self) -> mx.array:
        self._key, sub = mx.random.split(self._key)
        return sub


@functools.cache
def _empty(dtype: mx.Dtype) -> mx.array:
    empty = mx.zeros((0,), dtype)
    mx.eval(empty)
    return empty


def no_drafts() -> mx.array:
    """The drafts of a round that drafts nothing: one empty array, made once. A plain
    step of the speculative loop builds nothing for them (on the tiny pair the loop's
    plain steps ran 0.93-0.95 of mlx-lm's while each made its own empty arrays)."""
    return _empty(mx.uint32)


def sampling_logprobs(logprobs: mx.array, sampling: Sampling) -> mx.array:
    """Normalised log-probabilities of the distribution a token is drawn from.

    ``logprobs``: the model's normalised log-probabilities, the vocabulary on the last
    axis (any leading shape). With temperature 0 they are returned as they are (the
    argmax picks the token; the probabilities are for display).
    """
    x = logprobs
    if sampling.greedy:
        return x
    if 0.0 < sampling.top_p < 1.0:
        x = apply_top_p(x, sampling.top_p)
    if sampling.min_p > 0.0:
        x = apply_min_p(x, sampling.min_p)
    if sampling.top_k > 0 and sampling.top_k < x.shape[-1]:
        x = apply_top_k(x, sampling.top_k)
    x = x * (1.0 / sampling.temperature)
    return log_probs(x)


def choose(logprobs: mx.array, sampling: Sampling, keys: KeyStream) -> mx.array:
    """Pick one token per row of sampling log-probabilities: argmax, or a seeded draw."""
    if sampling.greedy:
        return mx.argmax(logprobs, axis=-1)
    return mx.random.categorical(logprobs, axis=-1, key=keys.next())


@dataclass(slots=True)
class Verdict:
    """The outcome of testing k drafts against the target, as lazy mlx arrays."""

    #: 1 where the draft at that position passes its test (the accepted prefix is the
    #: run of ones from the start).
    passed: mx.array
    #: The target's token for each position 0..k: the correction if the draft there is
    #: the first rejected one, and at position k the bonus token.
    fallback: mx.array
    #: p(d_i) and q(d_i) for each drafted token, and the uniform draws (None when greedy).
    target_probs: mx.array
    draft_probs: mx.array
    uniforms: mx.array | None
    #: 1 where the target's own token at that position equals the draft: mlx-lm's
    #: exact-match rule, recorded beside the real one and never deciding anything.
    #: Greedy: the argmax (the rules coincide); else the target's sample from p drawn by
    #: inverse CDF with the position's own uniform draw.
    exact_match: mx.array


def judge_drafts(
    drafts: mx.array,
    target_lp: mx.array,
    draft_lp: mx.array | None,
    sampling: Sampling,
    keys: KeyStream,
) -> Verdict:
    """Test drafts against the target, losslessly.

    ``drafts``: (k,) ids; ``target_lp``: (k+1, V) sampling log-probs of the target at
    each draft position and one past the last; ``draft_lp``: (k, V) sampling
    log-probs of the distribution each draft was drawn from, or None for a
    deterministic drafter (prompt lookup), which is a point mass q = 1 on its draft.

    Greedy: a draft passes when it equals the target's argmax; the fallback at each
    position is that argmax. Temperature > 0 (speculative sampling, Leviathan et al.):
    a draft passes when ``u < p(d) / q(d)``; the token replacing the first rejected
    draft is drawn from ``norm(max(0, p - q))`` and the bonus from ``p``. Every
    candidate is drawn in one batch so a round needs one synchronisation.
    """
    k = drafts.shape[0]
    if k == 0:  # a plain step: its token (uint32, shape (1,)) and nothing to judge
        none, empty = _empty(mx.bool_), _empty(mx.float32)
        return Verdict(none, choose(target_lp, sampling, keys), empty, empty, None, none)
    idx = drafts[:, None]
    p_draft = mx.exp(mx.take_along_axis(target_lp[:k], idx, axis=-1)[:, 0])
    if draft_lp is None:
        q_draft = mx.ones_like(p_draft)
    else:
        q_draft = mx.exp(mx.take_along_axis(draft_lp, idx, axis=-1)[:, 0])

    if sampling.greedy:
        best = mx.argmax(target_lp, axis=-1)
        passed = best[:k] == drafts
        return Verdict(passed, best, p_draft, q_draft, None, passed)

    uniforms = mx.random.uniform(shape=(k,), key=keys.next())
    passed = uniforms * q_draft < p_draft
    p = mx.exp(target_lp[:k])
    exact_match = inverse_cdf(p, uniforms) == drafts
    if draft_lp is None:
        q = mx.zeros_like(p)
        q = mx.put_along_axis(q, idx, mx.ones((k, 1), q.dtype), axis=-1)
    else:
        q = mx.exp(draft_lp)
    residual = mx.maximum(p - q, 0.0)
    # A rejection implies p(d) < q(d), so mass is left elsewhere; guard exact ties anyway.
    empty = mx.sum(residual, axis=-1, keepdims=True) <= 0
    residual = mx.where(empty, p, residual)
    corrections = mx.random.categorical(mx.log(residual), axis=-1, key=keys.next())
    bonus = mx.random.categorical(target_lp[k], key=keys.next())
    fallback = mx.concatenate([corrections, bonus[None]])
    return Verdict(passed, fallback, p_draft, q_draft, uniforms, exact_match)


def inverse_cdf(probs: mx.array, uniforms: mx.array) -> mx.array:
    """One token per row of ``probs`` (n, V), drawn with that row's uniform in [0, 1):
    the first id whose cumulative probability (ids in order) passes ``u`` times the
    row's total, so a token is drawn with its probability; never one of none, even
    where ``u`` times the total rounds up to the total."""
    cdf = mx.cumsum(probs, axis=-1)
    drawn = mx.sum(cdf <= uniforms[:, None] * cdf[:, -1:], axis=-1)
    last = probs.shape[-1] - 1 - mx.argmax(probs[:, ::-1] > 0, axis=-1)
    return mx.minimum(drawn, last).astype(mx.uint32)


def leading_run(flags: list[bool]) -> int:
    """How many of ``flags`` hold from the start: the drafts a rule accepts before its
    first rejection."""
    return next((i for i, ok in enumerate(flags) if not ok), len(flags))


def top_alternatives(logprobs: mx.array, count: int) -> tuple[mx.array, mx.array]:
    """The ``count`` most likely ids per row and their probabilities, best first."""
    count = min(count, logprobs.shape[-1])
    ids = mx.argpartition(-logprobs, kth=count - 1, axis=-1)[..., :count]
    lp = mx.take_along_axis(logprobs, ids, axis=-1)
    order = mx.argsort(-lp, axis=-1)
    return mx.take_along_axis(ids, order, axis=-1), mx.exp(mx.take_along_axis(lp, order, axis=-1))
