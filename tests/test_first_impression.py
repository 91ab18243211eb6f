"""What a newcomer sees first: the sentence that ends a race, saying why each
strategy won or lost from the run's own figures, and the README's picture, which the
example session it was made from replays to."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from specdeck.engines.core.formatting import percent, times
from specdeck.engines.core.stats import Verdict, compute_stats, speedup, verdicts
from specdeck.engines.models.families import FAMILIES
from specdeck.export.still import race_svg
from specdeck.prompts import get_prompt
from specdeck.sessions.session import load_session
from specdeck.testing.pilot import run_async
from specdeck.tui.fixed_text import TAIL_GAP
from specdeck.tui.racing import race_sentence
from helpers.app import inside, raced, replay_of

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "sessions" / "examples" / "rewrite-smollm2.json"
PICTURE = ROOT / "docs" / "screenshot.svg"
SIZES = [(80, 24), (160, 45), (220, 60)]


def run(tokens_per_s: float, acceptance: float | None):
    return replace(compute_stats([]), tokens_per_s=tokens_per_s, acceptance_rate=acceptance)


def test_verdicts_rank_each_strategy_against_plain_and_call_noise_a_tie() -> None:
    runs = {"plain": run(10.0, None), "draft": run(7.0, 0.12), "ngram": run(14.0, 0.84)}
    assert verdicts(runs, {}) == [Verdict("ngram", "won", pytest.approx(1.4), 0.84),
                                  Verdict("draft", "lost", pytest.approx(0.7), 0.12)]
    # Plain timed at 10 and 14 tok/s spreads a third: 0.7x is within that, 1.4x is not.
    assert [v.outcome for v in verdicts(runs, {"plain": [10.0, 14.0]})] == ["won", "tied"]
    assert verdicts({"draft": run(7.0, 0.12)}, {}) == []  # nothing to compare with


def test_the_sentence_says_who_won_and_lost_by_how_much_and_why() -> None:
    won, lost = Verdict("ngram", "won", 1.39, 0.84), Verdict("draft", "lost", 0.71, 0.12)
    whole, brief = race_sentence([won, lost])
    assert whole == ("ngram won at 1.39x plain, 84% of its drafts accepted; "
                     "draft lost at 0.71x, 12% accepted")
    assert brief == "ngram won 1.39x, 84% accepted; draft lost 0.71x, 12%"
    # Three drafters: the brief keeps the fastest and the slowest; a tie and a run
    # that drafted nothing say so.
    whole, brief = race_sentence([won, Verdict("chain", "tied", 1.02, None), lost])
    assert "chain tied with plain at 1.02x (within the noise), it drafted nothing" in whole
    assert "chain" not in brief and brief.startswith("ngram won") and "draft lost" in brief


def test_the_brief_fits_one_row_of_80_columns_beside_a_live_runs_flags() -> None:
    """A live run's flags on Linux ([race 1x · OpenBLAS]) leave 55 of the 78 columns
    inside the status line's padding; the longest briefs of two drafters fit them (a
    tiny model's run that drafted nothing took two rows)."""
    room = 78 - len(TAIL_GAP) - len("[race 1x · OpenBLAS]")
    for pair in ([Verdict("ngram", "won", 2.26, 1.0), Verdict("draft", "lost", 0.75, 1.0)],
                 [Verdict("draft", "tied", 1.06, 0.71), Verdict("ngram", "lost", 0.66, None)]):
        brief = race_sentence(pair)[1]
        assert len(brief) <= room, brief


def test_bare_specdeck_on_smollm2_opens_on_a_prompt_its_answer_copies_from() -> None:
    """The first race has a winner (prompt lookup copies the paragraph) and a loser."""
    smollm2 = FAMILIES["smollm2"]
    assert smollm2.strategies == ("plain", "draft", "ngram")
    assert "Rewrite the following paragraph" in get_prompt(smollm2.prompt).text
    assert FAMILIES["demo"].prompt == "code"


def status_rows(app) -> list[str]:
    return [row.strip() for row in inside(app, app.query_one("#status").region)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@run_async
async def test_the_examples_race_ends_saying_why_ngram_won_and_draft_lost(size):
    """``specdeck replay`` of the picture's session: the status line's sentence, whole,
    with the ngram pane's own speedup and acceptance; one row at 80x24."""
    app = replay_of(EXAMPLE)  # with the measured repeats, as `specdeck replay`
    async with app.run_test(size=size) as pilot:
        await raced(app, pilot)
        rows = status_rows(app)
        shown = " ".join(rows)
        plain, ngram = app.pane("plain").stats, app.pane("ngram").stats
        ratio = times(speedup(ngram.tokens_per_s, plain.tokens_per_s))
        assert f"ngram won {'at ' if size[0] > 80 else ''}{ratio}" in shown, rows
        assert percent(ngram.acceptance_rate) in shown and "draft lost" in shown, rows
        assert "…" not in shown and all(len(row) <= size[0] for row in rows)
        assert len(rows) == 1 or size[1] >= 30, rows


def test_the_readme_picture_is_what_the_documented_export_makes_of_the_example() -> None:
    """``specdeck export sessions/examples/rewrite-smollm2.json --svg docs/screenshot.svg
    --inspect draft:64``: regenerate the picture with that command after a change to the
    look."""
    assert race_svg(load_session(EXAMPLE), inspect=("draft", 64)) == PICTURE.read_text(
        encoding="utf-8"), "docs/screenshot.svg is stale: run the command in the docstring"
