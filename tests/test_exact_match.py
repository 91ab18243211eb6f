"""mlx-lm's exact-match rule recorded beside the real one: what it
would have kept of the same drafts, without changing a single output token."""

from __future__ import annotations

import mlx.core as mx
import pytest

from specdeck.engines.runs.compare import encode_prompt, load_models
from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.models.demo import require_demo_models
from specdeck.engines.core.events import Round, Trace
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.decode.sampling import inverse_cdf, leading_run
from specdeck.engines.core.stats import compute_stats
from specdeck.engines.decode.run import run_strategy
from specdeck.prompts import get_prompt
from specdeck.sessions.session import load_session, save_document, session_from_document


def test_inverse_cdf_draws_the_token_whose_interval_holds_the_uniform() -> None:
    probs = mx.array([[0.1, 0.2, 0.7, 0.0]] * 5)
    uniforms = mx.array([0.0, 0.05, 0.15, 0.31, 0.9999])
    assert inverse_cdf(probs, uniforms).tolist() == [0, 0, 1, 2, 2]
    # Never a token of no probability, even where the row sums a little short of 1.
    short = mx.array([[0.5, 0.49999, 0.0, 0.0]])
    assert inverse_cdf(short, mx.array([0.99999999])).tolist() == [1]


def test_leading_run_counts_until_the_first_rejection() -> None:
    assert leading_run([]) == 0
    assert leading_run([True, True, False, True]) == 2
    assert leading_run([True, True]) == 2
    assert leading_run([False, True]) == 0


@pytest.fixture(scope="module")
def demo():
    family = require_demo_models()
    request = CompareRequest(target=family.target, draft=family.draft,
                             strategies=["plain", "draft", "mtp", "ngram"], prompt="-")
    return load_models(request, ModelStore())


def run(demo, name: str, settings: DecodeSettings, prompt: str = "code") -> Trace:
    ids = encode_prompt(demo.target.tokenizer, get_prompt(prompt).text)
    return Trace(name, list(run_strategy(name, demo, ids, settings)))


@pytest.mark.parametrize("name", ["draft", "mtp", "ngram"])
def test_at_temperature_zero_both_rules_keep_the_same(demo, name) -> None:
    settings = DecodeSettings(max_tokens=48, stop_at_eos=False, num_draft_tokens=4,
                              mtp_depth=2)
    trace = run(demo, name, settings)
    drafting = [r for r in trace.rounds if r.drafted]
    assert drafting
    assert all(r.exact_match_accepted == r.accepted for r in drafting)
    assert all(r.exact_match_accepted is None for r in trace.rounds if not r.drafted)
    stats = compute_stats(trace.events)
    assert stats.exact_match_acceptance_rate == stats.acceptance_rate


def test_at_temperature_0_7_min_p_over_q_keeps_more_on_the_demo_pair(demo) -> None:
    settings = DecodeSettings(max_tokens=160, stop_at_eos=False, num_draft_tokens=3,
                              sampling=Sampling(temperature=0.7, seed=1))
    trace = run(demo, "draft", settings)
    stats = compute_stats(trace.events)
    assert stats.proposed > 100
    assert stats.exact_match_acceptance_rate + 0.1 < stats.acceptance_rate, stats
    # Rounds record both verdicts on the same drafts, each a count of leading drafts.
    assert all(0 <= r.exact_match_accepted <= len(r.drafted) for r in trace.rounds if r.drafted)
    assert any(r.exact_match_accepted != r.accepted for r in trace.rounds)


def test_the_shadow_never_changes_the_output(demo, monkeypatch) -> None:
    """The same seed with the exact-match draws made or not: the same tokens."""
    from specdeck.engines.decode import sampling

    settings = DecodeSettings(max_tokens=64, stop_at_eos=False, num_draft_tokens=3,
                              sampling=Sampling(temperature=0.7, seed=5))
    with_shadow = run(demo, "draft", settings).tokens
    monkeypatch.setattr(sampling, "inverse_cdf", lambda probs, uniforms: mx.zeros(
        uniforms.shape, mx.uint32))
    assert run(demo, "draft", settings).tokens == with_shadow


def test_sessions_from_before_the_field_still_load_and_replay(demo, tmp_path) -> None:
    from specdeck.sessions.session import build_document

    settings = DecodeSettings(max_tokens=24, stop_at_eos=False,
                              sampling=Sampling(temperature=0.7, seed=2))
    traces = {"plain": run(demo, "plain", settings), "draft": run(demo, "draft", settings)}
    document = build_document({"prompt": "x", "strategies": list(traces),
                               "settings": settings.to_dict()}, {}, traces)
    for entry in document["strategies"].values():
        for r in entry["rounds"]:
            del r["exact_match_accepted"]
        del entry["stats"]["exact_match_acceptance_rate"]
    path = tmp_path / "old.json"
    save_document(path, document)
    session = load_session(path)
    assert session.traces["draft"].tokens == traces["draft"].tokens
    assert all(isinstance(r, Round) and r.exact_match_accepted is None
               for r in session.traces["draft"].rounds)
    assert session.stats()["draft"]["exact_match_acceptance_rate"] is None
    assert session_from_document(document).traces["draft"].text == traces["draft"].text
