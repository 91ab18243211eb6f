"""Statistics from hand-built events, checked against hand computation."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdeck.engines.config import DecodeSettings, Sampling
from specdeck.engines.events import Done, Prefill, Round
from specdeck.engines.stats import (
    StatsAccumulator, compute_stats, expected_tokens_per_round, predicted_speedup, speedup,
)
from specdeck.session import load_session


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


# --- the accumulator against the definitions, at every prefix of real runs --------------

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "sessions" / "examples").glob("*.json"))


def defined_stats(events: list) -> dict:
    """The statistics as the module docstring and ``Stats`` define them, computed over
    the whole list at once: the oracle the incremental fold must agree with."""
    prefills = [e for e in events if isinstance(e, Prefill)]
    dones = [e for e in events if isinstance(e, Done)]
    rounds = [e for e in events if isinstance(e, Round)]
    drafting = [r for r in rounds if r.drafted]
    proposed = sum(len(r.drafted) for r in drafting)
    accepted = sum(r.accepted for r in drafting)
    generated = sum(len(r.tokens) for r in rounds)
    width = max((len(r.drafted) for r in drafting), default=0)
    start = prefills[-1].t if prefills else 0.0
    decode = rounds[-1].t - start if rounds else 0.0
    draft_s = sum(r.draft_seconds for r in rounds)
    verify_s = sum(r.verify_seconds for r in rounds)
    cost = predicted = None
    if drafting and verify_s > 0:
        per_verify = sum(r.verify_seconds for r in drafting) / len(drafting)
        cost = (draft_s / proposed) / per_verify if per_verify > 0 else None
        if cost is not None:
            predicted = predicted_speedup(accepted / proposed, proposed / len(drafting), cost)
    return {
        "prompt_tokens": prefills[-1].prompt_tokens if prefills else 0,
        "generated_tokens": generated, "rounds": len(rounds),
        "drafting_rounds": len(drafting), "proposed": proposed, "accepted": accepted,
        "acceptance_rate": accepted / proposed if proposed else None,
        "mean_accepted": accepted / len(drafting) if drafting else None,
        "tokens_per_round": generated / len(rounds) if rounds else None,
        "acceptance_by_position": [
            sum(r.accepted > i for r in drafting) / sum(len(r.drafted) > i for r in drafting)
            for i in range(width)],
        "prefill_seconds": prefills[-1].seconds if prefills else 0.0,
        "ttft_seconds": rounds[0].t if rounds else None,
        "decode_seconds": decode, "draft_seconds": draft_s, "verify_seconds": verify_s,
        "tokens_per_s": generated / decode if decode else None,
        "cost_ratio": cost, "predicted_speedup": predicted,
        "peak_memory_bytes": dones[-1].peak_memory_bytes if dones else None,
        "finish_reason": dones[-1].reason if dones else None,
    }


def assert_agrees(stats, events: list, where: tuple) -> None:
    """Counts, reasons and Nones exactly; sums of times to the last bits (a running sum
    and ``sum()`` may round differently)."""
    actual, expected = stats.to_dict(), defined_stats(events)
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        close = pytest.approx(value, rel=1e-12) if isinstance(value, (float, list)) else value
        assert actual[key] == close, (*where, key)


def real_traces() -> list:
    """Every strategy of the shipped example sessions (the demo family, temperature 0)."""
    return [t for path in EXAMPLES for t in load_session(path).traces.values()]


def test_the_accumulator_equals_the_definitions_at_every_prefix_of_real_runs() -> None:
    traces = real_traces()
    assert len(traces) >= 8 and {t.strategy for t in traces} >= {"plain", "draft", "mtp", "ngram"}
    for trace in traces:
        acc = StatsAccumulator()
        for n, event in enumerate(trace.events, 1):
            acc.add(event)
            assert_agrees(acc.stats, trace.events[:n], (trace.strategy, n))
        assert acc.stats == compute_stats(trace.events)


def test_the_accumulator_on_sampled_runs_of_the_tiny_models(tiny_family) -> None:
    """Temperature > 0 and a wide k: acceptance varies by position, rounds stop early."""
    from specdeck.engines.compare import run_compare
    from specdeck.engines.requests import CompareRequest

    result = run_compare(CompareRequest(
        target=str(tiny_family["llama_target"]), draft=str(tiny_family["llama_draft"]),
        strategies=["plain", "draft", "ngram"], prompt="def add(a, b):\n    return a",
        warmup_tokens=0, settings=DecodeSettings(
            max_tokens=48, num_draft_tokens=5, sampling=Sampling(temperature=0.8, seed=3))))
    for trace in result.traces.values():
        acc = StatsAccumulator()
        for n, event in enumerate(trace.events, 1):
            acc.add(event)
            assert_agrees(acc.stats, trace.events[:n], (trace.strategy, n))
    assert compute_stats(result.traces["draft"].events).proposed > 0


def test_speedup_over_plain() -> None:
    assert speedup(150.0, 100.0) == pytest.approx(1.5)
    assert speedup(None, 100.0) is None and speedup(150.0, None) is None
    assert speedup(150.0, 0.0) is None and speedup(0.0, 100.0) is None
