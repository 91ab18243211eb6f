"""A statistical check that a strategy samples from the target's own distribution.

The exact distribution of the first two generated tokens is computed from the target
alone (independently of specdeck's sampling code, with mlx-lm's filters); many seeded runs
of the strategy are then compared with it by a chi-square test. Seeds are fixed, so the
outcome is deterministic: no flaky failures.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

import mlx.core as mx
import numpy as np
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p
from scipy.stats import chisquare

from engines.config import Sampling


def _sampling_probs(logits: mx.array, sampling: Sampling) -> np.ndarray:
    """mlx-lm's make_sampler distribution, written out: filters on log-probs, then 1/T."""
    lp = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    if 0 < sampling.top_p < 1:
        lp = apply_top_p(lp, sampling.top_p)
    if sampling.min_p:
        lp = apply_min_p(lp, sampling.min_p)
    if sampling.top_k:
        lp = apply_top_k(lp, sampling.top_k)
    return np.array(mx.softmax(lp / sampling.temperature, axis=-1).astype(mx.float32), dtype=np.float64)


def exact_first_two(model, prompt: list[int], sampling: Sampling) -> tuple[np.ndarray, np.ndarray]:
    """P(first token) and P(second token), marginalising over the first."""
    p1 = _sampling_probs(model(mx.array(prompt)[None])[0, -1], sampling)
    firsts = np.nonzero(p1 > 1e-9)[0]
    batch = mx.array([prompt + [int(t)] for t in firsts])
    p_next = _sampling_probs(model(batch)[:, -1], sampling)
    p2 = (p1[firsts][:, None] * p_next).sum(axis=0)
    return p1, p2


def chi_square_pvalue(samples: list[int], probs: np.ndarray) -> float:
    """Goodness of fit of ``samples`` to ``probs``, pooling bins expected below 5."""
    n = len(samples)
    counts = Counter(samples)
    expected = probs * n
    big = expected >= 5
    observed = [counts.get(i, 0) for i in np.nonzero(big)[0]]
    exp = list(expected[big])
    rest_obs = n - sum(observed)
    rest_exp = n - sum(exp)
    if rest_exp >= 5:
        observed.append(rest_obs)
        exp.append(rest_exp)
    elif rest_obs:
        return 0.0  # tokens outside the support the target gives them
    exp = np.array(exp) * (n / np.sum(exp))
    return float(chisquare(observed, exp).pvalue)


def lossless_pvalues(
    run_tokens: Callable[[int], list[int]],
    model,
    prompt: list[int],
    sampling: Sampling,
    samples: int,
) -> tuple[float, float]:
    """p-values for the first and the second generated token over ``samples`` seeds."""
    p1, p2 = exact_first_two(model, prompt, sampling)
    firsts, seconds = [], []
    for seed in range(samples):
        tokens = run_tokens(seed)
        firsts.append(tokens[0])
        seconds.append(tokens[1])
    return chi_square_pvalue(firsts, p1), chi_square_pvalue(seconds, p2)
