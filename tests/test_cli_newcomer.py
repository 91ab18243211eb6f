"""What a new user hit on the command line: a strategy the models cannot run,
the models listed, the defaults said in one place."""

from __future__ import annotations

from pathlib import Path

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


# -- 9. the models listed, named by family --------------------------------------------


def fetched_smollm2(tiny_family, cache: Path) -> None:
    """A stand-in for ``specdeck fetch smollm2``: the family's two folders in the cache."""
    root = cache / "families" / "smollm2"
    root.mkdir(parents=True)
    (root / "target").symlink_to(tiny_family["llama_target"])
    (root / "draft").symlink_to(tiny_family["llama_draft"])


def model_rows(out: str) -> list[str]:
    """The table's first column, as printed."""
    return [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]


def test_models_lists_the_fetched_family_by_name(tiny_family, tmp_path, monkeypatch, capsys):
    """Bare ``specdeck models`` listed the demo pair as ``draft`` and ``target``, and not
    the fetched smollm2 family; given the cache folder, two rows named ``draft`` and two
    ``target``."""
    monkeypatch.setenv("SPECDECK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    fetched_smollm2(tiny_family, tmp_path)
    assert main(["models", "--no-cache"]) == 0
    assert model_rows(capsys.readouterr().out) == [
        "demo draft", "demo target", "smollm2 draft", "smollm2 target"]
    elsewhere = tmp_path / "elsewhere"
    for name, model in (("a", "qwen3_target"), ("b", "hybrid_target")):
        (elsewhere / name).mkdir(parents=True)
        (elsewhere / name / "target").symlink_to(tiny_family[model])
    assert main(["models", "--no-cache", str(tmp_path / "families"), str(elsewhere)]) == 0
    assert model_rows(capsys.readouterr().out) == [
        "smollm2 draft", "smollm2 target", "a/target", "b/target"]


def test_the_shipped_draft_layers_are_explained_not_listed_without_weights(capsys):
    """``specdeck models models`` showed ``smollm2-draft … no weights … ?``."""
    from specdeck.engines.models.families import SHIPPED_DRAFT_CHECKOUT

    assert main(["models", "--no-cache", str(SHIPPED_DRAFT_CHECKOUT.parent)]) == 0
    out = capsys.readouterr().out
    assert "no weights" not in out and "smollm2-draft" not in out
    assert main(["models", "--no-cache", str(SHIPPED_DRAFT_CHECKOUT)]) == 2
    err = capsys.readouterr().err
    assert "only the smollm2 draft's own layers" in err and "specdeck fetch smollm2" in err


# -- 10. one source for each default ----------------------------------------------------


ROOT = Path(__file__).resolve().parents[1]


def test_bare_specdeck_and_compare_family_open_on_the_familys_prompt(
        tiny_family, tmp_path, monkeypatch):
    """Bare ``specdeck`` on smollm2 opened on a chat prompt while ``compare --family
    smollm2`` used the code prompt: both take the family's."""
    import specdeck.tui
    from specdeck.engines.models.families import FAMILIES
    from specdeck.prompts import get_prompt

    monkeypatch.setenv("SPECDECK_CACHE_DIR", str(tmp_path))
    fetched_smollm2(tiny_family, tmp_path)
    opened = []
    monkeypatch.setattr(specdeck.tui, "run_app",
                        lambda source, **kw: opened.append(source.request) or [])
    assert main([]) == 0
    assert main(["compare", "--family", "smollm2"]) == 0
    assert main(["compare", "--family", "demo"]) == 0
    assert main(["compare", "--strategies", "plain",
                 "--target", str(tmp_path / "families" / "smollm2" / "target")]) == 0
    smollm2, demo = (get_prompt(FAMILIES[f].prompt).text for f in ("smollm2", "demo"))
    assert [r.prompt for r in opened] == [smollm2, smollm2, demo, smollm2]
    assert smollm2 != demo


def test_help_and_guides_say_each_default_as_its_source_has_it(capsys):
    """``compare --help`` named the code prompt 'as bare specdeck'; ``fetch --help`` the
    cache as $SPECDECK_CACHE_DIR, the guides as $XDG_CACHE_HOME; the quick start said
    ``specdeck`` opens the demo models."""
    import re

    import pytest

    from specdeck.engines.models.families import CACHE_RULE, FAMILIES

    for command in (["compare", "--help"], ["fetch", "--help"]):
        with pytest.raises(SystemExit):
            main(command)
    shown = " ".join(capsys.readouterr().out.split())
    for family in FAMILIES.values():
        assert f"{family.name}: {family.prompt!r}" in shown
    assert CACHE_RULE in shown
    for guide in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = " ".join(guide.read_text().replace("`", "").split())
        if "SPECDECK_CACHE_DIR" in text or "XDG_CACHE_HOME" in text:
            assert CACHE_RULE in text, guide.name
    opens = " ".join((ROOT / "docs" / "playground.md").read_text()
                     .split("## What opens")[1].split("\n## ")[0].split())
    for family in FAMILIES.values():
        assert re.search(rf"on the built-in `{family.prompt}`\s+prompt", opens), family
    quick = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ")[0]
    assert "until you fetch a real" in " ".join(quick.split())


# -- 11. words that match their numbers ---------------------------------------------------


def test_a_sweep_says_1_00x_without_an_arrow_and_a_few_bytes_as_the_same_peak(
        tmp_path, capsys):
    """A cell at 1.002x read ``1.00 ▲``; a peak 8 bytes under plain's ``-8 B``."""
    import orjson

    from helpers.sessions import sweep_document

    document = sweep_document()
    cells = document["cells"]
    cells[1].update(speedup=1.002, memory_over_plain_bytes=-8)
    cells[2].update(speedup=1.006, memory_over_plain_bytes=3 * 2**20)
    path = tmp_path / "sweep.json"
    path.write_bytes(orjson.dumps(document))
    assert main(["replay", str(path), "--headless"]) == 0
    rows = {line.split("│")[3].strip(): [c.strip() for c in line.split("│")[1:-1]]
            for line in capsys.readouterr().out.splitlines()
            if line.startswith("│") and "draft k=" in line}
    assert rows["draft k=1"][4] == "1.00" and rows["draft k=1"][9] == "≈ 0"
    assert rows["draft k=2"][4] == "1.01 ▲" and rows["draft k=2"][9] == "+3.0 MiB"


def test_a_session_diff_lists_what_was_changed_and_folds_the_memory_estimates(capsys):
    """``specdeck diff`` of k = 4 and k = 16: the k first; the memory estimates it moved
    folded into one line, not rows of ``config.memory_estimates...``."""
    examples = ROOT / "sessions" / "examples"
    main(["diff", str(examples / "code-draft-k4.json"), str(examples / "code-draft-k16.json")])
    out = capsys.readouterr().out
    table = out.split("settings that differ", 1)[1].split("\n\n", 1)[0]
    assert "config.settings.num_draft_tokens" in table
    assert "memory_estimates" not in table
    assert ("and 2 values worked out from the settings differ (memory estimates): --json "
            "lists them") in out
