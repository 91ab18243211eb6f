"""Hostile text everywhere a person sees it: every command-line printer and every screen of
the app, fed the corpus of ``tests/hostile.py`` (and hypothesis's variations on it).

What must hold: nothing crashes; markup is shown as written (``[@click=...]`` is text, not
an action, and clicking it does nothing); no control character from data reaches the
terminal (piped output holds no ESC, BEL or C1 CSI byte); any schema-valid session opens,
whatever its strategies are called.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.widgets import DataTable, Input

from helpers.hostile import (
    CLEAR, FRAGMENTS, OSC0, OSC52, QUIT, STRATEGY_NAMES, every_fragment, hostile_document, hostile_sweep,
    hostile_text, screenshot_click,
)
from specdeck.cli import main
from specdeck.sessions.session import save_document, session_from_document
from specdeck.sessions.sweep_file import sweep_from_document
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import ReplaySource
from specdeck.tui.cost_view import CostScreen
from specdeck.tui.diff_screen import DiffScreen
from specdeck.tui.glossary_screen import GlossaryScreen
from specdeck.tui.help_screen import HelpScreen
from specdeck.tui.jump_screen import JumpScreen
from specdeck.tui.model_picker import ModelPicker
from specdeck.tui.session_browser import SessionBrowser
from specdeck.tui.settings_screen import SettingsScreen
from specdeck.tui.sweep_view import SweepApp
from specdeck.safe_text.plain import BIDI, INVISIBLE, marked, pictured, printable, visible
from specdeck.safe_text.rich_text import literal
from specdeck.testing.pilot import run_async, screen_text, settle

#: Bytes a terminal acts on: ESC, BEL, and CSI as one C1 character (UTF-8); characters
#: that reorder or hide text.
FORBIDDEN = (b"\x1b", b"\x07", "\x9b".encode(),
             *(c.encode() for c in "\u202e\u2066\u2067\u2068\u2069\u200b\u200d\ufeff\u2028"))
SIZE = (110, 36)
HYPOTHESIS = settings(max_examples=40, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture,
                                             HealthCheck.too_slow])


def assert_inert(output: bytes | str) -> None:
    data = output.encode("utf-8", "surrogateescape") if isinstance(output, str) else output
    for byte in FORBIDDEN:
        assert byte not in data, f"{byte!r} reached the terminal: {data[:300]!r}"


def file_name(text: str) -> str:
    """``text`` as a file name the OS accepts (no '/', no NUL, not too long)."""
    name = text.replace("/", "_").replace("\x00", "_")[:120] or "x"
    return name if name not in (".", "..") else "x"


# --- the command line ---------------------------------------------------------------------


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@HYPOTHESIS
@given(text=hostile_text(), names=st.lists(st.sampled_from(STRATEGY_NAMES + ["plain"]),
                                          min_size=2, max_size=3, unique=True))
def test_every_printer_shows_hostile_sessions_literally(capsys, text, names) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a = Path(tmp) / f"{file_name(text)}.json"
        b = Path(tmp) / "b.json"
        save_document(a, hostile_document(text, names))
        other = hostile_document(text + "!", names)
        other["config"]["settings"]["num_draft_tokens"] = 3
        save_document(b, other)
        for args in (["replay", str(a), "--headless"], ["diff", str(a)],
                     ["diff", str(a), str(b)], ["diff", str(a), "--pair", names[0], names[1]]):
            code, out = run_cli(capsys, *args)
            assert code in (0, 1), out
            assert_inert(out)


@HYPOTHESIS
@given(text=hostile_text())
def test_sweep_replay_and_sweep_diff_show_hostile_sweeps_literally(capsys, text) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / f"{file_name(text)}.json", Path(tmp) / "b.json"
        a.write_bytes(orjson.dumps(hostile_sweep(text)))
        b.write_bytes(orjson.dumps(hostile_sweep(text + "?")))
        for args in (["replay", str(a), "--headless"], ["diff", str(a), str(b)]):
            code, out = run_cli(capsys, *args)
            assert code in (0, 1), out
            assert_inert(out)


def test_markup_is_printed_as_written(tmp_path, capsys) -> None:
    path = tmp_path / "run.json"
    save_document(path, hostile_document(QUIT + " [/INST] [link=https://evil]x[/link]",
                                         ["my draft", "dräft"]))
    code, out = run_cli(capsys, "replay", str(path), "--headless")
    assert code == 0
    assert QUIT in out and "[/INST]" in out and "[link=https://evil]x[/link]" in out
    assert "␛" not in out  # nothing to show: the text had no escapes
    save_document(path, hostile_document(OSC0, ["plain", "draft"]))
    code, out = run_cli(capsys, "replay", str(path), "--headless")
    assert visible(OSC0) in out and "␛]0;pwned-title␇" in out


def test_the_compare_summary_and_its_messages_show_hostile_paths_literally(
        tiny_family, tmp_path, capsys) -> None:
    """Model paths, the --json path and the sessions folder are named in progress and
    error lines: with escapes and markup in them, nothing reaches the terminal."""
    name = file_name(f"{OSC0}{QUIT}{OSC52}")
    plain = file_name(f"{OSC0}{OSC52}")  # mlx-lm globs model folders: no brackets there
    target = tmp_path / f"target{plain}"
    target.symlink_to(tiny_family["llama_target"])
    draft = tmp_path / f"draft{plain}"
    draft.symlink_to(tiny_family["llama_draft"])
    blocker = tmp_path / f"sessions{name}"
    blocker.write_text("a file where the sessions folder should be")
    code, out = run_cli(capsys, "compare", "--headless", "--target", str(target),
                        "--draft", str(draft), "--strategies", "plain,draft", "--prompt",
                        f"say {QUIT}{CLEAR}", "--max-tokens", "8", "--warmup-tokens", "0",
                        "--json", str(tmp_path / f"out{name}.json"),
                        "--sessions-dir", str(blocker))
    assert code == 3, out  # the session went to the fallback place, named
    assert_inert(out)
    assert "[@click=app.quit]quit[_]" in out and "␛]0;pwned-title␇" in out
    assert "plain: 8 tokens" in out


def hostile_model_dir(root: Path, text: str) -> Path:
    """A folder ``specdeck models`` lists, whose name and config hold ``text``."""
    path = root / file_name(text)
    path.mkdir()
    (path / "config.json").write_text(json.dumps({
        "model_type": text, "architectures": [text], "vocab_size": 10,
        "quantization": {"bits": 4, "group_size": 64},
    }))
    return path


def test_models_lists_hostile_names_literally(tmp_path, capsys) -> None:
    for i, text in enumerate(FRAGMENTS[:-3]):
        hostile_model_dir(tmp_path, f"{i}{text}")
    code, out = run_cli(capsys, "models", str(tmp_path), "--no-cache")
    assert code == 0
    assert_inert(out)
    assert "[@click" in out and "[/INST]" in out and "␛]52" in out


# --- the app --------------------------------------------------------------------------------


def replay(text: str, names: list[str]) -> SpecdeckApp:
    session = session_from_document(hostile_document(text, names))
    return SpecdeckApp(ReplaySource(session.traces, session.settings),
                       title=f"replay: {text}.json", wall_clock=lambda: 0.0)


async def tour_the_playground(app: SpecdeckApp, pilot) -> None:
    """Every screen of a replay: panes raced to the end, the inspector round by round
    (forward, back, a jump), the cost view of each pane, the help, the glossary, the diff
    of the panes; each checked for what reaches the terminal."""
    app.seek_race(1e9)
    await pilot.pause()
    assert_inert(screen_text(app))
    await pilot.press("i")  # the inspector, stepping through the rounds
    for pane in app.panes:
        pane.focus()
        pane.reset(keep_events=True)
        for key in ("n", "n", "n", "b"):
            await pilot.press(key)
            await pilot.pause()
            assert_inert(screen_text(app))
        await pilot.press("j")
        await pilot.pause()
        if isinstance(app.screen, JumpScreen):  # a pane with rounds: jump to the first
            assert_inert(screen_text(app))
            app.screen.query_one(Input).value = "1"
            await pilot.press("enter")
            await pilot.pause()
        assert_inert(screen_text(app))
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, CostScreen)
        assert_inert(screen_text(app))
        await pilot.press("escape")
    await pilot.press("question_mark")
    await pilot.pause()
    assert isinstance(app.screen, HelpScreen)
    await pilot.press("escape")
    await pilot.press("w")
    await pilot.pause()
    assert isinstance(app.screen, GlossaryScreen)
    await pilot.press("escape")
    app.panes[-1].focus()
    await pilot.press("d")
    await pilot.pause()
    assert isinstance(app.screen, DiffScreen)
    assert_inert(screen_text(app))
    await pilot.press("escape")
    await pilot.pause()
    assert not app._exit


@pytest.mark.slow
@run_async
async def test_the_playground_shows_the_whole_corpus_literally():
    app = replay(every_fragment(), ["plain", "my draft", "dräft"])
    async with app.run_test(size=SIZE) as pilot:
        await tour_the_playground(app, pilot)
    app = replay(f"{QUIT} [/INST] {OSC52}", ["plain", "my draft", "dräft"])
    async with app.run_test(size=SIZE) as pilot:
        app.seek_race(1e9)
        await pilot.pause()
        shown = screen_text(app)
        assert "my draft" in shown and "dräft" in shown
        assert "[@click=app.quit]quit[/]" in shown and "[/INST]" in shown
        assert "␛]52;c;" in shown  # the escape shown, never sent


# A tour draws every screen (~6 s of processor time): the corpus test above tours every
# fragment at once; these add two random mixes of them and of strategy names.
@pytest.mark.slow
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile_text(), names=st.lists(st.sampled_from(STRATEGY_NAMES), min_size=2,
                                          max_size=3, unique=True))
def test_any_schema_valid_session_opens_and_every_screen_survives(text, names) -> None:
    @run_async
    async def tour() -> None:
        app = replay(text, names)
        async with app.run_test(size=SIZE) as pilot:
            await tour_the_playground(app, pilot)
            assert [pane.strategy for pane in app.panes] == names

    tour()


@run_async
async def test_clicking_markup_in_a_pane_does_nothing(tmp_path):
    """A run's error sits in its pane's bottom border: every cell of it is clicked, and
    neither the screenshot action (a file written) nor quit runs."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for error in (screenshot_click(str(victim)), QUIT):
        app = replay(error, ["plain"])
        async with app.run_test(size=(220, 40)) as pilot:
            app.seek_race(1e9)
            await pilot.pause()
            region = app.pane("plain").region
            border = region.y + region.height - 1
            start = screen_text(app).splitlines()[border].index("error: ")
            for x in range(start, min(start + len(error) + 8, region.right), 3):
                await pilot.click(offset=(x, border))
            await pilot.pause()
            assert list(victim.iterdir()) == [] and not app._exit
            assert f"error: {error}" in screen_text(app).splitlines()[border]


def save_hostile_sessions(directory: Path, texts: list[str]) -> list[Path]:
    paths = []
    for i, text in enumerate(texts):
        path = directory / f"{i}{file_name(text)}.json"
        doc = hostile_document(text, ["plain", "my draft"])
        doc["created"] = f"2026-11-0{i % 9 + 1}T10:00:00+00:00"
        save_document(path, doc)
        paths.append(path)
    return paths


@run_async
async def test_the_session_browser_lists_previews_renames_and_deletes_hostile_files(
        tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDECK_SESSIONS_DIR", str(tmp_path))
    texts = ["[link=https://evil]x[/link]", QUIT, OSC0, "\x1b[2J", " [/INST]", "a\nb"]
    save_hostile_sessions(tmp_path, texts)
    (tmp_path / f"{OSC0}[b].json").write_bytes(b"{")  # unreadable, with a hostile name
    app = replay("x", ["plain", "draft"])
    toasts: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        browser = app.screen
        assert isinstance(browser, SessionBrowser)
        table = browser.query_one(DataTable)
        for row in range(table.row_count):  # every row previewed
            table.move_cursor(row=row)
            await pilot.pause()
            assert_inert(screen_text(app))
        table.move_cursor(row=0)
        await pilot.press("f", "enter")  # diff the newest with itself
        await pilot.pause()
        assert isinstance(app.screen, DiffScreen)
        assert_inert(screen_text(app))
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("r")  # rename: the field holds the name, shows escapes as ␛
        await pilot.pause()
        field = app.screen.query_one(Input)
        assert_inert(screen_text(app))
        field.value = f"{OSC0}"
        await pilot.pause()
        assert_inert(screen_text(app))
        assert "␛]0;pwned-title" in screen_text(app)
        field.value = "[b]renamed[i] [link=x]"
        await pilot.press("enter")
        await pilot.pause()
        assert (tmp_path / "[b]renamed[i] [link=x].json").is_file()
        await pilot.press("d", "y")  # delete, with a toast naming the file
        await pilot.pause()
        toasts = [n.message for n in app._notifications]
        assert_inert(screen_text(app))
        assert not app._exit
    assert any("renamed to [b]renamed[i] [link=x].json" in t for t in toasts), toasts
    assert any(t.startswith("deleted ") for t in toasts), toasts


@run_async
async def test_the_sweep_view_shows_a_hostile_sweep_literally():
    sweep = sweep_from_document(hostile_sweep(every_fragment()), Path(f"{QUIT}.json"))
    app = SweepApp(sweep)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = screen_text(app)
        assert_inert(shown)
        assert "[@click=app.quit]" in shown


@run_async
async def test_settings_and_the_model_picker_show_hostile_models_literally(tmp_path):
    from helpers.app import SettingsHost, compare_request

    for i, text in enumerate([QUIT, OSC0, "[/]", "\x1b[2J"]):
        hostile_model_dir(tmp_path, f"{i}{text}")
    request = compare_request(tmp_path / f"1{OSC0}")
    request.prompt = f"{OSC52}{QUIT}"
    app = SettingsHost(request)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, SettingsScreen)
        shown = screen_text(app)  # a field and the prompt area holding escapes
        assert_inert(shown)
        assert "␛]52;c;" in shown
        target = app.screen.query_one("#target", Input)
        target.value = f"a{OSC0}"
        target.cursor_position = 0  # the field scrolls to its start
        await pilot.pause()
        assert target.render_line(0).text.startswith("a␛]0;")
        assert_inert(screen_text(app))
        app.screen.query_one("#k", Input).value = f"{QUIT}{OSC0}"
        await pilot.click("#apply")  # refused: the message quotes the field as typed
        await pilot.pause()
        assert_inert(screen_text(app))
        assert "[@click=app.quit]" in screen_text(app)
        await pilot.click("#pick-target")
        await settle(app, pilot)
        assert isinstance(app.screen, ModelPicker)
        shown = screen_text(app)
        assert_inert(shown)
        assert "[@click=app.quit]" in shown
        assert not app._exit


def test_one_mapping_shows_control_characters() -> None:
    assert visible("a\x1b]0;t\x07\nb\x9b\udcff") == "a␛]0;t␇↵b\ufffd\ufffd"
    assert printable("a\nb\t") == "a\nb    "
    assert visible("x" * 10, limit=5) == "xxxx…"
    for fragment in FRAGMENTS:
        assert_inert(visible(fragment))
        assert_inert(printable(fragment))


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(
    [chr(c) for c in (*BIDI, *INVISIBLE, 0x2028, 0x2029)] + list("ab 日🙂\n")), max_size=40))
def test_characters_that_reorder_or_hide_text_are_shown_as_symbols(text) -> None:
    """Bidi overrides, isolates and marks as ⇄, zero-width and other invisible characters
    as ␢, in every helper a printer uses (the panes, headless output, diff, exports)."""
    hidden = {chr(c) for c in (*BIDI, *INVISIBLE, 0x2028, 0x2029)}
    for shown in (printable(text), visible(text), pictured(text), marked(text),
                  literal(text).plain):
        assert not hidden & set(shown), ascii(shown)
    assert len(pictured(text)) == len(text)  # one for one: a cursor still counts right
    assert visible("\u202eok\u2066x\u2069 \u200b\ufeff") == "⇄ok⇄x⇄ ␢␢"
