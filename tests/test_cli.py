"""The headless command: its JSON shape, and one clear line for every user error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import mlx_lm
from specdeck.cli import main

ROOT = Path(__file__).resolve().parent.parent


def specdeck(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPECDECK_NO_OPENBLAS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "specdeck", *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )


def test_compare_headless_writes_the_documented_json(tiny_family, tmp_path) -> None:
    out = tmp_path / "out.json"
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("def add(a, b):\n    return")
    result = specdeck(
        "compare", "--headless", "--json", str(out),
        "--target", str(tiny_family["llama_target"]), "--draft", str(tiny_family["llama_draft"]),
        "--strategies", "plain,draft", "-k", "4", "--temp", "0", "--max-tokens", "24",
        "--prompt", str(prompt), "--seed", "3", "--ignore-eos",
    )
    assert result.returncode == 0, result.stderr
    doc = orjson.loads(out.read_bytes())
    assert set(doc["strategies"]) == {"plain", "draft"}
    for name, entry in doc["strategies"].items():
        assert len(entry["tokens"]) == 24
        assert isinstance(entry["text"], str) and entry["rounds"]
        for key in ("tokens_per_s", "acceptance_rate", "mean_accepted", "peak_memory_bytes"):
            assert key in entry["stats"]
    assert doc["strategies"]["draft"]["tokens"] == doc["strategies"]["plain"]["tokens"]
    assert doc["strategies"]["draft"]["stats"]["acceptance_rate"] > 0
    assert doc["config"]["prompt"] == prompt.read_text()
    assert doc["config"]["settings"]["num_draft_tokens"] == 4
    assert doc["machine"]["versions"]["mlx"]
    assert "draft" in result.stdout and "tok/s" in result.stdout


def test_headless_compare_prints_text_the_lossless_check_and_why(tiny_family, capsys) -> None:
    """What a reader wants: the first strategy's text, whether each output equals plain's
    at temperature 0, tokens per pass, the noise plain's second timing shows, and the
    cost model's why-line; --quiet keeps one line per strategy."""
    args = ["compare", "--headless", "--no-save",
            "--target", str(tiny_family["llama_target"]), "--draft", str(tiny_family["llama_draft"]),
            "--strategies", "plain,draft", "-k", "3", "--max-tokens", "16", "--ignore-eos",
            "--prompt", "def add(a, b):\n    return"]
    assert main(args) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("── plain: 16 tokens ")
    plain_line = next(i for i, line in enumerate(lines) if line.startswith(" plain: 16 tokens"))
    assert lines[plain_line + 1].strip().startswith("timed again after the others: ")
    assert "identical to plain (16 tokens)" in out
    assert "tokens per target pass" in out
    why = next(line for line in lines if line.strip().startswith("why: "))
    assert "tokens per verify pass" in why and "predicted" in why and "measured" in why
    assert "plain step" in why

    assert main([*args, "--quiet"]) == 0
    quiet = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0].strip() for line in quiet] == ["plain", "draft"]

    assert main([*args, "--show-text", "draft", "--strategies", "plain,draft"]) == 0
    assert capsys.readouterr().out.startswith("── draft: 16 tokens ")
    assert main([*args, "--show-text", "mtp"]) == 2
    assert "--show-text mtp: not one of the strategies run" in capsys.readouterr().err


def test_headless_compare_names_the_first_divergence(tiny_family, monkeypatch, capsys) -> None:
    """A draft whose output parts from plain's is named at the token where it does."""
    from specdeck.engines.runs import compare
    from specdeck.engines.core.events import Round

    real = compare.run_strategy

    def corrupt(name, *a, **kw):
        for event in real(name, *a, **kw):
            if name == "draft" and isinstance(event, Round) and event.index == 2:
                event.tokens = [t + 1 for t in event.tokens]
                event.pieces = ["XX" for _ in event.pieces]
            yield event

    monkeypatch.setattr(compare, "run_strategy", corrupt)
    code = main(["compare", "--headless", "--no-save", "--target", str(tiny_family["llama_target"]),
                 "--draft", str(tiny_family["llama_draft"]), "--strategies", "plain,draft",
                 "--max-tokens", "16", "--ignore-eos", "--warmup-tokens", "0",
                 "--prompt", "def add(a, b):\n    return"])
    assert code == 0
    out = capsys.readouterr().out
    assert "differs from plain at token " in out and "vs 'XX'" in out


def test_repeats_keep_the_median_run_and_record_every_timing(tiny_family, tmp_path) -> None:
    out = tmp_path / "out.json"
    assert main(["compare", "--headless", "--no-save", "--json", str(out), "--quiet",
                 "--target", str(tiny_family["llama_target"]), "--draft", str(tiny_family["llama_draft"]),
                 "--strategies", "plain,draft", "--max-tokens", "12", "--repeats", "3",
                 "--prompt", "def add(a, b):\n    return"]) == 0
    doc = orjson.loads(out.read_bytes())
    assert doc["config"]["repeats"] == 3
    for entry in doc["strategies"].values():
        speeds = entry["measured_tokens_per_s"]
        assert len(speeds) == 3
        assert entry["stats"]["tokens_per_s"] == pytest.approx(sorted(speeds)[1])
    from specdeck.sessions.session import session_from_document

    assert session_from_document(doc).measured["draft"] == doc["strategies"]["draft"][
        "measured_tokens_per_s"]


def one_line_error(code: int, stderr: str, *needles: str) -> None:
    assert code == 2
    assert "Traceback" not in stderr
    lines = [l for l in stderr.splitlines() if l.startswith("specdeck: error:")]
    assert len(lines) == 1, stderr
    for needle in needles:
        assert needle in lines[0]


def refused(capsys, *args: str) -> tuple[int, str]:
    """``specdeck ARGS`` in this process (the command as a process: the JSON test above
    and the hub's below): its exit code and what it wrote to stderr."""
    code = main(list(args))
    return code, capsys.readouterr().err


def test_missing_model_path(tmp_path, capsys) -> None:
    one_line_error(
        *refused(capsys, "compare", "--headless", "--target", str(tmp_path / "nope"),
                 "--strategies", "plain", "--prompt", "hi"),
        "model not found", "nope",
    )


def test_directory_that_is_not_a_model(tmp_path, capsys) -> None:
    one_line_error(
        *refused(capsys, "compare", "--headless", "--target", str(tmp_path),
                 "--strategies", "plain", "--prompt", "hi"),
        "not a model directory", "config.json",
    )


def test_mismatched_tokenizers_refused_before_loading_weights(tiny_family, monkeypatch, capsys) -> None:
    def no_loading(*args, **kwargs):
        raise AssertionError("weights were loaded")

    monkeypatch.setattr(mlx_lm, "load", no_loading)
    code = main([
        "compare", "--headless", "--target", str(tiny_family["llama_target"]),
        "--draft", str(tiny_family["other_tokenizer_model"]), "--prompt", "hi",
    ])
    err = capsys.readouterr().err
    assert code == 2
    assert "does not use the target" in err and "tokenizer" in err
    assert str(tiny_family["other_tokenizer_model"]) in err


@pytest.mark.parametrize("k", ["0", "17"])
def test_k_out_of_range(tiny_family, k, capsys) -> None:
    one_line_error(
        *refused(capsys, "compare", "--headless", "--target", str(tiny_family["llama_target"]),
                 "--draft", str(tiny_family["llama_draft"]), "-k", k, "--prompt", "hi"),
        "between 1 and 16", f"got {k}",
    )


def test_draft_strategy_without_draft_model(tiny_family, capsys) -> None:
    code = main(["compare", "--headless", "--target", str(tiny_family["llama_target"]),
                 "--strategies", "plain,draft", "--prompt", "hi"])
    assert code == 2 and "--draft" in capsys.readouterr().err


def test_hub_id_offline_says_so(tmp_path) -> None:
    """A Hugging Face id goes to the hub (never in the tests: offline mode is forced)."""
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run(
        [sys.executable, "-m", "specdeck", "compare", "--headless",
         "--target", "mlx-community/not-a-real-model-xyz", "--strategies", "plain", "--prompt", "hi"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, **env, "SPECDECK_NO_OPENBLAS": "1"},
        timeout=300,
    )
    one_line_error(result.returncode, result.stderr, "mlx-community/not-a-real-model-xyz",
                   "Hugging Face hub", "local")


def test_option_defaults_are_the_dataclasses_defaults() -> None:
    from specdeck.cli import build_parser
    from specdeck.commands.options import settings_from
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.core.requests import CompareRequest, SweepRequest

    parser = build_parser()
    compare = parser.parse_args(["compare", "--prompt", "p"])
    assert settings_from(compare) == DecodeSettings()
    assert compare.warmup_tokens == CompareRequest("t", ["plain"], "p").warmup_tokens
    assert compare.repeats == CompareRequest("t", ["plain"], "p").repeats == 1
    sweep = parser.parse_args(["sweep"])
    defaults = SweepRequest(target="t", prompts=[])
    assert (sweep.num_draft_tokens, sweep.depth, sweep.ngram, sweep.temp) == (
        defaults.ks, defaults.depths, defaults.ngram_ns, defaults.temperatures)
    assert (sweep.reps, sweep.warmup, sweep.max_tokens, sweep.noisy_cv, sweep.seed) == (
        defaults.reps, defaults.warmup, defaults.max_tokens, defaults.noisy_cv,
        defaults.sampling.seed)
    assert sweep.strategies.split(",") == defaults.strategies


def test_a_draft_strategy_without_a_draft_model_is_refused_alike(tmp_path, capsys) -> None:
    args = ["--target", str(tmp_path), "--prompt", "p"]
    assert main(["compare", "--headless", "--strategies", "draft", *args]) == 2
    assert main(["sweep", "--strategies", "draft", *args]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors == ["specdeck: error: the draft strategy needs a draft model (--draft PATH)"] * 2


def test_headless_compare_says_what_auto_chose_who_drafted_and_what_mlx_lm_would_keep(
        tiny_family, tmp_path, capsys) -> None:
    """``-k auto`` and ``chain`` from the command line, saved as a session that
    validates against the schema; the lines under each strategy say what auto chose,
    which drafters drafted and, at temperature > 0, what the exact-match rule keeps."""
    import jsonschema

    from specdeck.sessions.session import SCHEMA_PATH, load_session

    out = tmp_path / "auto.json"
    code = main(["compare", "--headless", "--no-save", "--json", str(out),
                 "--target", str(tiny_family["llama_target"]),
                 "--draft", str(tiny_family["llama_draft"]),
                 "--strategies", "plain,draft,chain", "-k", "auto", "--ngram", "2",
                 "--max-tokens", "48", "--ignore-eos", "--temp", "0.8", "--warmup-tokens", "0",
                 "--prompt", "def add(a, b):\n    return a + b\n\ndef add(a, b):"])
    printed = capsys.readouterr().out
    assert code == 0
    assert printed.count("auto drafted k = 0..") == 2
    assert "mlx-lm's exact-match rule would have kept" in printed
    document = orjson.loads(out.read_bytes())
    jsonschema.validate(document, orjson.loads(SCHEMA_PATH.read_bytes()))
    assert document["config"]["settings"]["num_draft_tokens"] == "auto"
    chain = load_session(out).traces["chain"]
    assert {r.proposer for r in chain.rounds} >= {"ngram"}
    assert all(r.length.policy == "auto" for r in chain.rounds if r.proposer == "draft")
