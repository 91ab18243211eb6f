"""MTP self-speculation on tiny Qwen3.5 hybrids with an MTP head: against plain decoding,
against mlx-optiq's own MTP engine as an oracle, losslessly at temperature > 0, and the
ways a model can lack a head."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jsonschema
import mlx.core as mx
import pytest
from mlx_lm.models import qwen3_5

from specdeck.engines.runs.compare import load_models
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.core.errors import ModelError
from specdeck.engines.core.events import Trace
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.proposers.mtp import load_mtp
from specdeck.engines.core.stats import compute_stats
from specdeck.engines.decode.run import Models, run_strategy
from helpers.lossless import strategy_pvalues
from specdeck.cli import main
from specdeck.sessions.session import SCHEMA_PATH
from specdeck.testing.tiny_models import build_mtp_model

PROMPT = "def add(a, b):\n    return"
TOKENS = 48
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def store() -> ModelStore:
    return ModelStore()


@pytest.fixture(scope="module")
def models(tiny_family, store) -> Models:
    target = store.get(str(tiny_family["mtp_target"]))
    return Models(target, mtp=load_mtp(target))


def run(name: str, models: Models, settings: DecodeSettings, prompt: str = PROMPT) -> Trace:
    ids = models.target.tokenizer.encode(prompt)
    return Trace(name, list(run_strategy(name, models, ids, settings)))


def fixed(max_tokens: int = TOKENS, **kw) -> DecodeSettings:
    return DecodeSettings(max_tokens=max_tokens, stop_at_eos=False, **kw)


# --- temperature 0 ---------------------------------------------------------------------


def test_mtp_equals_plain_at_temperature_zero(models) -> None:
    plain = run("plain", models, fixed())
    assert len(set(plain.tokens)) > 5, "fixture should not emit one token forever"
    for depth in range(1, 9):
        trace = run("mtp", models, fixed(mtp_depth=depth))
        assert trace.tokens == plain.tokens, depth
        rounds = trace.rounds
        # The first token comes from the prompt's last position: nothing to draft from.
        assert rounds[0].drafted == [] and rounds[0].end == "target"
        produced = len(rounds[0].tokens)
        for r in rounds[1:]:
            assert len(r.drafted) == min(depth, TOKENS - produced)
            if r.end is not None:
                assert r.tokens == r.drafted[: r.accepted] + r.tokens[-1:]
                assert r.end == ("bonus" if r.accepted == len(r.drafted) else "correction")
            produced += len(r.tokens)
        rate = compute_stats(trace.events).acceptance_rate
        assert 0.1 < rate < 0.9, (depth, rate)  # the head agrees with the trunk in part
        # Hybrid target: a rejection rewinds from the verify pass's captured states.
        assert any(r.rollback == "captured" for r in rounds)
        assert all(r.rollback != "replay" and r.replayed == 0 for r in rounds)


@pytest.fixture(scope="module")
def optiq_engine(tiny_family):
    """optiq's engine on its own copy of the model (it swaps that instance's class)."""
    from mlx_lm import load
    from optiq.runtime.engine import OptiqEngine

    path = str(tiny_family["mtp_target"])
    model, tokenizer = load(path, tokenizer_config={"trust_remote_code": False})
    engine = OptiqEngine.from_loaded(model, tokenizer, path)
    assert engine.has_mtp
    return engine


def from_draft(trace: Trace) -> list[bool]:
    """optiq's per-token flag: the token is a draft the target accepted."""
    return [i < r.accepted for r in trace.rounds for i in range(len(r.tokens))]


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_mtp_matches_optiq_engine(models, optiq_engine, depth) -> None:
    ids = models.target.tokenizer.encode(PROMPT)
    ours = run("mtp", models, fixed(mtp_depth=depth))
    theirs = list(
        optiq_engine.generate_stream(
            "", prompt_ids=ids, max_tokens=TOKENS, depth=depth, temperature=0.0
        )
    )
    assert [e["token"] for e in theirs] == ours.tokens
    assert [e["from_draft"] for e in theirs] == from_draft(ours)

    # optiq's counters are exact at the end of a cycle that ended in a correction. Cut
    # inside a cycle they are not comparable: optiq counts all `depth` drafts of the
    # cut cycle but, when that cycle accepted all of them, none of its accepted ones,
    # while our last round only drafts as many tokens as are still wanted.
    rounds = ours.rounds
    ends = [i for i, r in enumerate(rounds) if r.end == "correction" and len(r.drafted) == depth]
    cycles = rounds[1 : ends[-1] + 1]  # its first round is optiq's prefill token
    assert len(cycles) >= 5
    stats = optiq_engine.generate(
        "", prompt_ids=ids, max_tokens=sum(len(r.tokens) for r in rounds[: ends[-1] + 1]),
        depth=depth, temperature=0.0,
    )
    assert stats.speculation_cycles == len(cycles)
    assert stats.drafts_attempted == sum(len(r.drafted) for r in cycles)
    assert stats.drafts_accepted == sum(r.accepted for r in cycles)


def test_target_stays_stock_and_runs_interleave(tiny_family, models) -> None:
    """optiq swaps the class of what it attaches a head to: never the model. Two MTP
    runs, on one head or on two models, advance in turns without disturbing each other."""
    assert type(models.target.model) is qwen3_5.Model
    assert type(models.target.model.language_model) is qwen3_5.TextModel
    other_store = ModelStore()
    other = other_store.get(str(tiny_family["mtp_target"]))
    assert other is not models.target
    second = Models(other, mtp=load_mtp(other))
    ids = models.target.tokenizer.encode(PROMPT)
    plain = run("plain", models, fixed())
    runs = [
        run_strategy("mtp", models, ids, fixed(mtp_depth=2)),
        run_strategy("mtp", models, ids, fixed(mtp_depth=3)),
        run_strategy("mtp", second, ids, fixed(mtp_depth=4)),
    ]
    traces = [Trace("mtp") for _ in runs]
    live = list(range(len(runs)))
    while live:
        for i in list(live):
            event = next(runs[i], None)
            if event is None:
                live.remove(i)
            else:
                traces[i].events.append(event)
    assert all(t.tokens == plain.tokens for t in traces)


def test_sidecar_head_loads_like_embedded(tiny_family, models, store, tmp_path) -> None:
    """The same head from optiq/mtp.safetensors drafts exactly as from the checkpoint."""
    path = build_mtp_model(
        tmp_path / "sidecar", seed=12, tokenizer_dir=tiny_family["tokenizer"],
        num_layers=4, sidecar=True,
    )
    assert not any(k.startswith("mtp.") for k in mx.load(str(path / "model.safetensors")))
    target = store.get(str(path))
    sidecar = Models(target, mtp=load_mtp(target))
    a = run("mtp", models, fixed(mtp_depth=3))
    b = run("mtp", sidecar, fixed(mtp_depth=3))
    assert [(r.drafted, r.accepted) for r in a.rounds] == [
        (r.drafted, r.accepted) for r in b.rounds
    ]


# --- models without a usable head ------------------------------------------------------


def copy_with_config(source: Path, dest: Path, **changes) -> Path:
    shutil.copytree(source, dest)
    config = json.loads((dest / "config.json").read_text())
    (dest / "config.json").write_text(json.dumps({**config, **changes}))
    return dest


def test_models_without_a_head_are_refused(tiny_family, tmp_path) -> None:
    store = ModelStore()
    declared = copy_with_config(
        tiny_family["hybrid_target"], tmp_path / "declared", mtp_num_hidden_layers=1
    )
    broken = copy_with_config(tiny_family["mtp_target"], tmp_path / "broken")
    weights = mx.load(str(broken / "model.safetensors"))
    del weights["mtp.norm.weight"]
    mx.save_safetensors(str(broken / "model.safetensors"), weights, metadata={"format": "mlx"})

    cases = {
        "hybrid_target": "declares no MTP layers or its files hold no mtp.* weights",
        "declared": "declares no MTP layers or its files hold no mtp.* weights",
        "llama_target": "it is a llama model",
        "broken": "missing 1 weights",
    }
    paths = {**tiny_family, "declared": declared, "broken": broken}
    for name, reason in cases.items():
        with pytest.raises(ModelError) as info:
            load_mtp(store.get(str(paths[name])))
        assert reason in str(info.value), name
        if name != "broken":
            assert "has no MTP head" in str(info.value) and "--mtp-model" in str(info.value)


def test_cli_refuses_a_target_without_head_in_one_line(tiny_family, capsys) -> None:
    """Before loading: mtp alone is refused; beside plain, plain runs and mtp says why
    it did not (a failed status all the same)."""
    args = ["compare", "--headless", "--target", str(tiny_family["hybrid_target"]),
            "--prompt", PROMPT, "--max-tokens", "4", "--no-save"]
    code = main([*args, "--strategies", "mtp"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("specdeck: error: the target has no MTP head")
    assert "--mtp-model" in err[-1]
    assert not any("Traceback" in line for line in err)
    code = main([*args, "--strategies", "plain,mtp"])
    out = capsys.readouterr().out
    assert code == 1 and "plain: 4 tokens" in out
    assert "   mtp: not run: the target has no MTP head" in out


# --- front ends ------------------------------------------------------------------------


def test_compare_loads_the_target_once_for_mtp(tiny_family, monkeypatch) -> None:
    import mlx_lm

    loads, real_load = [], mlx_lm.load

    def counted_load(path: str, **kwargs):
        loads.append(Path(path).resolve())
        return real_load(path, **kwargs)

    monkeypatch.setattr(mlx_lm, "load", counted_load)
    request = CompareRequest(
        target=str(tiny_family["mtp_target"]), draft=str(tiny_family["hybrid_draft"]),
        strategies=["plain", "draft", "mtp", "ngram"], prompt=PROMPT,
    )
    loaded = load_models(request, ModelStore())
    assert loaded.mtp.model is loaded.target
    # Loaded once each, however many strategies use them: target and draft.
    assert sorted(loads) == sorted(tiny_family[n].resolve() for n in ("mtp_target", "hybrid_draft"))


def test_compare_with_a_named_mtp_model(tiny_family) -> None:
    store = ModelStore()
    request = CompareRequest(
        target=str(tiny_family["hybrid_target"]), mtp_model=str(tiny_family["mtp_target"]),
        strategies=["plain", "mtp"], prompt=PROMPT,
    )
    loaded = load_models(request, store)
    assert loaded.mtp.model.path == tiny_family["mtp_target"]
    request = replace(request, mtp_model=str(tiny_family["other_tokenizer_model"]))
    with pytest.raises(ModelError, match="MTP model .* does not use the target"):
        load_models(request, store)


def test_headless_json_has_mtp_and_ngram(tiny_family, tmp_path) -> None:
    out = tmp_path / "run.json"
    code = main([
        "compare", "--headless", "--json", str(out),
        "--target", str(tiny_family["mtp_target"]), "--strategies", "plain,mtp,ngram",
        "--depth", "3", "--ngram", "2", "--ngram-k", "5", "--prompt", PROMPT,
        "--max-tokens", "24", "--ignore-eos", "--warmup-tokens", "2",
    ])
    assert code == 0
    document = json.loads(out.read_text())
    jsonschema.validate(document, json.loads(SCHEMA_PATH.read_text()))
    settings = document["config"]["settings"]
    assert (settings["mtp_depth"], settings["ngram_n"], settings["ngram_k"]) == (3, 2, 5)
    assert document["config"]["mtp_model"]["path"] == str(tiny_family["mtp_target"])
    strategies = document["strategies"]
    plain = strategies["plain"]
    for name in ("mtp", "ngram"):
        entry = strategies[name]
        assert entry.keys() == plain.keys() and entry["stats"].keys() == plain["stats"].keys()
        assert entry["tokens"] == plain["tokens"] and entry["text"] == plain["text"]
    assert max(len(r["drafted"]) for r in strategies["mtp"]["rounds"]) == 3
    assert strategies["mtp"]["stats"]["acceptance_rate"] > 0


def test_mtp_import_pulls_no_server_gui_or_web_packages(tiny_family) -> None:
    """optiq's package depends on flask, openai, pygame, ddgs...: none may load."""
    script = """
import json, sys
from specdeck.engines.proposers import mtp
lazy = "optiq" not in sys.modules
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.events import Round
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.proposers.mtp import load_mtp, run
from specdeck.engines.decode.run import Models
target = ModelStore().get(sys.argv[1])
models = Models(target, mtp=load_mtp(target))
settings = DecodeSettings(max_tokens=8, mtp_depth=2, stop_at_eos=False)
events = list(run(models, target.tokenizer.encode("def add"), settings))
heavy = ["flask", "fastapi", "uvicorn", "openai", "pygame", "ddgs", "torch"]
print(json.dumps({
    "lazy": lazy, "optiq": "optiq" in sys.modules,
    "drafted": sum(len(e.drafted) for e in events if isinstance(e, Round)),
    "loaded": [m for m in heavy if m in sys.modules],
}))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", script, str(tiny_family["mtp_target"])],
        capture_output=True, text=True, env=env, cwd=REPO, check=True,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"lazy": True, "optiq": True, "drafted": report["drafted"], "loaded": []}
    assert report["drafted"] > 0


# --- temperature > 0 -------------------------------------------------------------------

@pytest.mark.slow
def test_mtp_sampling_is_lossless(models) -> None:
    """Depth 2 over three tokens: the first cycle's target token, then a chained draft,
    its correction or the bonus, on a hybrid target rewound by its captured states. The
    head's distributions are peaked: at temperature 0.5 a q that skipped the temperature
    fails this test (p < 1e-8), at 0.8 it passed 400 runs."""
    settings = fixed(3, mtp_depth=2, sampling=Sampling(temperature=0.5, top_k=20))
    ids = models.target.tokenizer.encode(PROMPT)
    pvalues = strategy_pvalues("mtp", models, ids, settings, count=3)
    assert min(pvalues) > 1e-3, pvalues
