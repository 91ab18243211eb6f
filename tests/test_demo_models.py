"""The shipped demo family (models/demo/): it loads, round-trips text, drafts losslessly,
and still accepts what its model card says it does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdeck.engines.runs.compare import encode_prompt, load_models
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.models.demo import (
    CHECKOUT_DIR, DEMO_DIR, INSTALLED_DIR, default_models, demo_models, require_demo_models,
)
from specdeck.engines.core.errors import ModelError
from specdeck.engines.models.families import SHIPPED_DRAFT_CHECKOUT, SHIPPED_DRAFT_INSTALLED
from specdeck.engines.core.events import Trace
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.core.stats import compute_stats
from specdeck.engines.decode.run import run_strategy
from specdeck.prompts import get_prompt

#: Acceptance may move a little across BLAS libraries and CPUs (float32 sums in another
#: order can flip a near-tie argmax); more than this means the weights or engine changed.
TOLERANCE = 0.08
MAX_BYTES = 32_000_000


@pytest.fixture(scope="module")
def card() -> dict:
    assert demo_models() is not None, f"the demo family is missing from {DEMO_DIR}"
    return json.loads((DEMO_DIR / "card.json").read_text())


@pytest.fixture(scope="module")
def models(card):
    demo = require_demo_models()
    request = CompareRequest(
        target=demo.target, draft=demo.draft, strategies=["plain", "draft", "mtp"],
        prompt="-",
    )
    return load_models(request, ModelStore())


def test_defaults_fall_back_to_the_demo_family_only_without_a_target():
    demo = require_demo_models()
    assert default_models(None, None) == (demo.target, demo.draft)
    assert default_models(None, "my/draft") == (demo.target, "my/draft")
    assert default_models("my/target", None) == ("my/target", None)


def test_compare_without_a_model_runs_the_demo_family(tmp_path: Path, capsys):
    from specdeck.cli import main

    out = tmp_path / "run.json"
    code = main(["compare", "--headless", "--no-save", "--strategies", "plain,draft",
                 "--prompt", "def f(x):", "--max-tokens", "4", "--warmup-tokens", "0",
                 "--json", str(out)])
    assert code == 0, capsys.readouterr().err
    config = json.loads(out.read_text())["config"]
    demo = require_demo_models()
    assert (config["target"]["path"], config["draft"]["path"]) == (demo.target, demo.draft)


def test_a_missing_family_is_a_user_error(tmp_path: Path):
    assert demo_models(tmp_path) is None
    with pytest.raises(ModelError, match="train_demo.py"):
        require_demo_models(tmp_path)


def test_shipped_files_fit_the_budget_and_are_half_precision(card):
    files = [p for p in DEMO_DIR.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= MAX_BYTES
    head = DEMO_DIR / "target" / "optiq" / "mtp.safetensors"
    assert head.is_file()
    import mlx.core as mx

    for path in (DEMO_DIR / "target" / "model.safetensors", head,
                 DEMO_DIR / "draft" / "model.safetensors"):
        assert {v.dtype for v in mx.load(str(path)).values()} == {mx.float16}


def test_tokenizer_round_trips_and_is_shared(models):
    sample = 'def mean(values: list[float]) -> float:\n    """Ünïcode ✓ tabs\tand  spaces"""\n'
    for loaded in (models.target, models.draft):
        tok = loaded.tokenizer
        assert tok.decode(tok.encode(sample)) == sample
    assert models.target.tokenizer.encode(sample) == models.draft.tokenizer.encode(sample)


def _trace(name: str, models, prompt: str, settings: DecodeSettings) -> Trace:
    ids = encode_prompt(models.target.tokenizer, get_prompt(prompt).text)
    trace = Trace(name, list(run_strategy(name, models, ids, settings)))
    assert trace.done is not None and trace.done.reason != "error", trace.done
    return trace


@pytest.mark.parametrize("prompt", ["code", "prose"])
def test_acceptance_matches_the_card_and_output_equals_plain(models, card, prompt):
    measured = card["measurements"]
    base = DecodeSettings(max_tokens=measured["max_tokens"], stop_at_eos=False)
    plain = _trace("plain", models, prompt, base)
    assert len(plain.tokens) == measured["max_tokens"]
    for name, settings, label in (
        ("draft", DecodeSettings(max_tokens=base.max_tokens, stop_at_eos=False,
                                 num_draft_tokens=2), "draft k=2"),
        ("mtp", DecodeSettings(max_tokens=base.max_tokens, stop_at_eos=False, mtp_depth=1),
         "mtp depth=1"),
    ):
        trace = _trace(name, models, prompt, settings)
        assert trace.tokens == plain.tokens, f"{name} differs from plain decoding"
        expected = next(c for c in measured["cells"]
                        if c["prompt"] == prompt and c["label"] == label)["acceptance_rate"]
        rate = compute_stats(trace.events).acceptance_rate
        assert rate == pytest.approx(expected, abs=TOLERANCE), (name, prompt)


@pytest.mark.parametrize("folder, installed", [
    (CHECKOUT_DIR, INSTALLED_DIR),
    (SHIPPED_DRAFT_CHECKOUT, SHIPPED_DRAFT_INSTALLED),
], ids=["demo", "smollm2-draft"])
def test_a_wheel_ships_every_file_of_the_family(folder: Path, installed: Path):
    """pyproject's data-files put every shipped model file where the code looks for it
    in a wheel install (the demo family; the smollm2 draft's own weights)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    root = CHECKOUT_DIR.parent.parent
    data_files = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "data-files"]
    shipped = {}
    for dest, patterns in data_files.items():
        for pattern in patterns:
            for path in root.glob(pattern):
                if path.is_relative_to(folder):
                    shipped[path.relative_to(folder)] = Path(dest) / path.name
    assert set(shipped) == {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()}
    # Each lands at the same place under the installed folder as under the checkout's.
    prefix = Path("share/specdeck/models") / folder.name
    assert installed.parts[-4:] == prefix.parts
    assert all(dest == prefix / rel for rel, dest in shipped.items())


@pytest.mark.parametrize("prompt", ["code", "prose"])
def test_the_mtp_heads_runs_are_what_its_rounds_keep(models, prompt):
    """``mtp_runs`` chains the head from every output token at once: each round of a
    real MTP run, at any depth, keeps exactly the shorter of its drafts and the run
    from the token it drafts at; and the demo head keeps deep runs somewhere, so this
    is not a text where nothing is ever kept."""
    from specdeck.engines.core.config import MAX_MTP_DEPTH
    from specdeck.engines.measure.guess_probe import greedy_output, mtp_runs

    ids = encode_prompt(models.target.tokenizer, get_prompt(prompt).text)
    runs = mtp_runs(models.mtp, ids, greedy_output(models.mtp.model, ids, 64))
    assert len(runs) == 64 and runs[0] == 0 and max(runs) >= 3
    assert all(0 <= run <= MAX_MTP_DEPTH for run in runs)
    for depth in (1, 3, MAX_MTP_DEPTH):
        settings = DecodeSettings(max_tokens=64, stop_at_eos=False, mtp_depth=depth)
        done = 0
        for r in _trace("mtp", models, prompt, settings).rounds:
            if r.drafted:
                assert r.accepted == min(runs[done], len(r.drafted)), (depth, done)
            done += len(r.tokens)
