"""``specdeck models --rank-drafts``: a fake catalog holding the demo draft and a
random-weight draft with the same tokenizer; the probe ranks the trained one first, the
ranking is cached per machine and target and read back untrusted."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from specdeck.cli import main
from specdeck.commands.models import print_ranking
from specdeck.engines.models.demo import require_demo_models
from specdeck.engines.measure.draft_ranking import (
    DraftRanking, RankedDraft, load_ranking, ranking_file, save_ranking,
)
from specdeck.testing.tiny_models import build_model


@pytest.fixture(scope="module")
def draft_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two drafts for the demo target: the trained demo draft and a model of
    random weights of the same shape on the same tokenizer (as costly, its guesses
    noise)."""
    root = tmp_path_factory.mktemp("catalog")
    demo = require_demo_models()
    shutil.copytree(demo.draft, root / "trained-draft")
    build_model(root / "random-draft", "llama", seed=7, tokenizer_dir=Path(demo.draft),
                hidden_size=192, num_layers=1, num_heads=3, num_kv_heads=1,
                intermediate_size=512)
    return root


@pytest.fixture
def ticking(monkeypatch) -> None:
    """Every reading of the clock is one second after the last: each phase of a round
    (a plain step, a round's drafting, its verify pass) takes one tick whatever the
    machine is doing, so the two drafts cost the same and their acceptance alone
    ranks them. (The real clock on a busy machine once ranked the random draft first.)"""
    from itertools import count

    from specdeck.engines.measure import draft_probe

    probe = draft_probe.probe_drafts
    ticks = count()
    monkeypatch.setattr(draft_probe, "probe_drafts", lambda *a, **kw: probe(
        *a, **kw, clock=lambda: float(next(ticks))))


def test_the_trained_draft_ranks_first(draft_folder: Path, capsys, ticking) -> None:
    target = require_demo_models().target
    assert main(["models", str(draft_folder), "--no-cache", "--rank-drafts", target, "--json"]) == 0
    out, err = capsys.readouterr()
    assert "probing" in err and "cached in" in err
    assert "\r" not in err and "\033" not in err  # a log, not a terminal: plain lines
    ranking = DraftRanking.from_dict(orjson.loads(out))
    assert [d.name for d in ranking.drafts] == ["trained-draft", "random-draft"]
    trained, random = ranking.drafts
    assert trained.speedup > random.speedup
    assert trained.acceptance > 0.3 > random.acceptance
    # One tick a draft phase of 4 drafts, a verify pass and a plain step each one tick:
    # a draft step costs 1/4 plain step, a verify pass one.
    assert trained.draft_step == random.draft_step == 0.25
    assert trained.verify_pass == random.verify_pass == 1.0
    # Nothing drafted right: one token per round of 1 + k/4 steps, best at k = 1.
    assert random.best_k == 0 and random.speedup == pytest.approx(1 / 1.25)
    assert len(trained.survival) == 4 and ranking.probe.startswith("3 prompts x 24 tokens")
    # Cached for the picker, found by folder while the files are the same.
    assert load_ranking(target) == ranking
    assert ranking.find(draft_folder / "trained-draft") == (1, trained)
    assert ranking.find(draft_folder / "elsewhere") is None
    # Without --json, the same ranking as a table (printed from it, not probed again).
    print_ranking(target, ranking)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  1. trained-draft: ") and "accepted" in lines[1]
    assert lines[2].startswith("  2. random-draft: ")


def test_the_probe_on_the_real_clock(draft_folder: Path) -> None:
    """Timed for real, the acceptance (which no load moves) still parts them."""
    from specdeck.engines.models.catalog import find_models
    from specdeck.engines.measure.draft_probe import probe_drafts
    from specdeck.engines.models.loading import ModelStore

    from specdeck.prompts import get_prompt

    target = ModelStore().get(require_demo_models().target)
    ids = list(target.tokenizer.encode(get_prompt("code").text))
    ranking = probe_drafts(target, find_models([draft_folder], hub=False), [ids], tokens=16)
    by_name = {d.name: d for d in ranking.drafts}
    assert by_name["trained-draft"].acceptance > 0.3 > by_name["random-draft"].acceptance
    assert all(d.draft_step > 0 and d.verify_pass > 0 for d in ranking.drafts)


def test_nothing_to_rank_is_one_line(tiny_family, capsys) -> None:
    target = str(tiny_family["other_tokenizer_model"])
    assert main(["models", str(tiny_family["llama_draft"]), "--no-cache",
                 "--rank-drafts", target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no listed model shares" in err


def _ranked(name: str, speedup: float) -> RankedDraft:
    return RankedDraft(name, f"/m/{name}", "id", 0.5, (0.5, 0.25), 0.2, 1.5, 2, speedup)


@pytest.mark.parametrize("content", [
    b"\x00\x01", b"{}", b'{"kind": "draft-ranking", "version": 1, "drafts": []}',
    orjson.dumps({**DraftRanking("m", "t", "ti", "now", "p", (_ranked("a", 1.1),)).to_dict(),
                  "drafts": [{**_ranked("a", 1.1).to_dict(), "survival": [2.0]}]}),
    orjson.dumps({**DraftRanking("m", "t", "ti", "now", "p", ()).to_dict(),
                  "drafts": [{"name": ["x"]}]}),
])
def test_a_broken_ranking_is_ignored_with_one_line(tiny_family, content: bytes) -> None:
    target = tiny_family["qwen3_target"]
    path = ranking_file(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    lines: list[str] = []
    try:
        assert load_ranking(target, lines.append) is None
    finally:
        path.unlink()
    assert len(lines) == 1 and "ignoring the cached result" in lines[0]


def test_a_ranking_round_trips(tiny_family) -> None:
    target = tiny_family["llama_target"]
    ranking = DraftRanking("m", "t", "ti", "now", "probe", (_ranked("a", 1.2), _ranked("b", 0.8)))
    save_ranking(ranking, target)
    try:
        assert load_ranking(target) == ranking
    finally:
        ranking_file(target).unlink()


# --- the settings' model picker shows the cached ranking ------------------------------

from helpers.app import (  # noqa: E402  (the picker's host)
    SettingsHost, compare_request, open_picker, picker_rows,
)
from specdeck.testing.pilot import run_async, screen_text  # noqa: E402



def _probed(model, speedup: float, best_k: int) -> RankedDraft:
    from specdeck.engines.measure.measured_cache import model_identity

    return RankedDraft(model.name, str(model.path.resolve()), model_identity(model.path),
                       0.6, (0.6, 0.4), 0.2, 1.5, best_k, speedup)


@run_async
async def test_the_picker_lists_ranked_drafts_first(catalog):
    """The ranking, read from the cache (no token computed), leads in its order; the
    drafts it did not probe follow as before."""
    target = catalog["target"]
    ranking = DraftRanking("m", "target", "ti", "2026-11-30T13:00:00+00:00", "probe",
                           (_probed(catalog["d10"], 1.3, 3), _probed(catalog["d1"], 0.9, 0)))
    save_ranking(ranking, target.path)
    app = SettingsHost(compare_request(target.path))
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            picker = await open_picker(app, pilot, "draft")
            assert picker_rows(picker) == [
                ("#1 1.30x k=3", "draft-10m"), ("#2 0.90x plain wins", "draft-1m"),
                ("suggested", "org/draft-5m"),
                ("same tokenizer", "big-same-tok"), ("same tokenizer", "target"),
                ("incompatible", "other-tok"), ("tokenizer unknown", "no-tokenizer"),
            ]
            assert "2 ranked by a probe on this machine (2026-11-30" in screen_text(app)
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen.query_one("#draft").value == str(catalog["d10"].path)
            # A draft rewritten since the probe is not matched: it is no longer ranked.
            (catalog["d10"].path / "config.json").write_text('{"changed": 1}')
            picker = await open_picker(app, pilot, "draft")
            assert picker_rows(picker)[0] == ("#2 0.90x plain wins", "draft-1m")
    finally:
        ranking_file(target.path).unlink()


@run_async
async def test_without_a_ranking_the_picker_says_how_to_make_one(catalog):
    app = SettingsHost(compare_request(catalog["target"].path))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await open_picker(app, pilot, "draft")
        assert "specdeck models --rank-drafts TARGET ranks them" in screen_text(app)
