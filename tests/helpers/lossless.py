"""A statistical check that a strategy samples from the target's own distribution.

The exact distribution of each of the first generated tokens (two by default) is computed
from the target alone (independently of specdeck's sampling code, with mlx-lm's
filters); many seeded runs of the strategy are then compared with it by a chi-square
test. Seeds are fixed, so the outcome is deterministic: no flaky failures.

The acceptance rule itself is tested exactly (``tests/test_acceptance_rule.py``); these
runs prove what surrounds it in each strategy (the p and q that reach it, every cache
rewound), so a few hundred runs do.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Callable

import mlx.core as mx
import numpy as np
from mlx.utils import tree_map
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p
from scipy.special import chdtrc  # scipy.stats would add 0.35 s to every worker's start

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
    probs = mx.softmax(lp / sampling.temperature, axis=-1).astype(mx.float32)
    return np.array(probs, dtype=np.float64)


def exact_marginals(model, prompt: list[int], sampling: Sampling, count: int) -> list[np.ndarray]:
    """P(i-th generated token) for i < ``count``, marginalising over the tokens before it.

    Every prefix the sampler can produce is enumerated, one batch row each, on a copy of
    the prompt's cache (the prompt is read once): beyond two tokens keep the support
    small (top-k), or the batch grows as the vocabulary to the power count - 1.
    """
    cache = make_prompt_cache(model)
    logits = model(mx.array([prompt]), cache=cache)[:, -1]
    marginals, weights = [], np.ones(1)
    for step in range(count):
        p_next = _sampling_probs(logits, sampling)
        marginals.append((weights[:, None] * p_next).sum(axis=0))
        if step + 1 == count:
            break
        rows, cols = np.nonzero(p_next > 1e-9)
        weights = weights[rows] * p_next[rows, cols]
        parents = mx.array(rows)
        for layer in cache:  # each prefix continues its parent's cache
            layer.state = tree_map(
                lambda a: a[parents] if isinstance(a, mx.array) else a, layer.state)
        logits = model(mx.array(cols)[:, None], cache=cache)[:, -1]
    return marginals


def chi_square_pvalue(samples: list[int], probs: np.ndarray) -> float:
    """Goodness of fit of ``samples`` to ``probs``, pooling bins expected below 5 (into
    the smallest other bin where together they are still expected below 5); 0 where a
    token of probability 0 was drawn."""
    n = len(samples)
    counts = Counter(samples)
    if any(probs[token] <= 0 for token in counts):
        return 0.0  # a token outside the support the target gives them
    expected = probs * n
    big = list(np.nonzero(expected >= 5)[0])
    observed = [counts.get(i, 0) for i in big]
    exp = list(expected[big])
    rest_obs, rest_exp = n - sum(observed), n - sum(exp)
    if rest_exp >= 5 or not exp:
        observed.append(rest_obs)
        exp.append(rest_exp)
    else:
        smallest = int(np.argmin(exp))
        observed[smallest] += rest_obs
        exp[smallest] += rest_exp
    exp = np.array(exp) * (n / np.sum(exp))
    stat = float(np.sum((np.array(observed) - exp) ** 2 / exp))
    return float(chdtrc(len(exp) - 1, stat))  # Pearson's test, as scipy.stats.chisquare


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
SAMPLES = 250


def strategy_pvalues(name: str, models: Models, ids: list[int], settings: DecodeSettings,
                     count: int = 2, samples: int = SAMPLES) -> tuple[float, ...]:
    """``lossless_pvalues`` of ``samples`` seeded runs of strategy ``name`` on ``ids``."""

    def tokens(seed: int) -> list[int]:
        s = replace(settings, sampling=replace(settings.sampling, seed=seed))
        return Trace(name, list(run_strategy(name, models, ids, s))).tokens

    return lossless_pvalues(tokens, models.target.model, ids, settings.sampling, samples, count)
