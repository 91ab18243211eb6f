"""The plain and draft strategies against each other and against mlx-lm as an oracle."""

from __future__ import annotations

from dataclasses import replace

import mlx.core as mx
import pytest
from mlx_lm.generate import generate_step, speculative_generate_step
from mlx_lm.sample_utils import make_sampler

from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.core.events import Done, Prefill, Round, Trace
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.core.stats import compute_stats
from specdeck.engines.decode.run import Models, run_strategy
from helpers.lossless import PROMPT, strategy_pvalues

TOKENS = 48


@pytest.fixture(scope="module")
def store() -> ModelStore:
    return ModelStore()


def pair(store: ModelStore, family: dict, target: str, draft: str) -> Models:
    return Models(store.get(str(family[target])), store.get(str(family[draft])))


def run(name: str, models: Models, settings: DecodeSettings, prompt: str = PROMPT) -> Trace:
    ids = models.target.tokenizer.encode(prompt)
    return Trace(name, list(run_strategy(name, models, ids, settings)))


def greedy(**kw) -> DecodeSettings:
    kw.setdefault("max_tokens", TOKENS)
    return DecodeSettings(stop_at_eos=False, **kw)


PAIRS = [
    ("llama_target", "llama_draft"),  # attention only
    ("hybrid_target", "hybrid_draft"),  # both hybrid
    ("hybrid_target", "llama_draft"),  # hybrid target, attention draft
    ("llama_target", "hybrid_draft"),  # attention target, hybrid draft
    ("qwen3_target", "llama_draft"),
]


@pytest.mark.parametrize("target,draft", PAIRS)
def test_draft_equals_plain_at_temperature_zero(tiny_family, store, target, draft) -> None:
    models = pair(store, tiny_family, target, draft)
    plain = run("plain", models, greedy())
    assert len(plain.tokens) == TOKENS
    assert len(set(plain.tokens)) > 5, "fixture should not emit one token forever"
    for k in range(1, 9):
        spec = run("draft", models, greedy(num_draft_tokens=k))
        assert spec.tokens == plain.tokens, f"k={k} diverged"
        assert spec.text == plain.text
        assert spec.done.reason == "length"


def test_hybrid_rejections_rewind_from_captured_states(tiny_family, store) -> None:
    """Both models hybrid: a rejection sets the target's recurrent layers to the state
    its verify pass kept for the last accepted position; nothing is fed twice."""
    models = pair(store, tiny_family, "hybrid_target", "hybrid_draft")
    trace = run("draft", models, greedy(num_draft_tokens=4))
    stats = compute_stats(trace.events)
    assert 0.1 < stats.acceptance_rate < 0.95
    rejected = [r for r in trace.rounds if r.accepted < len(r.drafted)]
    assert rejected and all(r.rollback == "captured" for r in rejected)
    assert all(r.replayed == 0 for r in trace.rounds)


def test_hybrid_without_capture_restores_and_replays(tiny_family, store, monkeypatch) -> None:
    """Recurrent layers of another layout (mamba, ...) have no captured states: the
    target restores the state from before the pass and feeds the kept tokens again."""
    from specdeck.engines.decode import speculative
    monkeypatch.setattr(speculative, "supports_capture", lambda model: False)
    models = pair(store, tiny_family, "hybrid_target", "hybrid_draft")
    plain = run("plain", models, greedy())
    for k in (1, 4):
        trace = run("draft", models, greedy(num_draft_tokens=k))
        assert trace.tokens == plain.tokens
        replays = [r for r in trace.rounds if r.rollback == "replay"]
        assert replays and all(r.replayed == r.accepted + 1 for r in replays)


def test_round_structure(tiny_family, store) -> None:
    models = pair(store, tiny_family, "llama_target", "llama_draft")
    trace = run("draft", models, greedy(num_draft_tokens=3, alternatives=4))
    assert isinstance(trace.events[0], Prefill)
    assert isinstance(trace.events[-1], Done)
    for r in trace.rounds:
        assert r.tokens[: r.accepted] == r.drafted[: r.accepted]
        assert len(r.pieces) == len(r.tokens)
        assert len(r.rejected_pieces) == len(r.drafted) - r.accepted
        if r.end == "bonus":
            assert r.accepted == len(r.drafted)
        if r.end == "correction":
            assert r.tokens[-1] != r.drafted[r.accepted]
        # Greedy: the target's top alternative at each kept position is the kept token.
        assert len(r.alternatives) == len(r.drafted) + 1
        for row, token in zip(r.alternatives, r.tokens):
            assert row[0][0] == token
            assert [p for _, p in row] == sorted((p for _, p in row), reverse=True)
        assert all(0 <= p <= 1 for p in r.draft_probs + r.target_probs)
    assert {"bonus", "correction"} <= {r.end for r in trace.rounds}



def test_the_loops_plain_steps_record_plain_decodings_alternatives(tiny_family, store) -> None:
    """Prompt lookup that can never match runs every round as a plain step queued before
    the previous token is read: its tokens, and the target's alternatives at each, are
    plain decoding's."""
    models = pair(store, tiny_family, "llama_target", "llama_draft")
    settings = greedy(alternatives=4, ngram_n=4 * TOKENS)  # longer than any run: no match
    plain, lookup = run("plain", models, settings), run("ngram", models, settings)
    assert not any(r.drafted for r in lookup.rounds)
    assert lookup.tokens == plain.tokens
    assert [r.alternatives for r in lookup.rounds] == [r.alternatives for r in plain.rounds]

def mlx_lm_rounds(flags: list[bool]) -> list[int]:
    """Accepted drafts per round from mlx-lm's from_draft flags."""
    rounds, run_length = [], 0
    for from_draft in flags:
        if from_draft:
            run_length += 1
        else:
            rounds.append(run_length)
            run_length = 0
    if run_length:
        rounds.append(run_length)
    return rounds


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_draft_matches_mlx_lm_round_by_round(tiny_family, store, k) -> None:
    models = pair(store, tiny_family, "llama_target", "llama_draft")
    ids = models.target.tokenizer.encode(PROMPT)
    oracle = list(
        speculative_generate_step(
            mx.array(ids), models.target.model, models.draft.model,
            num_draft_tokens=k, max_tokens=TOKENS,
        )
    )
    ours = run("draft", models, greedy(num_draft_tokens=k))
    assert ours.tokens == [t for t, _, _ in oracle]
    assert [r.accepted for r in ours.rounds] == mlx_lm_rounds([f for _, _, f in oracle])


def test_plain_matches_mlx_lm_generate_step(tiny_family, store) -> None:
    for name in ("llama_target", "hybrid_target"):
        target = store.get(str(tiny_family[name]))
        ids = target.tokenizer.encode(PROMPT)
        oracle = [t for t, _ in generate_step(mx.array(ids), target.model, max_tokens=TOKENS)]
        assert run("plain", Models(target), greedy()).tokens == oracle


def test_hybrid_target_where_mlx_lm_refuses(tiny_family, store) -> None:
    models = pair(store, tiny_family, "hybrid_target", "hybrid_draft")
    ids = models.target.tokenizer.encode(PROMPT)
    with pytest.raises(ValueError, match="trimmable"):
        next(speculative_generate_step(mx.array(ids), models.target.model, models.draft.model))
    assert run("draft", models, greedy()).tokens == run("plain", models, greedy()).tokens


@pytest.fixture(scope="module")
def sliding_target(tiny_family, tmp_path_factory) -> str:
    """The llama target with its first layer attending through an 8-token sliding window
    (a RotatingKVCache, as Gemma 3 or Ministral use): same weights, new config."""
    import json
    import shutil

    out = tmp_path_factory.mktemp("sliding") / "llama_sliding"
    shutil.copytree(tiny_family["llama_target"], out)
    config = json.loads((out / "config.json").read_text())
    layers = config["num_hidden_layers"]
    config["layer_types"] = ["sliding_attention"] + ["full_attention"] * (layers - 1)
    config["sliding_window"] = 8
    (out / "config.json").write_text(json.dumps(config))
    return str(out)


@pytest.mark.parametrize("k", [1, 3, 4])
def test_rotating_window_after_wrap(tiny_family, store, sliding_target, k) -> None:
    """A sliding-window layer wraps its cache early in the run; rewinds then restore it
    and replay, and the output still equals plain decoding (and mlx-lm's)."""
    target = store.get(sliding_target)
    models = Models(target, store.get(str(tiny_family["llama_draft"])))
    ids = target.tokenizer.encode(PROMPT)
    oracle = [t for t, _ in generate_step(mx.array(ids), target.model, max_tokens=TOKENS)]
    plain = run("plain", models, greedy())
    assert plain.tokens == oracle
    assert plain.tokens != run("plain", pair(store, tiny_family, "llama_target", "llama_draft"), greedy()).tokens
    spec = run("draft", models, greedy(num_draft_tokens=k))
    assert spec.tokens == plain.tokens
    assert "replay" in {r.rollback for r in spec.rounds}


def test_eos_stops_and_max_tokens_truncates(tiny_family, store) -> None:
    models = pair(store, tiny_family, "llama_target", "llama_draft")
    plain = run("plain", models, greedy())
    # Pretend the 10th greedy token is end-of-sequence.
    stop = plain.tokens[9]
    first = plain.tokens.index(stop)
    tokenizer = models.target.tokenizer
    saved = tokenizer.eos_token_ids
    tokenizer.eos_token_ids = {stop}
    try:
        for name in ("plain", "draft"):
            trace = run(name, models, replace(greedy(num_draft_tokens=4), stop_at_eos=True))
            assert trace.tokens == plain.tokens[: first + 1]
            assert trace.done.reason == "stop"
    finally:
        tokenizer.eos_token_ids = saved
    for n in (1, 2, 5):
        trace = run("draft", models, greedy(max_tokens=n, num_draft_tokens=4))
        assert trace.tokens == plain.tokens[:n]
        assert trace.done.reason == "length"


def test_cancel_ends_with_done_and_keeps_rounds(tiny_family, store) -> None:
    models = pair(store, tiny_family, "llama_target", "llama_draft")
    ids = models.target.tokenizer.encode(PROMPT)
    seen = []

    def cancelled() -> bool:
        return len(seen) >= 3

    for event in run_strategy("draft", models, ids, greedy(), cancelled=cancelled):
        seen.append(event)
    assert isinstance(seen[-1], Done) and seen[-1].reason == "cancelled"
    assert sum(isinstance(e, Round) for e in seen) == 2
    assert seen[-1].generated_tokens == sum(len(e.tokens) for e in seen if isinstance(e, Round))


# --- temperature > 0 -------------------------------------------------------------------


#: Tempered and filtered: a p or q that skips a filter or the temperature shows.
FILTERED = Sampling(temperature=0.8, top_p=0.9, top_k=20, min_p=0.02)


@pytest.mark.slow
def test_draft_sampling_is_lossless(tiny_family, store) -> None:
    """Both models hybrid (the target's states captured, the draft's restored): two
    tokens at k=2 cover acceptance, correction and bonus, and a round after a rewind."""
    models = pair(store, tiny_family, "hybrid_target", "hybrid_draft")
    settings = DecodeSettings(max_tokens=2, stop_at_eos=False, num_draft_tokens=2,
                              sampling=FILTERED)
    ids = models.target.tokenizer.encode(PROMPT)
    pvalues = strategy_pvalues("draft", models, ids, settings)
    assert min(pvalues) > 1e-3, pvalues


def test_plain_sampling_matches_target(tiny_family, store) -> None:
    models = Models(store.get(str(tiny_family["llama_target"])))
    settings = DecodeSettings(max_tokens=2, stop_at_eos=False, sampling=FILTERED)
    pvalues = strategy_pvalues("plain", models, models.target.tokenizer.encode(PROMPT),
                               settings)
    assert min(pvalues) > 1e-3, pvalues


def test_sampling_acceptance_beats_mlx_lm_exact_match(tiny_family, store) -> None:
    models = pair(store, tiny_family, "llama_target", "llama_draft")
    ids = models.target.tokenizer.encode(PROMPT)
    k, n = 2, 200
    mx.random.seed(0)
    oracle = list(
        speculative_generate_step(
            mx.array(ids), models.target.model, models.draft.model,
            num_draft_tokens=k, max_tokens=n, sampler=make_sampler(0.7),
        )
    )
    rounds = mlx_lm_rounds([f for _, _, f in oracle])
    theirs = sum(rounds) / (k * len(rounds))
    settings = DecodeSettings(max_tokens=n, stop_at_eos=False, num_draft_tokens=k,
                              sampling=Sampling(temperature=0.7))
    ours = compute_stats(run("draft", models, settings).events).acceptance_rate
    assert ours > theirs + 0.1, (ours, theirs)


# --- timing, wired memory and the buffer cache --------------------------------------------


class TickClock:
    """A clock that advances one second per reading: every interval a run reports is a
    whole number of readings, so sums compare exactly."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.mark.parametrize("name", ["plain", "draft", "ngram"])
def test_round_times_tile_the_decode(tiny_family, store, name) -> None:
    """Each round's draft and verify phases are disjoint and, round after round, cover the
    whole decode: recording a round while the next one's verify pass runs moves no time out
    of the rounds."""
    models = pair(store, tiny_family, "llama_target", "llama_draft")
    ids = models.target.tokenizer.encode(PROMPT)
    events = list(run_strategy(name, models, ids, greedy(num_draft_tokens=3), TickClock()))
    trace = Trace(name, events)
    previous = trace.prefill.t
    for r in trace.rounds:
        assert r.draft_seconds >= 0 and r.verify_seconds > 0
        assert r.t - previous == r.draft_seconds + r.verify_seconds
        previous = r.t
    assert trace.done.seconds > trace.rounds[-1].t
    if name == "draft":
        assert all(r.draft_seconds > 0 for r in trace.rounds)


class FakeMetal:
    """What mlx reports on Apple Silicon, recorded instead of applied."""

    RECOMMENDED = 48 * 2**30

    def __init__(self) -> None:
        self.limits: list[int] = []

    def set_wired_limit(self, limit: int) -> int:
        self.limits.append(limit)
        return 0 if len(self.limits) % 2 else self.RECOMMENDED


def test_wired_limit_is_raised_for_a_run_on_metal_only(tiny_family, store, monkeypatch) -> None:
    """As mlx-lm's generate does: on Metal the limit is the recommended working set while
    runs go on (overlapping runs raise it once), and the old one comes back when the last
    ends, cancelled or not; the CPU backend never touches it."""
    models = pair(store, tiny_family, "llama_target", "llama_draft")
    ids = models.target.tokenizer.encode(PROMPT)

    def refuse(limit: int) -> int:
        raise AssertionError("the wired limit is set on the CPU backend")

    monkeypatch.setattr(mx, "set_wired_limit", refuse)
    assert run("plain", models, greedy()).done.reason == "length"

    metal = FakeMetal()
    monkeypatch.setattr(mx, "set_wired_limit", metal.set_wired_limit)
    monkeypatch.setattr(mx.metal, "is_available", lambda: True)
    monkeypatch.setattr(mx, "device_info", lambda: {
        "max_recommended_working_set_size": FakeMetal.RECOMMENDED})
    first = run_strategy("draft", models, ids, greedy())
    second = run_strategy("plain", models, ids, greedy())
    next(first), next(second)
    assert metal.limits == [FakeMetal.RECOMMENDED]
    list(second)
    assert metal.limits == [FakeMetal.RECOMMENDED]  # the draft run still goes on
    first.close()  # cancelled mid-run
    assert metal.limits == [FakeMetal.RECOMMENDED, 0]


def test_buffer_cache_is_freed_every_few_hundred_tokens(tiny_family, store, monkeypatch) -> None:
    """As mlx-lm's loops do: a long run frees mlx's buffer cache as it goes, and so does a
    prefill in several chunks (between chunks), so a long-lived engine process does not
    keep every buffer size it ever used."""
    models = pair(store, tiny_family, "llama_target", "llama_draft")
    ids = models.target.tokenizer.encode(PROMPT)
    cleared = []
    monkeypatch.setattr(mx, "clear_cache", lambda: cleared.append(1))
    for name in ("plain", "draft"):
        cleared.clear()
        list(run_strategy(name, models, ids, greedy(max_tokens=600)))
        assert len(cleared) == 2, name  # after 256 and 512 tokens
    cleared.clear()
    list(run_strategy("plain", models, ids, greedy(max_tokens=1, prefill_step_size=4)))
    assert len(cleared) == (len(ids) - 2) // 4  # between chunks, not after the last
