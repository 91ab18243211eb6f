"""The playground in a person's hands: no dead keys, nothing cut off, at any size.

Each test does what a person did when something went wrong (change the strategies,
shrink the terminal, scroll with keys, open a sweep from the browser...) and asserts on
what the screen shows (``screen_text``: the rows a terminal would be sent), not only on
the app's state.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from textual.app import App
from textual.geometry import Region
from textual.widgets import DataTable, Input

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.events import Round
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.core.stats import speedup
from specdeck.sessions.session import load_session, save_document
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import LiveSource, ReplaySource
from specdeck.tui.commands import STRATEGY_PRESETS, SpecdeckCommands
from specdeck.tui.help_screen import HelpScreen
from specdeck.tui.pane import StrategyPane
from specdeck.tui.session_browser import RenameDialog, SessionBrowser
from specdeck.tui.settings_screen import SettingsScreen
from specdeck.tui.stats_strip import pack_figures, stats_figures
from specdeck.tui.sweep_view import SweepScreen
from specdeck.tui.token_view import REJECTED_NEWLINE, TokenView
from specdeck.testing.pilot import run_async, screen_text, settle, until
from specdeck.testing.traces import demo_traces
from helpers.sessions import document, sample_traces, sweep_document
from helpers.app import inside, live_app, raced, replay_of, shows

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "sessions" / "examples"
SIZES = [(80, 24), (160, 45), (220, 60)]


def live_request(family, strategies=("plain", "draft"), max_tokens: int = 12) -> CompareRequest:
    return CompareRequest(
        target=str(family["llama_target"]), draft=str(family["llama_draft"]),
        strategies=list(strategies), prompt="def add(a, b):\n    return", warmup_tokens=0,
        settings=DecodeSettings(max_tokens=max_tokens, stop_at_eos=False),
    )


# -- 1. the keyboard after the panes change --------------------------------------------


@run_async
async def test_every_key_works_after_the_settings_change_the_strategies(tiny_family):
    app = live_app(live_request(tiny_family), save_sessions=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        await pilot.press("s")
        await pilot.pause()
        app.screen.query_one("#strategies", Input).value = "plain,ngram"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert [p.strategy for p in app.panes] == ["plain", "ngram"]
        # The focus is on a new pane, not on a removed one that swallowed every key.
        assert isinstance(app.focused, StrategyPane) and app.focused.is_attached
        assert "? Help" in screen_text(app).splitlines()[-1]  # the footer is back
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("x")
        assert not app.show_rejected
        await pilot.press("tab")
        assert app.focused is app.pane("ngram")
        await pilot.press("r")  # a restart keeps the panes and the focus
        await settle(app, pilot)
        assert app.focused is app.pane("ngram")
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


# -- 2. every figure of every pane, at every size --------------------------------------


def figures_of(app: SpecdeckApp) -> dict[str, list[str]]:
    """Each pane's statistics as its strip words them (speedup against plain)."""
    plain = app.pane("plain").stats.tokens_per_s
    return {pane.strategy: [f.text for f in stats_figures(
        pane.stats, None if pane.strategy == "plain" else plain, pane.strategy == "plain",
        pane.memory_estimate)] for pane in app.panes}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@run_async
async def test_four_panes_show_each_acceptance_at_every_size(size):
    """Four panes, as ``specdeck replay sessions/examples/code-all-strategies.json``
    shows them: every pane's acceptance is on screen at 80x24, 160x45 and 220x60; from
    160 columns every figure is (and at 80x24, speed and speedup too)."""
    app = replay_of(EXAMPLES / "code-all-strategies.json")
    async with app.run_test(size=size) as pilot:
        await raced(app, pilot)  # the end: every figure known
        assert [p.strategy for p in app.panes] == ["plain", "draft", "mtp", "ngram"]
        for pane in app.panes:
            seen = inside(app, pane.region)
            stats = pane.stats
            if pane.strategy == "plain":
                assert shows(seen, "no drafts") and shows(seen, "baseline")
            else:
                accept = f"accept {stats.acceptance_rate:.0%}"
                assert shows(seen, accept), (pane.strategy, seen)
                ratio = speedup(stats.tokens_per_s, app.pane("plain").stats.tokens_per_s)
                assert shows(seen, f"{ratio:.2f}x plain")
            assert shows(seen, f"{stats.tokens_per_s:.1f} tok/s")
            if size[0] >= 160:
                for figure in figures_of(app)[pane.strategy]:
                    assert shows(seen, figure), (pane.strategy, figure, seen)
            # Text too, not only numbers: the pane keeps rows for its tokens.
            assert pane.view.scrollable_content_region.height >= 2


@run_async
async def test_four_panes_stay_whole_at_80x24_while_they_race():
    """Mid-race the status line says the race's clock: said whole at 80 columns it took
    two rows, and four panes no longer fit 24 (they scrolled, the last one cut)."""
    app = replay_of(EXAMPLES / "code-all-strategies.json")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.playback is not None)
        app.seek_race(0.2)
        await pilot.pause()
        status = app.query_one("#status")
        assert status.text.startswith("race: each strategy from its own t=0 · 0.20 s of")
        assert status.size.height == 1
        rows = screen_text(app).splitlines()
        assert rows[0].startswith(" race: 0.20 s of 0.58 s · 13.8x slowed   [race 1x]")
        panes = app.query_one("#panes")
        assert not panes.has_class("-crowded")
        for pane in app.panes:  # every pane's bottom border is on screen
            bottom = rows[pane.region.bottom - 1]
            assert bottom.startswith("╰") and bottom.endswith("╯"), (pane.strategy, rows)
        # Where rows are to spare, the line says it whole (under the header, shown there).
        await pilot.resize_terminal(80, 40)
        await until(pilot, lambda: status.size.height == 2)
        assert screen_text(app).splitlines()[1].startswith(" race: each strategy from its")


@run_async
async def test_sixteen_positions_of_acceptance_wrap_inside_the_pane():
    app = replay_of(EXAMPLES / "code-draft-k16.json")
    async with app.run_test(size=(160, 45)) as pilot:
        await raced(app, pilot)
        draft = app.pane("draft")
        assert len(draft.stats.acceptance_by_position) == 16
        seen = inside(app, draft.region)
        numbers = [f"{p * 100:.0f}" for p in draft.stats.acceptance_by_position]
        lines = draft.strip.lines
        assert " ".join(lines).count("%") >= 1
        shown = " ".join(line for line in lines if "by pos" in line or line[:1].isdigit())
        assert shown.split("by pos ")[1].split(" %")[0].split() == numbers
        for line in lines:
            assert shows(seen, line)


def test_figures_pack_in_order_and_never_past_the_width():
    from specdeck.engines.core.stats import compute_stats

    traces = demo_traces()
    stats = compute_stats(traces["draft"].events)
    figures = stats_figures(stats, 100.0, False, 2**25)
    for width in (20, 36, 51, 76, 200):
        lines = pack_figures(figures, width)
        assert all(len(line) <= width for line in lines), (width, lines)
        if width >= 36:  # every figure whole, in order (at 20 the longest are cut short)
            assert " ".join(lines).replace(" · ", " ").split() == " ".join(
                f.text for f in figures).split()
    assert len(pack_figures(figures, 76, max_lines=1)) == 1
    assert pack_figures(figures, 76, max_lines=1)[0].startswith(figures[0].text)
    assert "accept" in pack_figures(figures, 76, max_lines=1)[0]


# -- 5. a rejected draft holding a newline ---------------------------------------------


class TokenViewApp(App[None]):
    """A TokenView alone on the screen."""

    def compose(self):
        yield TokenView()


@run_async
async def test_a_rejected_newline_never_breaks_the_line():
    app = TokenViewApp()
    async with app.run_test(size=(60, 10)) as pilot:
        view = app.query_one(TokenView)
        await pilot.pause()
        view.append([("a", "accepted"), ("x\ny", "rejected"), (" b", "correction")])
        assert view.lines() == [f"ax{REJECTED_NEWLINE}y b"]
        assert view.text() == "ax\ny b"  # the text itself is kept as it was
        view.show_rejected = False
        assert view.lines() == ["a b"]


@run_async
async def test_a_view_scrolled_up_stays_while_text_streams_and_follows_again_at_the_end():
    app = TokenViewApp()
    async with app.run_test(size=(40, 12)) as pilot:
        view = app.query_one(TokenView)
        await pilot.pause()
        view.append([(f"line {i}\n", "target") for i in range(30)])
        await pilot.pause()
        assert view.following and view.scroll_y > 0
        view.scroll_to(y=0, animate=False, immediate=True)  # a person scrolls up
        view.append([(f"more {i}\n", "target") for i in range(30)])
        await pilot.pause()
        assert view.scroll_y == 0 and not view.following  # not yanked back to the end
        view.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert view.following
        view.append([("last\n", "target")])
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y  # follows the stream again


# -- 6. the draft picker's columns -----------------------------------------------------


def test_every_picker_column_has_a_heading():
    from specdeck.tui.model_picker import COLUMNS

    assert all(COLUMNS) and COLUMNS[0] == "fit"


# -- 7. settings, help and the footer at 80x24 -----------------------------------------


@run_async
async def test_at_80x24_settings_scroll_and_say_what_is_wrong_help_scrolls_footer_shows_help(
        tiny_family):
    app = live_app(live_request(tiny_family), save_sessions=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert "? Help" in screen_text(app).splitlines()[-1]
        await pilot.press("s")
        await pilot.pause()
        settings = app.screen
        assert isinstance(settings, SettingsScreen)
        seed = settings.query_one("#seed", Input)
        seed.focus()
        # Scrolled to it, and drawn so (the field's region moves before the screen
        # is painted again).
        await until(pilot, lambda: shows(screen_text(app).splitlines(), "seed"), seconds=5.0)
        assert Region(0, 0, 80, 24).contains_region(seed.region)
        assert shows(screen_text(app).splitlines(), "seed")
        settings.query_one("#k", Input).value = "zzz"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is settings
        shown = screen_text(app).splitlines()  # the message wraps at 80 columns
        assert shows(shown, "⚠ k (drafts per round) must be a number, auto, grow or pmin:P")
        assert shows(shown, "'zzz')")
        await pilot.press("escape")
        await pilot.pause()

        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert not shows(screen_text(app).splitlines(), "leave specdeck")  # below the fold
        for _ in range(10):  # page down to q's line (the glossary follows the keys)
            await pilot.press("pagedown")
            await pilot.pause()
            if shows(screen_text(app).splitlines(), "leave specdeck"):
                break
        assert shows(screen_text(app).splitlines(), "leave specdeck")  # q's line
        await pilot.press("escape")


@run_async
async def test_settings_open_at_their_title_with_the_model_paths_whole(tiny_family):
    """At every size the settings open scrolled to the top (their title and the error
    line in view, though the form is taller than the screen), and each model field has
    a row of its own: 60 characters of a model path read from 160 columns (it was cut
    to 4), 30 at 80."""
    app = live_app(live_request(tiny_family), save_sessions=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        for size in ((80, 24), (160, 45), (220, 60)):  # one run, the terminal resized
            await pilot.resize_terminal(*size)
            await until(pilot, lambda: app.screen.size == size, seconds=5.0)
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, SettingsScreen), seconds=5.0)
            for _ in range(3):  # laid out and scrolled where it opens
                await pilot.pause()
            settings = app.screen
            assert settings.query_one("#settings-body").scroll_y == 0, size
            assert shows(screen_text(app).splitlines(), "Settings — ctrl+s applies"), size
            target = settings.query_one("#target", Input)
            room = target.content_region.width
            assert room >= (60 if size[0] >= 160 else 30), (size, room)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, SettingsScreen),
                        seconds=5.0)


# -- 8. scrolling with keys, and all panes together -------------------------------------


@run_async
async def test_keys_scroll_the_focused_pane_and_linked_panes_follow_by_token():
    app = replay_of(EXAMPLES / "code-all-strategies.json")
    async with app.run_test(size=(160, 30)) as pilot:
        await raced(app, pilot)
        draft, plain = app.pane("draft"), app.pane("plain")
        draft.focus()
        await pilot.press("home")
        assert draft.view.scroll_y == 0 and not draft.view.following
        await pilot.press("down", "down")
        assert draft.view.scroll_y == 2
        await pilot.press("pagedown")
        assert draft.view.scroll_y > 2
        await pilot.press("end")
        assert draft.view.following and draft.view.scroll_y == draft.view.max_scroll_y
        assert plain.view.following  # not linked: the others stayed where they were

        await pilot.press("l")
        assert app.scroll_linked and "scroll linked" in app.query_one("#status").tail
        await pilot.press("home")
        await pilot.pause()
        assert [p.view.scroll_y for p in app.panes] == [0] * 4
        for _ in range(6):
            await pilot.press("down")
        await pilot.pause()
        position = draft.view.top_position
        assert position > 0
        for pane in app.panes:
            if pane is draft:
                continue
            # The line at the top holds the same token (or ends right before it).
            starts, line = pane.view.line_positions, round(pane.view.scroll_y)
            assert starts[line] <= position
            assert line + 1 == len(starts) or starts[line + 1] >= position


# -- 9. the session browser: sweeps, examples, settings, rename errors ------------------


@pytest.fixture
def sessions_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SPECDECK_SESSIONS_DIR", str(tmp_path))
    return tmp_path


@run_async
async def test_the_browser_lists_sweeps_examples_and_each_runs_k(sessions_dir):
    for k in (2, 16):
        doc = document(sample_traces(), num_draft_tokens=k)
        save_document(sessions_dir / f"run-k{k}.json", doc)
    (sessions_dir / "sweep-1.json").write_bytes(orjson.dumps(sweep_document()))
    examples = sessions_dir / "examples"
    examples.mkdir()
    save_document(examples / "shipped.json", document(sample_traces()))
    app = SpecdeckApp(ReplaySource(demo_traces()), wall_clock=lambda: 0.0)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("o")
        await pilot.pause()
        browser = app.screen
        assert isinstance(browser, SessionBrowser)
        table = browser.query_one(DataTable)
        rows = {str(table.get_row_at(i)[1]): [str(c) for c in table.get_row_at(i)]
                for i in range(table.row_count)}
        assert rows["run-k2"][2] == "k=2" and rows["run-k16"][2] == "k=16"
        assert rows["sweep-1"][2] == "sweep · 7 cells" and rows["sweep-1"][3] == ""
        assert f"examples in {examples}" in rows and "shipped" in rows
        names = list(rows)
        assert names.index("shipped") > names.index(f"examples in {examples}") > max(
            names.index(n) for n in ("run-k2", "run-k16", "sweep-1"))
        table.move_cursor(row=names.index("sweep-1"))
        await pilot.pause()
        assert shows(screen_text(app).splitlines(), "sweep of 7 cells")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SweepScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is browser

        table.move_cursor(row=names.index("run-k2"))
        await pilot.press("r")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, RenameDialog)
        dialog.query_one(Input).value = "a/b"
        await pilot.press("enter")
        await pilot.pause()
        error = "use a plain file name without '/' that does not start with '.'"
        assert error in " ".join(" ".join(inside(app, dialog.query_one("#rename-error").region))
                                 .split())  # wrapped inside the dialog, not cut at its edge


@run_async
async def test_an_empty_sessions_folder_points_to_the_examples(sessions_dir):
    (sessions_dir / "examples").mkdir()
    save_document(sessions_dir / "examples" / "shipped.json", document(sample_traces()))
    app = SpecdeckApp(ReplaySource(demo_traces()), wall_clock=lambda: 0.0)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("o")
        await pilot.pause()
        preview = app.screen.query_one("#session-preview").region
        text = " ".join(" ".join(inside(app, preview)).split())
        # The folder's path may wrap anywhere in the preview: compared without spaces.
        assert "".join(f"No sessions in {sessions_dir} yet".split()) in "".join(text.split())
        assert "the examples below are recorded runs (the demo family, smollm2)" in text


# -- 10, 11. replays, the race's end, escape --------------------------------------------


@run_async
async def test_the_race_end_says_what_r_does_here():
    app = replay_of(EXAMPLES / "code-draft-k4.json")
    notes: list[str] = []
    app.notify = lambda message, **_: notes.append(message)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        app.seek_race(1e9)
        app.race_tick()
        assert app.status_text.startswith("race finished: ")
        assert " · g or r: race again · " in app.status_text
        await pilot.press("escape")  # never stops or cancels anything
        await pilot.press("right_square_bracket")  # only live runs change k: it says so
        await pilot.pause()
        assert app.phase == "raced" and app.request is None
        assert notes == ["a replay's settings are fixed; run it again with specdeck compare"]


# -- 12. the command palette and the screenshot ----------------------------------------


@run_async
async def test_the_palette_offers_specdecks_actions_and_presets(tiny_family):
    from textual.binding import Binding

    class WithBell(SpecdeckApp):
        """An action added later appears without touching the palette."""

        CSS_PATH = str(ROOT / "tui" / "app.tcss")

        BINDINGS = SpecdeckApp.BINDINGS + [
            Binding("y", "bell", "Bell", tooltip="ring the bell", id="test.bell")]

    app = WithBell(LiveSource(live_request(tiny_family)), save_sessions=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        commands = {c.title: c for c in SpecdeckCommands(app.screen).commands()}
        for title in ("Restart (r)", "Race (g)", "Inspect (i)", "Sessions (o)",
                      "Diff panes (d)", "Settings (s)", "Bell (y)"):
            assert title in commands, sorted(commands)
        assert commands["Bell (y)"].help == "ring the bell"
        assert all(f"strategies: {name}" in commands for name in STRATEGY_PRESETS)
        assert not any("Focus" in title or "Scroll" in title for title in commands)
        await commands["strategies: plain vs prompt lookup"].run()
        await settle(app, pilot)
        assert [p.strategy for p in app.panes] == ["plain", "ngram"]
        assert app.pane("ngram").complete
        await commands["strategies: the draft model's k: auto, grow and pmin side by side"].run()
        await settle(app, pilot)
        policies = {p.strategy: {r.length.policy for r in p.events
                                 if isinstance(r, Round) and r.length} for p in app.panes}
        assert policies == {"plain": set(), "draft@auto": {"auto"}, "draft@grow": {"grow"},
                            "draft@pmin:0.6": {"pmin"}}


@run_async
async def test_the_screenshot_command_saves_where_it_can_and_says_where(
        sessions_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home-without-downloads"))
    notes: list[str] = []
    app = SpecdeckApp(ReplaySource(demo_traces()), wall_clock=lambda: 0.0)
    app.notify = lambda message, **_: notes.append(message)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screenshot = next(c for c in app.get_system_commands(app.screen)
                          if c.title == "Screenshot")
        screenshot.callback()
        (saved,) = sessions_dir.glob("*.svg")
        assert notes == [f"screenshot saved to {saved}"]
        assert "<svg" in saved.read_text()


# -- 13. the prompt on the main screen -------------------------------------------------


@run_async
async def test_the_prompt_is_on_the_main_screen_and_expands():
    app = replay_of(EXAMPLES / "code-all-strategies.json")
    prompt = load_session(EXAMPLES / "code-all-strategies.json").prompt
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        rows = screen_text(app).splitlines()
        first = prompt.splitlines()[0]
        assert shows(rows, f"prompt {first}↵")
        second = prompt.splitlines()[1]
        assert not any(row.strip().startswith(second) for row in rows)
        await pilot.press("p")
        await pilot.pause()
        rows = screen_text(app).splitlines()
        assert any(row.strip().startswith(second) for row in rows)
