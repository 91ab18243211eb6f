"""The real family, SmolLM2-135M-Instruct and its trained draft, on chat prompts.

Runs where ``specdeck fetch smollm2`` has been run (CI fetches it before the tests);
elsewhere every test here is skipped with the reason. Three chat prompts of
``prompts/`` (never trained on): at temperature 0 plain, draft (k = 1..4) and prompt
lookup give the same tokens; the one-word question is answered with Paris in every
pane; at temperature 0.7 the draft strategy's first tokens follow the target's own
distribution.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from helpers.lossless import lossless_pvalues
from specdeck.engines.runs.compare import encode_prompt
from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.models.demo import demo_models
from specdeck.engines.models.families import cache_root
from specdeck.engines.core.events import Trace
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.decode.run import Models, run_strategy
from specdeck.prompts import get_prompt

#: Where ``specdeck fetch`` put the fetched families (read at collection, before each test
#: points the cache at an empty folder).
FETCHED_CACHE = cache_root()
FAMILY = demo_models(FETCHED_CACHE / "families" / "smollm2")
pytestmark = [
    pytest.mark.smollm2,
    pytest.mark.skipif(
        FAMILY is None,
        reason=f"the smollm2 family is not fetched in {FETCHED_CACHE}: run "
        "`specdeck fetch smollm2` (CI does) to run these tests",
    ),
]
CHAT_PROMPTS = ("chat_capital", "chat_explain", "chat_email")
TOKENS = 40


@pytest.fixture(scope="module")
def models() -> Models:
    store = ModelStore()
    return Models(store.get(FAMILY.target), store.get(FAMILY.draft))


def chat_ids(models: Models, key: str) -> list[int]:
    return encode_prompt(models.target.tokenizer, get_prompt(key).text, chat=True)


def run(models: Models, name: str, ids: list[int], settings: DecodeSettings) -> Trace:
    return Trace(name, list(run_strategy(name, models, ids, settings)))


@pytest.mark.parametrize("key", CHAT_PROMPTS)
def test_every_strategy_gives_plain_greedy_tokens(models, key) -> None:
    ids = chat_ids(models, key)
    settings = DecodeSettings(max_tokens=TOKENS)
    plain = run(models, "plain", ids, settings)
    assert len(plain.tokens) >= 3
    for k in (1, 2, 3, 4):
        draft = run(models, "draft", ids, replace(settings, num_draft_tokens=k))
        assert draft.tokens == plain.tokens, f"draft k={k} differs on {key}"
    assert run(models, "ngram", ids, settings).tokens == plain.tokens


def test_the_capital_of_france_is_paris_in_every_pane(models) -> None:
    ids = chat_ids(models, "chat_capital")
    settings = DecodeSettings(max_tokens=16)
    for name in ("plain", "draft", "ngram"):
        trace = run(models, name, ids, settings)
        assert "Paris" in trace.text, (name, trace.text)


def test_draft_samples_the_targets_distribution_at_temperature_0_7(models) -> None:
    """Chi-square on each of the first two tokens over 300 seeded runs (top-k 20 keeps the
    exact two-token marginals enumerable on a 49,152-token vocabulary). The email prompt:
    its first tokens are spread (0.67, 0.17, 0.09, ...), where the explanation's first
    token is "A" 99.7 % of the time and the test would say little."""
    ids = chat_ids(models, "chat_email")
    sampling = Sampling(temperature=0.7, top_k=20)
    settings = DecodeSettings(max_tokens=2, stop_at_eos=False, num_draft_tokens=2,
                              sampling=sampling)

    def tokens(seed: int) -> list[int]:
        s = replace(settings, sampling=replace(sampling, seed=seed))
        return run(models, "draft", ids, s).tokens

    p_first, p_second = lossless_pvalues(tokens, models.target.model, ids, sampling, 300)
    assert p_first > 1e-3 and p_second > 1e-3, (p_first, p_second)
