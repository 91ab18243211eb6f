"""Statistics from hand-built events, checked against hand computation."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.core.events import Done, Prefill, Round
from specdeck.engines.core.stats import (
    StatsAccumulator, compute_stats, plain_step_seconds, priced, speedup,
)
from specdeck.sessions.session import load_session


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


def test_drafts_after_the_answers_end_count_as_drafted_not_kept() -> None:
    """The target kept all four drafts, but the second ended the answer (end of sequence):
    two drafts are part of it; the two after it were drafted and never shown."""
    last = Round(index=1, drafted=[5, 2, 7, 8], accepted=4, tokens=[5, 2], end=None,
                 pieces=["x", ""], rejected_pieces=[], draft_seconds=0.08,
                 verify_seconds=0.14, t=0.9, exact_match_accepted=3)
    s = compute_stats([*events()[:2], last])
    assert (s.generated_tokens, s.proposed, s.accepted) == (6, 7, 5)
    assert s.acceptance_by_position == [1.0, 1.0, 0.5, 0.0]
    assert s.exact_match_acceptance_rate == 0.5


def test_times_and_throughput() -> None:
    s = compute_stats(events())
    assert s.prefill_seconds == 0.5
    assert s.ttft_seconds == pytest.approx(0.7)
    assert s.decode_seconds == pytest.approx(0.8)
    assert s.tokens_per_s == pytest.approx(8 / 0.8)
    assert s.draft_seconds == pytest.approx(0.16)
    assert s.verify_seconds == pytest.approx(0.64)
    assert s.peak_memory_bytes == 1234 and s.finish_reason == "length"


def test_costs_and_predictions_from_hand_made_rounds() -> None:
    """The cost model on the rounds of ``events()``, worked by hand: survival 2/3, 1/3,
    1/2 -> E = 1 + 3/2; a draft step 0.16 / 8 = 0.02 s; a verify pass (drafting rounds)
    0.44 / 3 s; its own one-token pass (round 3) 0.2 s; against a plain step of 0.1 s."""
    s = compute_stats(events())
    per_draft, per_verify = 0.16 / 8, (0.14 + 0.14 + 0.16) / 3
    assert s.cost_ratio == pytest.approx(per_draft / per_verify)
    assert (s.draft_step_seconds, s.verify_pass_seconds) == pytest.approx((per_draft, per_verify))
    assert s.single_pass_seconds == pytest.approx(0.2)
    k = 8 / 3  # drafts per drafting round
    # Three drafting rounds bring 1 + 4/3 tokens each (the survival sums to 3/2: rounds
    # drafted 3, 3 and 2), one round in four drafts nothing and brings one token.
    tokens = 3 / 4 * (1 + 4 / 3) + 1 / 4
    # Alone, the run prices its rounds in its own one-token passes (0.2 s).
    assert s.cost_baseline == "one-token passes"
    assert s.draft_step_cost == pytest.approx(0.1) and s.verify_pass_cost == pytest.approx(0.44 / 0.6)
    assert s.predicted_speedup == pytest.approx(tokens / (3 / 4 * (k * 0.1 + 0.44 / 0.6) + 1 / 4))
    assert s.textbook_speedup == pytest.approx(tokens / (3 / 4 * (k * 0.1 + 1) + 1 / 4))
    # Against a plain run stepping every 0.1 s: a verify pass costs 1.47 plain steps, the
    # round that drafted nothing 2.
    against = priced(s, 0.1)
    assert against.cost_baseline == "plain"
    assert against.verify_pass_cost == pytest.approx(per_verify / 0.1)
    assert against.predicted_speedup == pytest.approx(
        tokens / (3 / 4 * (k * 0.2 + per_verify / 0.1) + 1 / 4 * 2))
    assert against.textbook_speedup == pytest.approx(tokens / (3 / 4 * (k * 0.2 + 1) + 1 / 4))
    assert against.predicted_speedup < against.textbook_speedup  # a pass costs > 1 step
    # The speed measured: 8 tokens in 0.8 s against 10 a second; the prediction has the
    # same rounds and costs, so it lands on it.
    assert speedup(s.tokens_per_s, 10.0) == pytest.approx(against.predicted_speedup)
    assert plain_step_seconds(10.0) == pytest.approx(0.1) and plain_step_seconds(None) is None


def test_plain_and_empty_runs() -> None:
    plain = [Prefill(3, 0.1, 0.1), rnd(0, [], 0, 0.3, 0.0, 0.2, end="target")]
    s = compute_stats(plain)
    assert s.acceptance_rate is None and s.mean_accepted is None and s.cost_ratio is None
    assert s.tokens_per_s == pytest.approx(1 / 0.2)
    empty = compute_stats([])
    assert empty.generated_tokens == 0 and empty.tokens_per_s is None and empty.ttft_seconds is None
    assert s.predicted_speedup is None and s.cost_baseline is None  # nothing drafted


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
    # Drafts after the answer's end (it ended inside a round's kept drafts) are not kept.
    kept = {id(r): min(r.accepted, len(r.tokens)) for r in drafting}
    accepted = sum(kept.values())
    generated = sum(len(r.tokens) for r in rounds)
    width = max((len(r.drafted) for r in drafting), default=0)
    start = prefills[-1].t if prefills else 0.0
    decode = rounds[-1].t - start if rounds else 0.0
    draft_s = sum(r.draft_seconds for r in rounds)
    verify_s = sum(r.verify_seconds for r in rounds)
    singles = [r for r in rounds if not r.drafted]
    per_draft = draft_s / proposed if proposed else None
    per_verify = sum(r.verify_seconds for r in drafting) / len(drafting) if drafting else None
    per_single = sum(r.seconds for r in singles) / len(singles) if singles else None
    cost = per_draft / per_verify if per_draft is not None and per_verify else None
    by_position = [
        sum(kept[id(r)] > i for r in drafting) / sum(len(r.drafted) > i for r in drafting)
        for i in range(width)]
    shadowed = [r for r in drafting if r.exact_match_accepted is not None]
    shadow_tried = sum(len(r.drafted) for r in shadowed)
    # The cost model by hand: a drafting round brings 1 + its accepted drafts, a round
    # that drafted nothing one token; each costs its time in plain steps, the plain step
    # being the run's own one-token pass, else the verify pass itself (the textbook's
    # verify pass and one-token pass cost one step).
    predicted = textbook = draft_cost = verify_cost = baseline = None
    if per_draft is not None and per_verify:
        step, baseline = (per_single, "one-token passes") if per_single else (per_verify, "none")
        draft_cost, verify_cost = per_draft / step, per_verify / step
        idle_cost = per_single / step if per_single else 1.0
        k, f = proposed / len(drafting), len(singles) / len(rounds)
        tokens = (1 - f) * (1 + accepted / len(drafting)) + f
        predicted = tokens / ((1 - f) * (k * draft_cost + verify_cost) + f * idle_cost)
        textbook = tokens / ((1 - f) * (k * draft_cost + 1) + f)
    return {
        "prompt_tokens": prefills[-1].prompt_tokens if prefills else 0,
        "generated_tokens": generated, "rounds": len(rounds),
        "drafting_rounds": len(drafting), "proposed": proposed, "accepted": accepted,
        "acceptance_rate": accepted / proposed if proposed else None,
        "mean_accepted": accepted / len(drafting) if drafting else None,
        "tokens_per_round": generated / len(rounds) if rounds else None,
        "acceptance_by_position": by_position,
        "prefill_seconds": prefills[-1].seconds if prefills else 0.0,
        "ttft_seconds": rounds[0].t if rounds else None,
        "decode_seconds": decode, "draft_seconds": draft_s, "verify_seconds": verify_s,
        "tokens_per_s": generated / decode if decode else None,
        "cost_ratio": cost, "predicted_speedup": predicted,
        "peak_memory_bytes": dones[-1].peak_memory_bytes if dones else None,
        "finish_reason": dones[-1].reason if dones else None,
        "draft_step_seconds": per_draft, "verify_pass_seconds": per_verify,
        "single_pass_seconds": per_single, "draft_step_cost": draft_cost,
        "verify_pass_cost": verify_cost, "cost_baseline": baseline,
        "textbook_speedup": textbook,
        "exact_match_acceptance_rate": (
            sum(min(r.exact_match_accepted, len(r.tokens)) for r in shadowed) / shadow_tried if shadow_tried else None),
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
    from specdeck.engines.runs.compare import run_compare
    from specdeck.engines.core.requests import CompareRequest

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
