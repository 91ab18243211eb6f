"""Statistics named and computed as llama.cpp and vLLM do (``engines.conventions``), on
hand-made rounds whose values are worked out by hand, and through ``replay --json`` and
``diff --conventions``."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from helpers.sessions import document, make_trace, plain_trace
from specdeck.cli import main
from specdeck.engines.core.conventions import CONVENTIONS, MEANINGS, in_convention, speculation_stats
from specdeck.engines.core.stats import DraftCounts, compute_stats

#: k = 3 with one short round (1 draft) and one plain round:
#:   all 3 kept (bonus) | 1 of 3 | 0 of 3 | 1 of 1 | no drafts.
ROUNDS = [([21, 22, 23], 3, 24), ([25, 90, 91], 1, 26), ([92, 93, 94], 0, 27),
          ([28], 1, 29), ([], 0, 30)]


def trace():
    return make_trace("ngram", ROUNDS)


def test_the_counts_by_hand() -> None:
    counts = DraftCounts.of(trace().rounds)
    # 4 rounds drafted, 10 tokens, 5 kept; 3 rounds kept some; positions tried 4, 3, 3
    # times and survived 3 (rounds 1, 2, 4), 1 and 1 (round 1) times.
    assert counts == DraftCounts(4, 3, 10, 5, (4, 3, 3), (3, 1, 1))


def test_specdeck_llama_cpp_and_vllm_by_hand() -> None:
    counts = DraftCounts.of(trace().rounds)
    assert speculation_stats(counts, "specdeck") == {
        "drafting_rounds": 4, "proposed": 10, "accepted": 5, "acceptance_rate": 0.5,
        "mean_accepted": 1.25,  # 5 / 4, without the round's own token
        "acceptance_by_position": [3 / 4, 1 / 3, 1 / 3],  # over rounds that got that far
    }
    assert speculation_stats(counts, "llama.cpp") == {
        "n_gen_drafts": 4, "n_acc_drafts": 3, "n_drafted": 10, "n_accept": 5, "accept": 0.5,
        "mean_acc_len": 2.25,  # 1 + 5 / 4: the target's token counted
        "acc_rate_pos": [3 / 4, 1 / 4, 1 / 4],  # over every round that drafted
    }
    assert speculation_stats(counts, "vllm") == {
        "num_drafts": 4, "num_draft_tokens": 10, "num_accepted_tokens": 5,
        "draft_acceptance_rate": 0.5, "mean_acceptance_length": 2.25,
        "per_position_acceptance_rate": [3 / 4, 1 / 4, 1 / 4],
    }


def test_specdeck_convention_is_the_stats_we_show() -> None:
    stats = compute_stats(trace().events).to_dict()
    mine = speculation_stats(DraftCounts.of(trace().rounds), "specdeck")
    assert {name: stats[name] for name in mine} == mine


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_in_convention_replaces_only_the_speculation_statistics(convention: str) -> None:
    stats = compute_stats(trace().events).to_dict()
    named = in_convention(stats, trace().rounds, convention)
    assert list(named)[:3] == ["prompt_tokens", "generated_tokens", "rounds"]
    assert set(MEANINGS[convention]) <= set(named)
    assert named["tokens_per_s"] == stats["tokens_per_s"]
    if convention != "specdeck":
        assert "mean_accepted" not in named and "acceptance_by_position" not in named


def test_no_drafts_gives_no_rates() -> None:
    counts = DraftCounts.of(plain_trace("plain", [1, 2, 3]).rounds)
    assert speculation_stats(counts, "vllm") == {
        "num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0,
        "draft_acceptance_rate": None, "mean_acceptance_length": None,
        "per_position_acceptance_rate": [],
    }
    with pytest.raises(ValueError, match="unknown convention"):
        speculation_stats(counts, "tgi")


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    out = [24, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(document({"plain": plain_trace("plain", out),
                                            "ngram": trace()})))
    return path


def test_replay_json_in_vllm_names(session_file: Path, capsys) -> None:
    assert main(["replay", str(session_file), "--json", "--conventions", "vllm"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["conventions"] == "vllm"
    ngram = data["strategies"]["ngram"]
    assert ngram["mean_acceptance_length"] == 2.25
    assert ngram["per_position_acceptance_rate"] == [0.75, 0.25, 0.25]
    assert "mean_accepted" not in ngram


def test_diff_in_llama_cpp_names(session_file: Path, capsys) -> None:
    main(["diff", str(session_file), "--json", "--conventions", "llama.cpp"])
    data = orjson.loads(capsys.readouterr().out)
    assert data["conventions"] == "llama.cpp"
    rows = {row["name"]: row for row in data["panes"][0]["stats"]}
    assert rows["n_drafted"]["b"] == 10 and rows["mean_acc_len"]["b"] == 2.25
    assert rows["acc_rate_pos"]["b"] == [0.75, 0.25, 0.25]
    main(["diff", str(session_file), "--conventions", "llama.cpp"])
    text = capsys.readouterr().out
    assert "named and computed as llama.cpp does" in text
    assert "75% 25% 25%" in text and "mean_acc_len" in text


def test_help_says_each_convention() -> None:
    from specdeck.cli import build_parser

    text = build_parser()._subparsers._group_actions[0].choices["diff"].format_help()
    flat = " ".join(text.split())
    assert "WITHOUT the target's own token" in flat and "WITH the bonus token" in flat
    assert "every round that drafted" in flat
