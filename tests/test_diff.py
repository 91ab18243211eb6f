"""Diffing runs: first divergence, token edits, settings that differ, statistics side by
side, on hand-built sessions whose differences are known."""

from __future__ import annotations

import orjson
import pytest

from specdeck.sessions.diff import (
    DiffError,
    TokenEdit,
    default_pairs,
    diff_sessions,
    first_divergence,
)
from specdeck.sessions.session import session_from_document
from helpers.sessions import (
    MACHINE, document, make_trace, piece, plain_trace, sample_traces, session,
)

BASE = list(range(100, 110))  # 100 .. 109


def test_first_divergence() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert first_divergence([], [7]) == 0


def test_known_edits_are_found_with_their_text() -> None:
    """b: token 3 replaced, token 6 deleted, one token appended."""
    changed = BASE[:3] + [42] + BASE[4:6] + BASE[7:] + [77]
    a = session({"plain": plain_trace("plain", BASE)})
    b = session({"plain": plain_trace("plain", changed)})

    report = diff_sessions(a, b)
    (pane,) = report.panes
    assert pane.first_divergence == 3 and not pane.identical and not report.identical
    assert pane.edits == [
        TokenEdit("replace", 3, 4, 3, 4, [103], [42], piece(103), piece(42)),
        TokenEdit("delete", 6, 7, 6, 6, [106], [], piece(106), ""),
        TokenEdit("insert", 10, 10, 9, 10, [], [77], "", piece(77)),
    ]
    assert pane.summary() == (
        "plain: first divergence at token 3 (' w103' vs ' w42'); 3 edits, 10 vs 10 tokens"
    )


def test_edits_reach_across_speculative_rounds() -> None:
    """The tokens of a draft pane come from accepted drafts and target tokens alike."""
    a = session({"plain": plain_trace("plain", [1, 2, 3, 4, 5])})
    b = session({"draft": make_trace("draft", [([1, 2], 2, 3), ([9, 5], 0, 4), ([5], 1, None)])})
    pane = diff_sessions(a, b, [("plain", "draft")]).panes[0]
    assert b.traces["draft"].tokens == [1, 2, 3, 4, 5]
    assert pane.identical and pane.summary() == "plain vs draft: identical (5 tokens)"


def test_greedy_speculation_is_lossless_in_one_line() -> None:
    s = session(sample_traces())
    report = diff_sessions(s, s)
    assert report.identical and report.changes == []
    assert [p.summary() for p in report.panes] == ["plain vs draft: identical (8 tokens)"]


def test_a_run_cut_short_is_a_prefix() -> None:
    a = session({"plain": plain_trace("plain", BASE[:4], reason="cancelled")})
    b = session({"plain": plain_trace("plain", BASE)})
    pane = diff_sessions(a, b).panes[0]
    assert pane.first_divergence == 4
    assert pane.edits == [TokenEdit("insert", 4, 4, 4, 10, [], BASE[4:], "",
                                    "".join(piece(t) for t in BASE[4:]))]
    assert pane.summary() == "plain: same first 4 tokens, then a ends (4 vs 10 tokens)"


def test_settings_that_differ_are_listed_as_paths() -> None:
    a = session(sample_traces(), num_draft_tokens=2)
    b = session_from_document(orjson.loads(orjson.dumps(document(
        sample_traces(), machine={**MACHINE, "chip": "Apple M3 Max"}, num_draft_tokens=4))))
    changes = {c.path: (c.a, c.b) for c in diff_sessions(a, b).changes}
    assert changes == {
        "config.settings.num_draft_tokens": (2, 4),
        "machine.chip": ("Test CPU", "Apple M3 Max"),
    }


def test_statistics_side_by_side_with_ratios() -> None:
    s = session(sample_traces())
    pane = diff_sessions(s, s, [("plain", "draft")]).panes[0]
    rows = {r.name: r for r in pane.stats}
    stats = s.stats()
    assert rows["tokens_per_s"].a == stats["plain"]["tokens_per_s"]
    assert rows["tokens_per_s"].ratio == pytest.approx(
        stats["draft"]["tokens_per_s"] / stats["plain"]["tokens_per_s"])
    assert rows["rounds"].ratio == pytest.approx(4 / 8)
    assert rows["acceptance_rate"].ratio is None  # plain drafts nothing
    assert rows["finish_reason"].ratio is None


def test_pairs_by_default_and_refusals() -> None:
    both = session(sample_traces())
    only_plain = session({"plain": plain_trace("plain", BASE)})
    only_ngram = session({"ngram": plain_trace("ngram", BASE)})
    assert default_pairs(both, both) == [("plain", "draft")]
    assert default_pairs(both, only_plain) == [("plain", "plain")]
    with pytest.raises(DiffError, match="one strategy"):
        default_pairs(only_plain, only_plain)
    with pytest.raises(DiffError, match="share no strategy"):
        default_pairs(only_plain, only_ngram)
    with pytest.raises(DiffError, match="b has no strategy 'mtp' \\(it has plain, draft\\)"):
        diff_sessions(only_plain, both, [("plain", "mtp")])


def test_json_form_is_the_same_data() -> None:
    a = session({"plain": plain_trace("plain", BASE)})
    b = session({"plain": plain_trace("plain", BASE[:5] + [1] + BASE[6:])})
    data = orjson.loads(orjson.dumps(diff_sessions(a, b, a_label="A", b_label="B").to_dict()))
    assert data["identical"] is False and data["a_label"] == "A"
    (pane,) = data["panes"]
    assert pane["first_divergence"] == 5 and pane["identical"] is False
    assert pane["edits"][0]["a_tokens"] == [105] and pane["edits"][0]["b_tokens"] == [1]
    assert pane["summary"].startswith("plain: first divergence at token 5")
