"""``specdeck models --rank-drafts``: a fake catalog holding the demo draft and a
random-weight draft with the same tokenizer; the probe ranks the trained one first, the
ranking is cached per machine and target and read back untrusted."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from specdeck.cli import main
from specdeck.engines.demo import require_demo_models
from specdeck.engines.draft_ranking import (
    DraftRanking, RankedDraft, load_ranking, ranking_file, save_ranking,
)
from specdeck.testing.tiny_models import build_model


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two drafts for the demo target: the trained demo draft and a model of
    random weights on the same tokenizer (its guesses are noise)."""
    root = tmp_path_factory.mktemp("catalog")
    demo = require_demo_models()
    shutil.copytree(demo.draft, root / "trained-draft")
    build_model(root / "random-draft", "llama", seed=7, tokenizer_dir=Path(demo.draft),
                hidden_size=64, num_layers=1)
    return root


def test_the_trained_draft_ranks_first(catalog: Path, capsys) -> None:
    target = require_demo_models().target
    assert main(["models", str(catalog), "--no-cache", "--rank-drafts", target, "--json"]) == 0
    out, err = capsys.readouterr()
    assert "probing" in err and "cached in" in err
    ranking = DraftRanking.from_dict(orjson.loads(out))
    assert [d.name for d in ranking.drafts] == ["trained-draft", "random-draft"]
    trained, random = ranking.drafts
    assert trained.speedup > random.speedup
    assert trained.acceptance > 0.3 > random.acceptance
    assert len(trained.survival) == 4 and ranking.probe.startswith("3 prompts x 24 tokens")
    # Cached for the picker, found by folder while the files are the same.
    assert load_ranking(target) == ranking
    assert ranking.find(catalog / "trained-draft") == (1, trained)
    assert ranking.find(catalog / "elsewhere") is None


def test_the_table_names_the_ranking(catalog: Path, capsys) -> None:
    target = require_demo_models().target
    assert main(["models", str(catalog), "--no-cache", "--rank-drafts", target]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  1. trained-draft: ") and "accepted" in lines[1]
    assert lines[2].startswith("  2. random-draft: ")


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
