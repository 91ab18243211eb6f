"""What a new user hit on the command line (issue 50): a strategy the models cannot run,
the models listed, the defaults said in one place."""

from __future__ import annotations

from specdeck.cli import main
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.runs.compare import run_compare


def test_a_strategy_without_its_head_is_left_out_before_any_weights_load(tiny_family):
    """The head is in the folder's config: the MTP strategy is left out, and said so,
    before the models load; the others run."""
    heard: list[str] = []
    request = CompareRequest(
        target=str(tiny_family["llama_target"]), draft=str(tiny_family["llama_draft"]),
        strategies=["plain", "mtp", "draft"], prompt="def add(a, b):", warmup_tokens=0,
        settings=DecodeSettings(max_tokens=6, stop_at_eos=False))
    result = run_compare(request, on_not_run=lambda reasons: heard.append(f"not run {reasons}"),
                         on_loaded=lambda models: heard.append("loaded"))
    assert heard[0].startswith("not run {'mtp': ") and heard[1] == "loaded"
    assert list(result.traces) == ["plain", "draft"]
    assert "has no MTP head (its config declares no MTP layers)" in result.not_run["mtp"]


def test_headless_compare_runs_the_others_and_says_why_one_did_not(tiny_family, capsys):
    code = main(["compare", "--headless", "--no-save", "--quiet", "--max-tokens", "6",
                 "--target", str(tiny_family["llama_target"]),
                 "--strategies", "plain,mtp,ngram"])
    out = capsys.readouterr().out
    assert "plain: 6 tokens" in out and "ngram: 6 tokens" in out
    assert "   mtp: not run: " in out and "has no MTP head" in out
    assert code != 0  # a strategy asked for did not run: scripts notice


def test_only_strategies_that_cannot_run_is_refused_before_loading(tiny_family, capsys):
    code = main(["compare", "--headless", "--no-save", "--max-tokens", "6",
                 "--target", str(tiny_family["llama_target"]), "--strategies", "mtp"])
    assert code != 0
    assert "has no MTP head" in capsys.readouterr().err


def test_the_quick_start_installs_openblas_before_specdeck():
    """The README's quick start: the OpenBLAS line (the package the app's hint names)
    comes before the install, not after it."""
    from pathlib import Path

    from specdeck.blas import INSTALL_OPENBLAS

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert INSTALL_OPENBLAS in quick
    assert quick.index(INSTALL_OPENBLAS) < quick.index("pip install -e .")
