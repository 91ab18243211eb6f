"""The session browser and the diff screen, driven by Pilot on hand-built sessions in a
temporary sessions directory: the list and its previews, opening a session into the
panes, renaming, deleting, diffing two sessions, and diffing two panes of one run. No
model and no mlx needed (except the one test that goes back to a live run)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import orjson
import pytest
from rich.console import Console
from textual.widgets import DataTable, Input, Label, Static

from specdeck.sessions.session import save_document
from helpers.sessions import document, make_trace, plain_trace, sample_traces
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import LiveSource, ReplaySource
from helpers.app import live_app
from specdeck.tui.diff_screen import DiffScreen, TokenDiff, inline_diff
from specdeck.tui.session_browser import ConfirmDialog, RenameDialog, SessionBrowser
from specdeck.tui.settings_screen import SettingsScreen
from specdeck.testing.pilot import run_async, screen_text, settle
from specdeck.testing.traces import demo_traces

SIZE = (110, 36)
#: The "new" session's plain output: the sample's, with tokens 3 and 4 replaced.
NEW_PLAIN = [11, 12, 13, 40, 41, 16, 17, 18]


def shown(renderable) -> str:
    """What a Static shows, as plain text."""
    if isinstance(renderable, str):
        return renderable
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(renderable, end="")
    return console.file.getvalue()


def save(directory: Path, name: str, created: str, traces, **settings) -> Path:
    doc = document(traces, **settings)
    doc["created"] = created
    path = directory / f"{name}.json"
    save_document(path, doc)
    return path


@pytest.fixture
def sessions(tmp_path, monkeypatch) -> dict[str, Path]:
    """Four files, oldest first: a lossless plain/draft run, a partial run, a newer run
    whose plain output differs from the first at token 3 (and k differs), a broken file."""
    monkeypatch.setenv("SPECDECK_SESSIONS_DIR", str(tmp_path))
    partial = {"plain": plain_trace("plain", [11, 12], reason=None)}
    paths = {
        "old": save(tmp_path, "old", "2026-11-01T10:00:00+00:00", sample_traces()),
        "partial": save(tmp_path, "partial", "2026-11-02T10:00:00+00:00", partial),
        "new": save(tmp_path, "new", "2026-11-03T10:00:00+00:00",
                    {"plain": plain_trace("plain", NEW_PLAIN)}, num_draft_tokens=3),
        "broken": tmp_path / "broken.json",
    }
    paths["broken"].write_bytes(orjson.dumps(document(sample_traces()))[:200])
    (tmp_path / "notes.txt").write_text("not a session")
    return paths


def replay_app() -> SpecdeckApp:
    """A replay whose race clock stands still: races move only when a test seeks."""
    return SpecdeckApp(ReplaySource(demo_traces()), title="replay: demo.json",
                       wall_clock=lambda: 0.0)


async def open_browser(app, pilot) -> SessionBrowser:
    await pilot.press("o")
    await pilot.pause()
    assert isinstance(app.screen, SessionBrowser)
    return app.screen


def rows(browser: SessionBrowser) -> list[list[str]]:
    """The rows of the sessions directory's own files (the examples' section left out)."""
    table = browser.query_one(DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(browser.own_count)]


async def highlight(browser: SessionBrowser, pilot, name: str) -> None:
    index = [row[1] for row in rows(browser)].index(name)
    browser.query_one(DataTable).move_cursor(row=index)
    await pilot.pause()


def preview_text(browser: SessionBrowser) -> str:
    return shown(browser.query_one("#session-preview", Static).content)


@run_async
async def test_the_browser_lists_sessions_newest_first_with_previews(sessions):
    app = replay_app()
    notes: list[str] = []
    app.notify = lambda message, **_: notes.append(message)
    async with app.run_test(size=SIZE) as pilot:
        browser = await open_browser(app, pilot)
        # Newest first by creation time; the broken file (no time) last; notes.txt left out.
        assert rows(browser) == [["", "new", "", ""], ["", "partial", "", "partial"],
                                 ["", "old", "k=2", ""], ["", "broken", "", "unreadable"]]
        text = preview_text(browser)  # the newest is highlighted
        assert "new.json" in text and "created 2026-11-03T10:00:00+00:00" in text
        assert "target tiny/target · draft tiny/draft" in text
        assert "def fib(n):" in text and "partial" not in text
        await highlight(browser, pilot, "old")
        text = preview_text(browser)
        plain_line = next(line for line in text.splitlines() if line.startswith("plain"))
        draft_line = next(line for line in text.splitlines() if line.startswith("draft"))
        assert plain_line.split()[1] == "8" and "length" in plain_line  # tokens, end
        # 5 of 8 drafts accepted, shown as the saved acceptance rate.
        assert "62.5%" in draft_line and plain_line.split()[3] == "–"
        await highlight(browser, pilot, "partial")
        assert "partial: the run was cut short" in preview_text(browser)
        await highlight(browser, pilot, "broken")
        text = preview_text(browser)
        assert "cannot open it" in text and "truncated" in text
        # A broken file cannot be opened: the browser stays, saying why.
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is browser
        assert notes == [f"{sessions['broken']}: the JSON is truncated (the file ends early; "
                         "was it copied or written only in part?)"]


@run_async
async def test_opening_a_session_replays_it_in_the_panes(sessions):
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        assert [p.strategy for p in app.panes] == ["plain", "draft"]
        browser = await open_browser(app, pilot)
        await highlight(browser, pilot, "new")
        await pilot.press("enter")
        await settle(app, pilot)
        assert not isinstance(app.screen, SessionBrowser)
        assert [p.strategy for p in app.panes] == ["plain"]
        assert app.sub_title == "replay: new.json" and app.phase == "racing"
        app.seek_race(1e9)
        pane = app.pane("plain")
        assert pane.complete
        assert pane.view.text() == "".join(f" w{t}" for t in NEW_PLAIN) + "!"
        # The opened session races again on r, like a replay started from the command line.
        await pilot.press("r")
        assert app.phase == "racing" and app.pane("plain").shown == 0


@run_async
async def test_rename_and_delete_change_the_files(sessions):
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        browser = await open_browser(app, pilot)
        await highlight(browser, pilot, "old")
        await pilot.press("r")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, RenameDialog)
        name = dialog.query_one(Input)
        assert name.value == "old"
        name.value = "new"  # taken: refused in the dialog, nothing renamed
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog and "already exists" in str(
            dialog.query_one("#rename-error", Label).content)
        name.value = "lossless check"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is browser
        renamed = sessions["old"].with_name("lossless check.json")
        assert renamed.is_file() and not sessions["old"].exists()
        assert [row[1] for row in rows(browser)] == ["new", "partial", "lossless check", "broken"]
        assert "lossless check.json" in preview_text(browser)  # the cursor followed it

        # The footer shows d, the key the README names; delete works too.
        footer = screen_text(app).splitlines()[-1]
        assert "d Delete" in footer and "del " not in footer
        await highlight(browser, pilot, "broken")
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("n")  # no: kept
        await pilot.pause()
        assert app.screen is browser and sessions["broken"].exists()
        await pilot.press("delete")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert not sessions["broken"].exists()
        assert [row[1] for row in rows(browser)] == ["new", "partial", "lossless check"]
        assert sorted(p.name for p in sessions["new"].parent.iterdir()) == [
            "lossless check.json", "new.json", "notes.txt", "partial.json"]


@run_async
async def test_diff_of_two_sessions_shows_the_first_divergence(sessions):
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        browser = await open_browser(app, pilot)
        await highlight(browser, pilot, "old")
        await pilot.press("f")  # mark side a
        await pilot.pause()
        assert rows(browser)[2] == ["◆ a", "old", "k=2", ""]
        assert "diff old.json with" in shown(browser.query_one("#sessions-status", Static).content)
        await highlight(browser, pilot, "new")
        await pilot.press("enter")  # with a mark, enter diffs instead of opening
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        assert rows(browser)[0][0] == ""  # the mark is gone
        assert shown(screen.query_one(".dialog-title", Static).content) == (
            "Diff — a: old.json · b: new.json")
        verdict = shown(screen.query_one("#diff-verdict-0", Static).content)
        assert verdict.startswith("plain: first divergence at token 3 (' w14 w15' vs ' w40 w41')")
        assert screen.query_one("#diff-verdict-0").has_class("-different")
        tokens = screen.query_one("#diff-tokens-0", TokenDiff)
        assert tokens.plain == " w11 w12 w13[- w14 w15-]{+ w40 w41+} w16 w17 w18"
        assert [kind for _, kind in tokens.runs] == ["equal", "deleted", "inserted", "equal"]
        # Deleted and inserted tokens differ by more than colour.
        deleted = tokens.get_component_rich_style("diff--deleted")
        inserted = tokens.get_component_rich_style("diff--inserted")
        assert deleted.strike and not deleted.underline
        assert inserted.underline and not inserted.strike
        changes = shown(screen.query_one("#diff-changes", Static).content)
        assert "config.settings.num_draft_tokens" in changes
        stats = shown(screen.query_one("#diff-stats-0", Static).content)
        cells = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
                 for line in stats.splitlines() if line.count("│") == 5}
        assert cells["generated_tokens"] == ["8", "8", "1.00"]
        assert cells["acceptance_rate"] == ["–", "–", "–"]  # plain on both sides
        a_speed, b_speed, ratio = cells["tokens_per_s"]
        assert float(ratio) == pytest.approx(float(b_speed) / float(a_speed), abs=0.01)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is browser


@run_async
async def test_diff_of_two_panes_of_the_current_run():
    diverging = make_trace("draft", [([11, 12], 2, 13), ([14, 99], 1, 50), ([51], 1, 52)])
    traces = {"plain": plain_trace("plain", [11, 12, 13, 14, 15, 16, 17]), "draft": diverging,
              "ngram": plain_trace("ngram", [11, 12, 13, 14, 15, 16, 17])}
    app = SpecdeckApp(ReplaySource(traces), title="replay: run.json")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.pane("plain").focus()
        await pilot.press("d")  # from the baseline pane: every other pane against it
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        verdicts = [shown(s.content) for s in screen.query(".diff-verdict").results(Static)]
        assert verdicts[0].startswith("plain vs draft: first divergence at token 4")
        assert verdicts[1] == "plain vs ngram: identical (7 tokens)"
        assert "panes of replay: run.json" in shown(screen.query_one(".dialog-title").content)
        assert screen.query_one("#diff-tokens-0", TokenDiff).plain == (
            " w11 w12 w13 w14[- w15 w16 w17-]{+ w50 w51 w52+}")
        assert not screen.query("#diff-tokens-1")  # identical: no token diff
        await pilot.press("escape")
        await pilot.pause()
        app.pane("ngram").focus()
        await pilot.press("d")  # from another pane: that pane against the baseline
        await pilot.pause()
        verdicts = [shown(s.content) for s in app.screen.query(".diff-verdict").results(Static)]
        assert verdicts == ["plain vs ngram: identical (7 tokens)"]


def test_long_equal_stretches_are_cut_to_context():
    from specdeck.sessions.diff import diff_sessions
    from helpers.sessions import session

    a = list(range(100, 160))
    b = a[:30] + [7] + a[31:]
    run = session({"plain": plain_trace("plain", a), "draft": plain_trace("draft", b)})
    pane = diff_sessions(run, run).panes[0]
    runs = inline_diff(run.traces["plain"], pane, context=4)
    assert runs == [
        (" ⋯ 26 equal tokens ⋯ ", "elided"),
        ("".join(f" w{t}" for t in a[26:30]), "equal"),
        ("[- w130-]", "deleted"),
        ("{+ w7+}", "inserted"),
        ("".join(f" w{t}" for t in a[31:35]), "equal"),
        (" ⋯ 25 equal tokens ⋯ ", "elided"),
    ]


@run_async
async def test_a_live_app_opens_a_session_and_goes_back_to_live_runs(sessions, tmp_path):
    from specdeck.engines.core.requests import CompareRequest
    from specdeck.engines.core.config import DecodeSettings

    # A target that is not there: the live run fails at once, without loading a model.
    request = CompareRequest(target=str(tmp_path / "no-model"), strategies=["plain", "ngram"],
                             prompt="hi", settings=DecodeSettings(max_tokens=4))
    app = live_app(request, wall_clock=lambda: 0.0)
    notes: list[str] = []
    app.notify = lambda message, **_: notes.append(message)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.phase == "failed"
        browser = await open_browser(app, pilot)
        await highlight(browser, pilot, "old")
        await pilot.press("enter")
        await settle(app, pilot)
        assert [p.border_title for p in app.panes] == ["plain", "draft k=2"]
        assert app.source.traces["draft"].tokens == sample_traces()["draft"].tokens
        assert app.sub_title == "replay: old.json" and app.phase == "racing"
        assert app.focused is app.pane("plain")  # keys reach the app again
        # ] (k + 1) never leaves the saved session silently: it says how to go live.
        await pilot.press("right_square_bracket")
        await settle(app, pilot)
        assert isinstance(app.source, ReplaySource) and app.sub_title == "replay: old.json"
        assert "ctrl+s to measure live again" in notes[-1]
        # The settings do, and say so: the live comparison again, its own panes.
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, SettingsScreen)
        assert "leaves the saved session" in app.screen.title_text
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert isinstance(app.source, LiveSource) and app.sub_title == ""
        assert [p.strategy for p in app.panes] == ["plain", "ngram"]
        assert app.request.settings.num_draft_tokens == 2 and app.phase == "failed"


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
@run_async
async def test_the_list_shows_each_setting_once_and_every_column_whole(sessions, size):
    rounds = [([11, 12], 2, 13)]
    chain = {name: make_trace(name, rounds) for name in ("draft", "ngram", "chain")}
    save(sessions["old"].parent, "20261203-101500_plain-draft-ngram-chain",
         "2026-11-04T10:00:00+00:00", {"plain": plain_trace("plain", [11, 12, 13]), **chain},
         num_draft_tokens="auto")
    app = replay_app()
    async with app.run_test(size=size) as pilot:
        browser = await open_browser(app, pilot)
        await pilot.pause()
        # A chain repeats ngram's n and draft's k: each is said once; ngram's own k (8,
        # not draft's auto) says whose it is.
        assert rows(browser)[0][2] == "k=auto n=3 ngram-k=8"
        # The columns are sized once the table has its width (a refresh after mounting:
        # later on a loaded machine).
        chained = re.compile(r"20261203-101500_\S+\s+k=auto n=3 ngram-k=8\s")
        for _ in range(40):
            lines = screen_text(app).splitlines()
            if any(chained.search(line) for line in lines):
                break
            await pilot.pause(0.05)
        # The name gives way (cut with …); the settings and the notes read whole.
        assert any(re.search(r"\bsession\s+settings\s+note\b", line) for line in lines)
        assert any(chained.search(line) for line in lines)
        assert any(re.search(r"\bbroken\s+unreadable\b", line) for line in lines)
        if size[1] >= 45:  # the examples fit under them
            assert any(re.search(r"code-all-strategies\s+k=2 depth=1 n=3\b", line)
                       for line in lines)
