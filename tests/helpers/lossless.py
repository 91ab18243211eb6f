"""A statistical check that a strategy samples from the target's own distribution.

The exact distribution of each of the first generated tokens (two by default) is computed
from the target alone (independently of specdeck's sampling code, with mlx-lm's
filters); many seeded runs of the strategy are then compared with it by a chi-square
test. Seeds are fixed, so the
outcome is deterministic: no flaky failures.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Callable

import mlx.core as mx
import numpy as np
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p
from scipy.stats import chisquare

from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.core.events import Trace
from specdeck.engines.decode.run import Models, run_strategy



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


def exact_marginals(model, prompt: list[int], sampling: Sampling, count: int) -> list[np.ndarray]:
    """P(i-th generated token) for i < ``count``, marginalising over the tokens before it.

    Every prefix the sampler can produce is enumerated: beyond two tokens keep the
    support small (top-k), or the batch grows as the vocabulary to the power count - 1.
    """
    marginals = []
    prefixes, weights = [[]], np.ones(1)
    for step in range(count):
        batch = mx.array([prompt + prefix for prefix in prefixes])
        p_next = _sampling_probs(model(batch)[:, -1], sampling)
        marginals.append((weights[:, None] * p_next).sum(axis=0))
        if step + 1 < count:
            rows, cols = np.nonzero(p_next > 1e-9)
            prefixes = [prefixes[r] + [int(c)] for r, c in zip(rows, cols)]
            weights = weights[rows] * p_next[rows, cols]
    return marginals


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
    count: int = 2,
) -> tuple[float, ...]:
    """p-values for each of the first ``count`` generated tokens over ``samples`` seeds."""
    marginals = exact_marginals(model, prompt, sampling, count)
    runs = [run_tokens(seed)[:count] for seed in range(samples)]
    return tuple(
        chi_square_pvalue([tokens[i] for tokens in runs], probs)
        for i, probs in enumerate(marginals)
    )


PROMPT = "def add(a, b):\n    return"


SAMPLES = 1500


def first_two(models: Models, settings: DecodeSettings, name: str):
    ids = models.target.tokenizer.encode(PROMPT)

    def tokens(seed: int) -> list[int]:
        s = replace(settings, sampling=replace(settings.sampling, seed=seed))
        return Trace(name, list(run_strategy(name, models, ids, s))).tokens

    return tokens, ids
