"""The real family, SmolLM2-135M-Instruct and its trained draft, on chat prompts.

Runs where ``specdeck fetch smollm2`` has been run (CI fetches it before the tests);
elsewhere every test here is skipped with the reason. Three chat prompts of
``prompts/`` (never trained on): at temperature 0 plain, draft and prompt lookup give the
same tokens, and the one-word question is answered with Paris; at temperature 0.7 the
draft strategy's first tokens follow the target's own distribution. One worker runs
them all, so the models load once.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from helpers.lossless import strategy_pvalues
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
    pytest.mark.slow,
    pytest.mark.xdist_group("smollm2"),
    pytest.mark.skipif(
        FAMILY is None,
        reason=f"the smollm2 family is not fetched in {FETCHED_CACHE}: run "
        "`specdeck fetch smollm2` (CI does) to run these tests",
    ),
]
CHAT_PROMPTS = ("chat_capital", "chat_explain", "chat_email")
TOKENS = 24
#: Seeded runs of the distribution test: a check of the real models around the rule,
#: which is tested exactly elsewhere (``test_acceptance_rule.py``).
SAMPLES = 24


# For the session: the slow tests run first, so this module's tests do not run in a row
# and a module fixture would load the 0.6 GB family again (~7 s) when they resume.
@pytest.fixture(scope="session")
def models() -> Models:
    store = ModelStore()
    return Models(store.get(FAMILY.target), store.get(FAMILY.draft))


def chat_ids(models: Models, key: str) -> list[int]:
    return encode_prompt(models.target.tokenizer, get_prompt(key).text, chat=True)


def run(models: Models, name: str, ids: list[int], settings: DecodeSettings) -> Trace:
    return Trace(name, list(run_strategy(name, models, ids, settings)))


@pytest.mark.parametrize("key", CHAT_PROMPTS)
def test_every_strategy_gives_plain_greedy_tokens(models, key) -> None:
    """Verify passes of 4 tokens (k = 3), whose float32 sums may round otherwise than
    one token's, choose what one token at a time chooses; prompt lookup, which rarely
    finds a match on a chat prompt, runs on the email one."""
    ids = chat_ids(models, key)
    settings = DecodeSettings(max_tokens=TOKENS)
    plain = run(models, "plain", ids, settings)
    assert len(plain.tokens) >= 3
    if key == "chat_capital":
        assert "Paris" in plain.text, plain.text
    draft = run(models, "draft", ids, replace(settings, num_draft_tokens=3))
    assert draft.tokens == plain.tokens, f"draft differs on {key}"
    if key == "chat_email":
        assert run(models, "ngram", ids, settings).tokens == plain.tokens


def test_draft_samples_the_targets_distribution_at_temperature_0_7(models) -> None:
    """Chi-square on each of the first two tokens over seeded runs of the real draft
    (its token list included; top-k 20 keeps the exact two-token marginals enumerable
    on a 49,152-token vocabulary). Four tokens of plain text, no chat template: both
    tokens are spread (0.27, 0.21, 0.13 ... and 0.27, 0.16 ...), where the explanation's
    first token in the template is "A" 99.7 % of the time and the test would say little.
    Keeping every draft is caught (a token the target's top 20 lacks); 24 runs of the
    email request (19 tokens, first token 0.37, 0.17 ...) caught it by a hair."""
    text = "My favourite colour is"
    ids = encode_prompt(models.target.tokenizer, text, chat=False)
    settings = DecodeSettings(max_tokens=2, stop_at_eos=False, num_draft_tokens=2,
                              sampling=Sampling(temperature=0.7, top_k=20))
    p_first, p_second = strategy_pvalues("draft", models, ids, settings, samples=SAMPLES)
    assert p_first > 1e-3 and p_second > 1e-3, (p_first, p_second)
