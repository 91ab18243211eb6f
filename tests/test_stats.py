"""Statistics from hand-built events, checked against hand computation."""

from __future__ import annotations

import pytest

from specdeck.engines.events import Done, Prefill, Round
from specdeck.engines.stats import compute_stats, expected_tokens_per_round, predicted_speedup


def rnd(i, drafted, accepted, t, draft_s, verify_s, end="correction"):
    tokens = drafted[:accepted] + [99]
    return Round(
        index=i, drafted=drafted, accepted=accepted, tokens=tokens, end=end,
        pieces=["x"] * len(tokens), rejected_pieces=["y"] * (len(drafted) - accepted),
        draft_seconds=draft_s, verify_seconds=verify_s, t=t,
    )


def events():
    return [
        Prefill(prompt_tokens=10, seconds=0.5, t=0.5),
        rnd(0, [1, 2, 3], 3, 0.7, 0.06, 0.14, end="bonus"),   # 4 tokens
        rnd(1, [1, 2, 3], 1, 0.9, 0.06, 0.14),                # 2 tokens
        rnd(2, [1, 2], 0, 1.1, 0.04, 0.16),                   # 1 token
        rnd(3, [], 0, 1.3, 0.0, 0.2, end="target"),           # 1 token
        Done(reason="length", generated_tokens=8, seconds=1.3, peak_memory_bytes=1234),
    ]


def test_counts_rates_and_positions() -> None:
    s = compute_stats(events())
    assert (s.prompt_tokens, s.generated_tokens, s.rounds) == (10, 8, 4)
    assert (s.proposed, s.accepted, s.drafting_rounds) == (8, 4, 3)
    assert s.acceptance_rate == pytest.approx(0.5)
    assert s.mean_accepted == pytest.approx(4 / 3)  # drafting rounds only
    assert s.tokens_per_round == pytest.approx(2.0)
    # position 0: tried 3, kept 2; position 1: tried 3, kept 1; position 2: tried 2, kept 1
    assert s.acceptance_by_position == pytest.approx([2 / 3, 1 / 3, 1 / 2])


def test_times_and_throughput() -> None:
    s = compute_stats(events())
    assert s.prefill_seconds == 0.5
    assert s.ttft_seconds == pytest.approx(0.7)
    assert s.decode_seconds == pytest.approx(0.8)
    assert s.tokens_per_s == pytest.approx(8 / 0.8)
    assert s.draft_seconds == pytest.approx(0.16)
    assert s.verify_seconds == pytest.approx(0.64)
    assert s.peak_memory_bytes == 1234 and s.finish_reason == "length"


def test_cost_ratio_and_predicted_speedup() -> None:
    s = compute_stats(events())
    per_draft = 0.16 / 8
    per_verify = (0.14 + 0.14 + 0.16) / 3
    assert s.cost_ratio == pytest.approx(per_draft / per_verify)
    k = 8 / 3
    expected = (1 - 0.5 ** (k + 1)) / (1 - 0.5) / (k * s.cost_ratio + 1)
    assert s.predicted_speedup == pytest.approx(expected)


def test_expected_tokens_formula() -> None:
    assert expected_tokens_per_round(0.0, 4) == 1.0
    assert expected_tokens_per_round(1.0, 4) == 5.0
    assert expected_tokens_per_round(0.5, 2) == pytest.approx(1.75)
    # The field's cliff: more drafts than the acceptance supports cost more than they win.
    assert predicted_speedup(0.6, 2, 0.2) > predicted_speedup(0.6, 16, 0.2)
    assert predicted_speedup(0.6, 16, 0.2) < 1.0


def test_plain_and_empty_runs() -> None:
    plain = [Prefill(3, 0.1, 0.1), rnd(0, [], 0, 0.3, 0.0, 0.2, end="target")]
    s = compute_stats(plain)
    assert s.acceptance_rate is None and s.mean_accepted is None and s.cost_ratio is None
    assert s.tokens_per_s == pytest.approx(1 / 0.2)
    empty = compute_stats([])
    assert empty.generated_tokens == 0 and empty.tokens_per_s is None and empty.ttft_seconds is None
