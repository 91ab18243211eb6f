"""The cost model (engines/core/cost_model.py): worked by hand, and against what the demo
family measures: the prediction from a run's own costs lands within 15 % of the speedup
measured in the same run, at k = 1, 4 and 16, where the textbook's does not have to."""

from __future__ import annotations

import pytest

from specdeck.engines.runs.compare import run_compare
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.cost_model import CostModel
from specdeck.engines.models.demo import require_demo_models
from specdeck.engines.core.events import Prefill
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.core.stats import compute_stats, cost_model
from specdeck.prompts import get_prompt
from specdeck.sessions.session import strategy_stats


def test_the_cost_model_by_hand() -> None:
    """k = 4, survival 0.9, 0.7, 0.4, 0.1; a draft step 0.1 plain steps; a verify pass of
    5 tokens 1.8 plain steps."""
    m = CostModel((0.9, 0.7, 0.4, 0.1), 4, 0.1, 1.8)
    assert m.expected_tokens() == pytest.approx(3.1)
    assert m.expected_tokens(2) == pytest.approx(2.6)
    assert m.round_cost() == pytest.approx(4 * 0.1 + 1.8)
    assert m.predicted() == pytest.approx(3.1 / 2.2)
    assert m.textbook() == pytest.approx(3.1 / 1.4)
    # The verify line: one step for one token, 1.8 for five: 0.2 a token.
    assert m.verify_slope == pytest.approx(0.2) and m.verify_cost(2) == pytest.approx(1.4)
    assert m.verify_cost(4) == pytest.approx(1.8) and m.position_cost == pytest.approx(0.3)
    by_k = [m.predicted(k) for k in range(1, 5)]
    assert by_k == pytest.approx([1.9 / 1.3, 2.6 / 1.6, 3.0 / 1.9, 3.1 / 2.2])
    assert m.best_k() == 2  # 1.625x: the third draft survives 40 %, less than it costs
    # The survival curve crosses the cost line between the best k and the next.
    line = m.cost_line()
    assert line == pytest.approx(0.3 * 2.6 / 1.6)
    assert m.survival[1] >= line > m.survival[2]
    assert "takes a verify pass of 5 tokens as one plain step; here it costs 1.80" in m.gap_words()
    assert "about one plain step" in CostModel((0.5,), 1, 0.1, 1.05).gap_words()
    # Without a plain step a verify pass counts as one: prediction and textbook agree.
    alone = CostModel.measured((0.5,), 1, 0.002, 0.01, None, "plain")
    assert alone.baseline == "none" and alone.predicted() == pytest.approx(alone.textbook())
    assert "counts as one plain step" in alone.gap_words()


def test_a_cliff_at_large_k() -> None:
    """Survival that falls by 40 % at each position: past a few drafts each one costs more than
    it brings, and at k = 16 speculation is slower than plain decoding."""
    m = CostModel(tuple(0.8 * 0.6**i for i in range(16)), 16, 0.1, 1 + 0.12 * 16)
    assert 2 <= m.best_k() <= 4 and m.predicted(m.best_k()) > 1
    assert m.predicted() < 1 < m.textbook()
    assert cost_model(compute_stats([Prefill(3, 0.1, 0.1)])) is None  # nothing drafted


@pytest.fixture(scope="module")
def store() -> ModelStore:
    return ModelStore()


@pytest.mark.parametrize("k", [1, 4, 16])
def test_the_prediction_lands_on_the_measured_speedup_on_the_demo_family(store, k) -> None:
    """One comparison (plain, then draft at k), each warmed up: the draft run's rounds,
    priced in the plain run's steps, predict the speedup that run measured."""
    demo = require_demo_models()
    result = run_compare(CompareRequest(
        target=demo.target, draft=demo.draft, strategies=["plain", "draft"],
        prompt=get_prompt("code").text, warmup_tokens=16,
        settings=DecodeSettings(max_tokens=128, num_draft_tokens=k, stop_at_eos=False),
    ), store)
    draft = strategy_stats(result.traces)["draft"]
    assert draft["cost_baseline"] == "plain"
    measured, predicted = draft["speedup_vs_plain"], draft["predicted_speedup"]
    assert predicted == pytest.approx(measured, rel=0.15), (k, draft)
    # The textbook prices the same rounds with a verify pass at one plain step: it says
    # more exactly when a pass costs more than a step.
    assert (draft["textbook_speedup"] > predicted) == (draft["verify_pass_cost"] > 1)
