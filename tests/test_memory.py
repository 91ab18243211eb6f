"""Memory estimates: each term against what mlx allocates, the whole estimate within 25 %
of the peak measured by real runs, and the headroom check's warning and refusal."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from specdeck.engines.models.catalog import describe_dir
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.errors import ModelError
from specdeck.engines.measure.memory import (
    KV_STEP, MemoryEstimate, check_headroom, estimate, estimate_comparison, free_memory,
    weight_bytes,
)
from specdeck.engines.models.demo import demo_models
from specdeck.cli import main

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "def add(a, b):\n    return a + b\n"


#: Runs each command line it reads (JSON, one a line) as ``specdeck`` would, freeing
#: every array between them: each comparison finds nothing else allocated, as in a fresh
#: process, for the cost of one.
_MEASURE = """
import gc, json, sys
import mlx.core as mx
from specdeck.cli import main
for line in sys.stdin:
    status = main(json.loads(line))
    gc.collect()
    mx.clear_cache()
    if status:
        sys.exit(status)
"""


def measured(tmp_path: Path, runs: dict[str, tuple]) -> dict[str, dict]:
    """Headless comparisons, one process for all: each run's document with each
    strategy's estimate and measured peak. ``runs``: name -> (target, draft or None,
    strategies, extra arguments)."""
    lines = []
    for name, (target, draft, strategies, extra) in runs.items():
        args = ["compare", "--headless", "--no-save", "--json", str(tmp_path / f"{name}.json"),
                "--target", str(target), "--strategies", strategies, "--ignore-eos",
                "--prompt", PROMPT, *extra]
        if draft:
            args += ["--draft", str(draft)]
        lines.append(orjson.dumps(args).decode())
    env = {**os.environ, "SPECDECK_NO_OPENBLAS": "1"}
    result = subprocess.run([sys.executable, "-c", _MEASURE], input="\n".join(lines),
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return {name: orjson.loads((tmp_path / f"{name}.json").read_bytes()) for name in runs}


def assert_within_25_percent(doc: dict) -> None:
    for name, entry in doc["strategies"].items():
        estimate_ = doc["config"]["memory_estimates"][name]["total"]
        peak = entry["done"]["peak_memory_bytes"]
        assert 0.75 * peak <= estimate_ <= 1.25 * peak, (name, estimate_, peak)


# 260 tokens after the prompt's 16 cross a KV cache growth (256 positions), the
# costliest moment.
LONG = ["--max-tokens", "260"]


def assert_all_within_25_percent(docs: dict[str, dict]) -> None:
    for name, doc in docs.items():
        assert set(doc["strategies"]) == set(doc["config"]["memory_estimates"]), name
        assert_within_25_percent(doc)


@pytest.mark.slow
def test_estimate_within_25_percent_of_measured_peak(tiny_family, tmp_path) -> None:
    """The tiny families, and a model drafting for itself (loaded once: its weights
    count once)."""
    family = tiny_family
    assert_all_within_25_percent(measured(tmp_path, {
        "llama": (family["llama_target"], family["llama_draft"], "plain,draft,ngram",
                  [*LONG, "-k", "3"]),
        "hybrid": (family["hybrid_target"], family["hybrid_draft"], "plain,draft,ngram", LONG),
        "mtp": (family["mtp_target"], None, "plain,mtp", [*LONG, "--depth", "2"]),
        "itself": (family["llama_target"], family["llama_target"], "plain,draft",
                   [*LONG, "-k", "2"]),
    }))


@pytest.mark.slow
def test_estimate_within_25_percent_for_converted_weights_and_the_demo_models(
        tiny_family, tmp_path) -> None:
    """Half precision and 4-bit weights, and the demo family shipped in models/demo,
    short of a cache growth (the test above crosses one): the weights' terms, cast,
    packed, or the demo's draft and MTP head, are what is checked."""
    from mlx_lm import convert

    from specdeck.testing.tiny_models import build_model

    src = build_model(tmp_path / "f32", "llama", seed=15, tokenizer_dir=tiny_family["tokenizer"],
                      hidden_size=64)
    convert(str(src), mlx_path=str(tmp_path / "bf16"), dtype="bfloat16")
    convert(str(src), mlx_path=str(tmp_path / "q4"), quantize=True, q_group_size=32, q_bits=4)
    demo = demo_models()
    assert demo is not None
    short = ["--max-tokens", "200"]
    assert_all_within_25_percent(measured(tmp_path, {
        "bf16": (tmp_path / "bf16", None, "plain,ngram", short),
        "q4": (tmp_path / "q4", None, "plain,ngram", short),
        "demo": (Path(demo.target), Path(demo.draft), "plain,draft,mtp,ngram", short),
    }))


def test_a_model_drafting_for_itself_counts_its_weights_once(tiny_family) -> None:
    target = describe_dir(tiny_family["llama_target"])
    other = describe_dir(tiny_family["llama_draft"])
    settings = DecodeSettings()
    own = estimate("draft", target, settings, 20, draft=target)
    assert own.draft_weights == 0 and own.weights == target.weight_bytes
    assert own.draft_cache > 0  # its second cache is real
    assert estimate("draft", target, settings, 20, draft=other).draft_weights == other.weight_bytes
    out = estimate_comparison(["plain", "draft"], target, settings, 20, draft=target)
    assert out["plain"].other_models == 0 and out["draft"].other_models == 0


def test_terms(tiny_family) -> None:
    llama = describe_dir(tiny_family["llama_target"])
    config = llama.text_config
    per_position = 2 * config["num_key_value_heads"] * config["head_dim"] * 4
    layers = config["num_hidden_layers"]
    settings = DecodeSettings(max_tokens=100)
    plain = estimate("plain", llama, settings, prompt_tokens=20)
    # One 256-position step per layer while no growth happened.
    assert plain.kv_cache == layers * KV_STEP * per_position
    # Past it: two steps allocated, plus the fresh step being joined on.
    longer = estimate("plain", llama, replace(settings, max_tokens=300), prompt_tokens=20)
    assert longer.kv_cache == layers * 3 * KV_STEP * per_position
    # A rotating window stops at its size.
    window = estimate("plain", llama, replace(settings, max_tokens=2000, max_kv_size=256), 20)
    assert window.kv_cache == layers * KV_STEP * per_position
    assert plain.recurrent_state == plain.rollback_snapshot == 0
    # Hybrids: a Qwen3.5 verify pass keeps one recurrent state per fed position (other
    # hybrids one state from before the pass); a hybrid draft one per step.
    hybrid = describe_dir(tiny_family["hybrid_target"])
    h_plain = estimate("plain", hybrid, settings, 20)
    h_ngram = estimate("ngram", hybrid, settings, 20)
    assert h_plain.recurrent_state > 0 and h_plain.rollback_snapshot == 0
    assert h_ngram.rollback_snapshot == (settings.ngram_k + 1) * h_ngram.recurrent_state
    other = estimate("ngram", replace(hybrid, model_type="falcon_h1"), settings, 20)
    assert other.rollback_snapshot == other.recurrent_state
    draft = describe_dir(tiny_family["hybrid_draft"])
    k2 = estimate("draft", hybrid, replace(settings, num_draft_tokens=2), 20, draft=draft)
    k6 = estimate("draft", hybrid, replace(settings, num_draft_tokens=6), 20, draft=draft)
    d_state = estimate("plain", draft, settings, 20).recurrent_state
    assert k6.draft_cache - k2.draft_cache == 4 * d_state
    # Half precision counts double on the CPU backend (cast to float32 there).
    assert weight_bytes(llama, upcast=True) == llama.weight_bytes  # already float32
    half = replace(llama, half_weight_bytes=llama.weight_bytes)
    assert weight_bytes(half, upcast=True) == 2 * weight_bytes(half, upcast=False)


def test_comparison_counts_every_loaded_model_once(tiny_family) -> None:
    target = describe_dir(tiny_family["mtp_target"])
    draft = describe_dir(tiny_family["hybrid_draft"])
    out = estimate_comparison(["plain", "draft", "mtp"], target, DecodeSettings(), 10,
                              draft=draft)
    head = out["mtp"].mtp_head
    assert head == target.mtp_parameters * 4 > 0
    assert out["plain"].other_models == draft.weight_bytes + head
    assert out["draft"].draft_weights == draft.weight_bytes
    assert out["draft"].other_models == head
    assert out["mtp"].other_models == draft.weight_bytes
    for e in out.values():
        loaded = e.weights + e.draft_weights + e.mtp_head + e.other_models
        assert loaded == target.weight_bytes + draft.weight_bytes + head
    # Half precision on the CPU: the cast to float32 happens when a strategy first uses
    # the model, so models waiting for a later strategy count at their stored size.
    half_target, half_draft = (replace(m, dtype="F16", half_weight_bytes=m.weight_bytes)
                               for m in (target, draft))
    out = estimate_comparison(["plain", "draft", "mtp"], half_target, DecodeSettings(), 10,
                              draft=half_draft, upcast=True)
    stored_head = target.mtp_parameters * 2
    assert out["plain"].other_models == draft.weight_bytes + stored_head
    assert out["draft"].draft_weights == 2 * draft.weight_bytes
    assert out["draft"].other_models == stored_head
    assert out["mtp"].mtp_head == 2 * stored_head
    assert out["mtp"].other_models == 2 * draft.weight_bytes


def _estimate(total: int) -> MemoryEstimate:
    return MemoryEstimate("draft", total, 0, 0, 0, 0, 0, 0, 0, 0)


def test_headroom_check() -> None:
    assert check_headroom([_estimate(10**9)], free=4 * 10**9) is None
    warning = check_headroom([_estimate(5 * 2**30), _estimate(2**30)], free=4 * 2**30)
    assert warning and "draft needs about 5.0 GiB" in warning and "4.0 GiB is free" in warning
    with pytest.raises(ModelError, match="--strict"):
        check_headroom([_estimate(5 * 10**9)], strict=True, free=4 * 10**9)
    # Weights already loaded need no more room.
    assert check_headroom([_estimate(5 * 10**9)], already_loaded=2 * 10**9, free=4 * 10**9) is None


def test_free_memory_is_read() -> None:
    free = free_memory()
    assert free is not None and 0 < free


def test_too_large_for_memory_refused_under_strict(tiny_family, monkeypatch, capsys) -> None:
    from specdeck.engines.measure import memory
    monkeypatch.setattr(memory, "free_memory", lambda: 100 * 1024)
    args = ["compare", "--headless", "--no-save", "--target", str(tiny_family["llama_target"]),
            "--draft", str(tiny_family["llama_draft"]), "--prompt", PROMPT, "--max-tokens", "8"]
    assert main([*args, "--strict"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("specdeck: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert "100 KiB is free" in errors[0] and "--strict" in errors[0]
    assert "loading" not in err  # refused before any weights were read
    sweep = ["sweep", "--target", str(tiny_family["llama_target"]), "--draft",
             str(tiny_family["llama_draft"]), "--prompt", PROMPT, "--strict"]
    assert main(sweep) == 2
    assert "specdeck: error: draft needs about" in capsys.readouterr().err
    # Without --strict it warns and runs.
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "specdeck: warning: draft needs about" in err
