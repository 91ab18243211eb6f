"""The teaching views under Pilot, on real runs of the demo family (the example sessions):
the inspector steps back and forth, jumps to a round and follows a click on a token; its
verdict and rollback stay on screen at 80x24, 160x45 and 220x60 with four panes at k = 16
and its table scrolls to the correction; it never shows a round of an earlier run; the
cost view prices the rounds per draft position; the glossary opens from the keys, the
legend and help; repeated timings reach the panes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.widgets import Input

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.formatting import percent, times
from specdeck.engines.core.requests import CompareRequest
from specdeck.sessions.session import load_session
from specdeck.testing.pilot import run_async, screen_text, settle, until
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import ReplaySource
from specdeck.tui.cost_view import CostScreen
from specdeck.tui.glossary import GLOSSARY
from specdeck.tui.glossary_screen import GlossaryScreen
from specdeck.tui.help_screen import HelpScreen
from specdeck.tui.inspector import RoundInspector, describe_rollback
from specdeck.tui.jump_screen import JumpScreen
from specdeck.tui.legend import Legend
from helpers.app import live_app

EXAMPLES = Path(__file__).resolve().parent.parent / "sessions" / "examples"


def flat(text: str) -> str:
    """Text with its line breaks and runs of spaces as one space (wrapped lines joined)."""
    return re.sub(r"\s+", " ", text)


def replay_app(traces=None) -> SpecdeckApp:
    session = load_session(EXAMPLES / "code-draft-k16.json")
    return SpecdeckApp(ReplaySource(traces or session.traces, session.settings,
                                    measured=session.measured),
                       title="k16", wall_clock=lambda: 0.0)


def four_panes_at_k16():
    """plain and draft k = 16 from one run, mtp and ngram from another (same prompt)."""
    k16 = load_session(EXAMPLES / "code-draft-k16.json").traces
    others = load_session(EXAMPLES / "code-all-strategies.json").traces
    return {"plain": k16["plain"], "draft": k16["draft"], "mtp": others["mtp"],
            "ngram": others["ngram"]}


async def finish_race(app: SpecdeckApp, pilot) -> None:
    await until(pilot, lambda: app.playback is not None)
    app.seek_race(1e9)
    app.race_tick()
    await pilot.pause()


def last_toast(app: SpecdeckApp) -> str:
    return list(app._notifications)[-1].message


def verdict_text(app: SpecdeckApp) -> str:
    return str(app.query_one("#inspector-verdict").render())


@run_async
async def test_the_inspector_steps_back_jumps_and_follows_a_click():
    app = replay_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await finish_race(app, pilot)
        assert app.phase == "raced"
        draft, plain = app.pane("draft"), app.pane("plain")
        draft.focus()
        await pilot.press("i")
        inspector = app.query_one(RoundInspector)
        last = len(draft.rounds) - 1
        assert inspector.shown == ("draft", draft.rounds[last])
        await pilot.press("n")  # after the end of a finished race: says so, truly
        assert last_toast(app) == (f"draft: round {last + 1} of {last + 1} is its last · "
                                   "b: back · j: jump to a round · g: race again")
        await pilot.press("b", "b")
        assert draft.selected == last - 2 and inspector.shown[1] is draft.rounds[last - 2]
        assert draft.view.selected == last - 2  # its tokens are marked in the pane
        event = draft.rounds[last - 2]
        assert verdict_text(app).startswith(
            f"draft · round {last - 1} of {last + 1} · {event.accepted} of "
            f"{len(event.drafted)} accepted → {event.end} · {len(event.tokens)} token")
        await pilot.press("n")
        assert draft.selected == last - 1 and draft.shown == len(draft.events)

        await pilot.press("j")
        await until(pilot, lambda: isinstance(app.screen, JumpScreen))
        await pilot.pause()
        app.screen.query_one(Input).value = "99"
        await pilot.press("enter")
        assert isinstance(app.screen, JumpScreen)  # stays open, says why
        assert "rounds 1 to 31" in str(app.screen.query_one("#jump-hint").render())
        app.screen.query_one(Input).value = "5"
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, JumpScreen)
        assert draft.selected == 4 and inspector.shown == ("draft", draft.rounds[4])
        assert "round 5 of 31" in verdict_text(app)
        await pilot.press("b", "b", "b", "b", "b")  # round 1 is the first
        assert draft.selected == 0 and last_toast(app) == "draft: round 1 is the first"

        # A jump to a round far above the end plain's view follows scrolls it into view.
        view = plain.view
        plain.focus()
        await pilot.press("j")
        await until(pilot, lambda: isinstance(app.screen, JumpScreen))
        app.screen.query_one(Input).value = "2"
        await pilot.press("enter")
        await pilot.pause()
        assert view.max_scroll_y > 0 and plain.selected == 1
        assert any(view.round_at(x, y) == 1 for y in range(view.size.height)
                   for x in range(view.size.width))

        # A click on a token of plain's round 10 inspects that round.
        view.scroll_home(animate=False)
        await pilot.pause()
        cell = next((x, y) for y in range(view.size.height) for x in range(view.size.width)
                    if view.round_at(x, y) == 9)
        await pilot.click(view, offset=cell)
        await pilot.pause()
        assert app.focused is plain and plain.selected == 9
        assert inspector.shown == ("plain", plain.rounds[9])
        assert "plain · round 10 of 128 · nothing drafted → target" in verdict_text(app)
        assert view.selected == 9 and draft.view.selected is None


@pytest.mark.parametrize("size", [(80, 24), (160, 45), (220, 60)])
@run_async
async def test_the_verdict_and_rollback_stay_on_screen_and_the_table_scrolls(size):
    """Four panes, draft at k = 16: a round of 16 drafts keeps its verdict and its whole
    rollback caption in view, and scrolling the table reaches its correction row."""
    app = replay_app(four_panes_at_k16())
    async with app.run_test(size=size) as pilot:
        await finish_race(app, pilot)
        draft = app.pane("draft")
        number, event = max(enumerate(draft.rounds),
                            key=lambda r: (len(r[1].drafted) - r[1].accepted, -r[0]))
        assert len(event.drafted) == 16 and event.end == "correction"
        draft.focus()
        await pilot.press("i", "j")
        await pilot.pause()
        app.screen.query_one(Input).value = str(number + 1)
        await pilot.press("enter")
        await pilot.pause()
        shown = screen_text(app)
        assert f"draft · round {number + 1} of {len(draft.rounds)}" in shown
        assert describe_rollback(event) in flat(shown)  # whole, not cut off
        assert event.rollback == "captured" and "(no replay)" in shown
        body = app.query_one("#inspector-body", VerticalScroll)
        if size[1] < 60:
            assert body.max_scroll_y > 0  # 17 rows do not fit: they scroll
        body.scroll_end(animate=False)
        await pilot.pause()
        shown = screen_text(app)
        row = rf"\b{event.accepted + 1}\s+\S+\s+correction\b"  # the last row
        assert re.search(row, shown), shown
        assert describe_rollback(event) in flat(shown)  # the verdict stays on top


@run_async
async def test_at_80x24_the_inspector_leaves_the_pane_it_marks_two_lines_of_text():
    session = load_session(EXAMPLES / "code-all-strategies.json")
    app = replay_app(session.traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await finish_race(app, pilot)
        ngram = app.pane("ngram")  # the last of four stacked panes
        ngram.focus()
        await pilot.press("i")
        await pilot.pause()
        await pilot.pause()
        box = app.query_one("#panes")
        # Too short for four panes: each keeps two lines of text, and they scroll to
        # the one whose round the inspector marks.
        assert all(pane.view.size.height >= 2 for pane in app.panes)
        assert ngram.view.selected is not None
        assert box.region.contains_region(ngram.region)
        await pilot.press("i")  # closed: the panes share the height again, unscrolled
        await pilot.pause()
        assert not box.has_class("-crowded") and box.max_scroll_y == 0


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
@run_async
async def test_the_glossary_and_the_jump_dialog_wrap_their_words_instead_of_cutting(size):
    app = replay_app()
    async with app.run_test(size=size) as pilot:
        await finish_race(app, pilot)
        await pilot.press("w")
        await pilot.pause()
        shown = screen_text(app)
        assert "accepted draft" in shown and "(underlined)" in shown and "…" not in shown
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("j")
        await until(pilot, lambda: isinstance(app.screen, JumpScreen))
        await pilot.pause()
        lines = screen_text(app).splitlines()
        at = next(i for i, line in enumerate(lines) if "· escape:" in line)
        assert "escape: cancel" in lines[at] or "█  cancel " in lines[at + 1]


@run_async
async def test_the_inspector_never_shows_a_round_of_an_earlier_run():
    app = replay_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await finish_race(app, pilot)
        app.pane("draft").focus()
        await pilot.press("i")
        inspector = app.query_one(RoundInspector)
        assert inspector.shown[1] is not None
        await pilot.press("space", "g")  # race again: at t = 0 (a still clock) no round shown
        await pilot.pause()
        assert inspector.shown == ("draft", None)
        assert verdict_text(app).startswith("draft: no round shown yet · n: step one round")
        await pilot.press("n")
        assert inspector.shown == ("draft", app.pane("draft").rounds[0])


@run_async
async def test_a_new_live_run_clears_the_inspector(tiny_family):
    request = CompareRequest(
        target=str(tiny_family["llama_target"]), draft=str(tiny_family["llama_draft"]),
        strategies=["plain", "draft"], prompt="def add(a, b):\n    return", warmup_tokens=0,
        settings=DecodeSettings(max_tokens=12, num_draft_tokens=2, stop_at_eos=False))
    app = live_app(request)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        await pilot.press("i")
        inspector = app.query_one(RoundInspector)
        assert inspector.shown[1] is not None
        await app.start_run()  # nothing of the new run has arrived yet
        assert inspector.shown == ("plain", None)
        assert "no round shown yet" in verdict_text(app)
        await settle(app, pilot)
        assert inspector.shown[1] is app.pane("plain").rounds[-1]
        # One timing each: plain was timed again after the others, and the app says so.
        assert len(app.measured["plain"]) == 2
        assert "plain timed twice" in app.status_text


@run_async
async def test_repeats_show_the_median_run_and_the_spread(tiny_family, tmp_path):
    request = CompareRequest(
        target=str(tiny_family["llama_target"]), draft=str(tiny_family["llama_draft"]),
        strategies=["plain", "draft"], prompt="def add(a, b):\n    return", warmup_tokens=0,
        repeats=3, settings=DecodeSettings(max_tokens=12, stop_at_eos=False))
    app = live_app(request, sessions_dir=tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        draft = app.pane("draft")
        assert len(app.measured["draft"]) == 3 == len(draft.runs)
        # The pane holds the median repetition: its speed is the middle one.
        assert draft.stats.tokens_per_s == pytest.approx(sorted(draft.runs)[1])
        assert "each timed 3 times, its median run kept" in app.status_text
        shown = screen_text(app)
        assert "median of 3:" in shown and "% apart" in shown  # under plain
        assert re.search(r"measured \d\.\d\dx.*±\d+%", shown)  # under draft
    (saved,) = tmp_path.glob("*.json")
    assert load_session(saved).measured == app.measured


def test_the_cost_view_marks_the_row_a_run_ran() -> None:
    """A fixed k's run ran its deepest row ("this run"); one whose k auto chose round by
    round ran no one row, so its deepest is marked as that, not as the run, and the
    longest marks still fit the row's width."""
    from specdeck.engines.core.cost_model import CostModel
    from specdeck.tui.cost_view import position_rows

    model = CostModel((0.9, 0.8, 0.7), 3.0, 0.02, 1.1)
    assert model.best_k() == 3
    for chosen, mark in ((False, "◀ best, this run"), (True, "◀ best, deepest drafted")):
        rows = str(position_rows(model, 70, chosen)).splitlines()
        assert rows[3].endswith(mark) and all(len(row) <= 70 for row in rows)


def test_the_cost_view_of_a_run_mostly_at_plain_steps() -> None:
    """An auto run that drafted one token in a tenth of its rounds, none kept, and timed
    its plain steps a little faster than plain's own: its speedup counts the plain steps
    in (above 1x), so the words say what the drafting rounds alone run, that no k pays,
    and, as auto chose the k, that a fixed k (not ]) measures deeper."""
    from specdeck.engines.core.cost_model import CostModel
    from specdeck.tui.cost_view import position_words, summary

    model = CostModel((0.0,), 1.0, 0.21, 1.18, idle_share=0.9, idle_pass=0.88)
    assert model.predicted() > 1.0
    shown = summary(model, 1.08)
    assert "A drafting round drafts 1 token at 0.21" in shown
    assert "the drafting rounds alone run 0.72x plain" in shown
    words = position_words(model, chosen=True)
    assert "no k pays here, plain steps (k = 0) are faster" in words
    assert "set a fixed k in the settings (s)" in words and "]" not in words
    assert "raise k with ]" in position_words(model)
    paying = CostModel((0.9, 0.8), 2.0, 0.05, 1.1)
    assert "no k pays" not in position_words(paying)
    assert "A round drafts 2 tokens" in summary(paying, None)


@run_async
async def test_the_cost_view_prices_each_draft_position():
    app = replay_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await finish_race(app, pilot)
        app.pane("draft").focus()
        await pilot.press("k")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CostScreen)
        model = screen.model
        assert model.k == 16 and model.baseline == "plain"
        best = model.best_k()
        assert 1 <= best < 16 and model.predicted(best) > model.predicted()
        measured = app.pane("draft").stats.tokens_per_s / app.pane("plain").stats.tokens_per_s
        shown = flat(screen_text(app))
        assert (f"Predicted {times(model.predicted())} plain, measured {times(measured)}."
                in shown)
        assert f"Best k here: {best}." in shown
        assert "16.4 tokens as one plain step" in shown
        rows = str(screen.query_one("#cost-positions").render()).splitlines()
        assert len(rows) == 17  # a heading, then one row per draft position
        assert rows[best].lstrip().startswith(f"{best} ") and rows[best].endswith("◀ best")
        assert rows[16].endswith("◀ this run")
        width = screen.query_one("#cost-positions").size.width
        for row in rows:
            assert len(row) <= width  # nothing cut off at 80 columns
        assert f"{percent(model.survival[0]):>4}" in rows[1]
        # The survival bars cross the cost line between the best k and the next.
        assert model.survival[best - 1] >= model.cost_line() > model.survival[best]
        await pilot.press("escape")
        app.pane("plain").focus()
        await pilot.press("k")
        await pilot.pause()
        assert "Nothing drafted" in screen_text(app)


@run_async
async def test_each_pane_shows_what_its_rounds_cost():
    app = replay_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await finish_race(app, pilot)
        shown = screen_text(app)
        draft = app.pane("draft")
        stats = draft.stats
        from specdeck.tui.cost_strip import CostStrip

        model = draft.query_one(CostStrip).model
        assert f"{stats.tokens_per_round:.2f} tokens/pass" in shown
        assert (f"verify pass {model.verify_pass:.2f} plain steps" in shown
                and f"draft step {model.draft_step:.2f}" in shown)
        assert f"predicts {times(model.predicted())} (textbook {times(model.textbook())})" in shown
        assert "plain step = 3.6 ms (the unit of every cost)" in shown  # under plain


def test_the_glossary_says_when_survival_by_position_can_only_fall() -> None:
    """Each position counts only the rounds that drafted that far: with one k for every
    round the survival falls, with rounds of different lengths (auto k, chain, prompt
    lookup) it can rise, which the glossary said it could not."""
    from specdeck.engines.core.stats import compute_stats
    from helpers.sessions import make_trace

    def survival(rounds) -> list[float]:
        return compute_stats(make_trace("draft", rounds).events).acceptance_by_position

    same_k = survival([([1, 2], 2, 9), ([1, 2], 1, 9), ([1, 2], 0, 9)])
    assert same_k == sorted(same_k, reverse=True)
    assert survival([([1], 0, 9), ([1], 0, 9), ([1, 2], 2, 9)]) == pytest.approx([1 / 3, 1.0])
    entry = flat(dict(GLOSSARY)["by pos (survival)"])
    assert "When every round drafts the same k it can only fall as i grows" in entry
    assert "so it can rise" in entry


@run_async
async def test_the_glossary_opens_from_its_key_the_legend_and_help():
    app = replay_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await finish_race(app, pilot)
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, GlossaryScreen)
        shown = flat(screen_text(app))
        assert "mean len" in shown and "ours + 1" in shown
        await pilot.press("escape")
        await pilot.click(Legend)
        await pilot.pause()
        assert isinstance(app.screen, GlossaryScreen)
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = " ".join(str(s.render()) for s in app.screen.query("Static"))
        assert "Noise:" in help_text
        ids = {b.id for b in app.BINDINGS}
        assert {"specdeck.back", "specdeck.jump", "specdeck.cost_view",
                "specdeck.glossary"} <= ids
        # The keys Textual binds are listed with the app's: the palette and tab.
        app.screen.query_one(".help-glossary").scroll_visible(animate=False)
        await pilot.pause()
        shown = flat(screen_text(app))
        assert "ctrl+p palette every action by name" in shown
        assert "tab Next pane move focus to the next pane" in shown
        body = app.screen.query_one("#help-body", VerticalScroll)
        body.scroll_end(animate=False)  # the glossary is under the keys
        await pilot.pause()
        assert GLOSSARY[-1][0] in screen_text(app)
