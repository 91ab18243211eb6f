"""What a new user hit in the app, each as a person meets it: keys pressed,
the screen read (``screen_text``) at 80x24, 160x45 and 220x60. Saved example sessions
are replayed where a live run is not the point."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdeck.testing.pilot import run_async, screen_text, settle, until
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import ReplaySource
from specdeck.tui.help_screen import HelpScreen
from helpers.app import inside, live_app, make_request, raced, replay_of, shows

EXAMPLES = Path(__file__).resolve().parent.parent / "sessions" / "examples"
SIZES = [(80, 24), (160, 45), (220, 60)]
size_ids = pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")


def toast_text(app, between: str = "") -> str:
    """The toasts on screen, their wrapped lines joined (``between``: "" where a long
    path wraps mid-word, " " between words), the pane border beside them left out."""
    rows = [row.split("▌", 1)[1] for row in screen_text(app).splitlines() if "▌" in row]
    return between.join(row.rstrip(" │─╯").strip() for row in rows)


def status_row(app) -> str:
    """The status line's first row on screen."""
    region = app.query_one("#status").region
    return inside(app, region)[0]


# -- 1. help opens on its keys ----------------------------------------------------------


@size_ids
@run_async
async def test_help_opens_on_its_keys(size):
    """``?`` shows the keys right under its title (at 80x24 an essay came first and the
    first key was below the fold); what the panes show and the glossary follow."""
    app = replay_of(EXAMPLES / "code-draft-k4.json")
    async with app.run_test(size=size) as pilot:
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        body = app.screen.query_one("#help-body")
        rows = [row.strip() for row in inside(app, body.scrollable_content_region) if row.strip()]
        assert rows[0].startswith("specdeck — keys")
        assert rows[1].split()[:2] == ["?", "Help"], rows[:4]
        assert any(row.split()[:2] == ["space", "Pause"] for row in rows[2:6]), rows[:6]
        app.screen.query_one(".help-section").scroll_visible(animate=False, top=True)
        await pilot.pause()
        rows = inside(app, body.region)
        assert shows(rows, "What the panes show") and shows(rows, "Token styles")


# -- 2. the race starts running -----------------------------------------------------------


@run_async
async def test_g_starts_the_race_running_after_stepping():
    """``i``, ``b``, ``i``, then ``g``: the race ran from 0, not frozen at
    ``0.00 s of …`` until space."""
    now = [0.0]
    app = replay_of(EXAMPLES / "code-draft-k4.json")
    app.wall_clock = lambda: now[0]
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.playback is not None)
        for key in ("i", "b", "i"):
            await pilot.press(key)
        await pilot.pause()
        assert "PAUSED" in status_row(app)  # stepping back paused the panes
        await pilot.press("g")
        now[0] += 0.25
        await until(pilot, lambda: app.playback.position > 0, seconds=5)
        await pilot.pause()
        row = status_row(app)
        assert "PAUSED" not in row and "race 1x" in row, row
        assert "0.00 s of" not in row, row


# -- 6. the palette lists Quit once -------------------------------------------------------


@run_async
async def test_the_palette_lists_quit_once():
    """Textual's own two Quits ('Quit the application as soon as possible', and ctrl+q's
    'Quit the app and return to the command prompt') stood where specdeck's ``Quit (q)``
    should: one entry now, specdeck's, with its key."""
    from textual.command import CommandPalette

    app = replay_of(EXAMPLES / "code-draft-k4.json")
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"quit")
        await until(pilot, lambda: shows(screen_text(app).splitlines(), "Quit ("), seconds=10)
        await app.workers.wait_for_complete()  # every provider has answered
        await pilot.pause()
        rows = [row for row in screen_text(app).splitlines()[:-1]  # not the footer
                if "Quit" in row]
        assert len(rows) == 1 and "Quit (q)" in rows[0], rows
        assert shows(screen_text(app).splitlines(), "leave specdeck")


# -- 5. nothing cut off or lost ---------------------------------------------------------


def footer_row(app) -> str:
    return screen_text(app).splitlines()[-1]


@size_ids
@run_async
async def test_quit_is_always_on_the_footer(size):
    """At 80x24 the footer left Quit out, at 160x45 too (the keys before it took the
    row): it keeps Quit's room and leaves others out instead, each shown whole."""
    app = replay_of(EXAMPLES / "code-all-strategies.json")
    async with app.run_test(size=size) as pilot:
        # Fitted once its key groups are laid out: wait for what must show, then read.
        await until(pilot, lambda: all(key in footer_row(app) for key in (
            "? Help", "q Quit", "^p palette", "space Pause")), seconds=10)
        row = footer_row(app)
        assert "? Help" in row and "q Quit" in row and "^p palette" in row, row
        assert "space Pause" in row
        if size[0] >= 220:
            assert "[ ] k∓1" in row  # room for every key


@run_async
async def test_quit_is_whole_on_the_footer_after_a_live_run(tiny_family):
    """At 160x45 after a live run the footer read ``[ ] k∓1  q▏^p palette``: it had been
    fitted before its key groups were laid out, counted them as nothing, and showed every
    key, the palette's over Quit's word."""
    app = live_app(make_request(tiny_family, max_tokens=8,
                                strategies=("plain", "draft", "ngram")), save_sessions=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        await until(pilot, lambda: "q Quit" in footer_row(app), seconds=10)
        row = footer_row(app)
        assert "q Quit" in row and row.rstrip().endswith("^p palette"), row


@run_async
async def test_a_cancelled_run_says_where_it_was_saved_at_80x24(tiny_family, tmp_path):
    """At 80x24 the status line read ``cancelled · partial session saved to…``, the path
    cut and no toast: the line says it in fewer words and a toast gives the path."""
    app = live_app(make_request(tiny_family, max_tokens=3000), sessions_dir=tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(pilot, lambda: any(p.events for p in app.panes), seconds=60)
        await pilot.press("c")
        await settle(app, pilot)
        (partial,) = tmp_path.glob("*_partial.json")
        await until(pilot, lambda: str(partial) in toast_text(app), seconds=5)
        assert "saved to…" not in status_row(app)
        assert status_row(app).startswith(" cancelled, partial session kept · r: measure again")


@pytest.mark.parametrize("size", SIZES[1:], ids=lambda s: f"{s[0]}x{s[1]}")
@run_async
async def test_plains_strip_shows_how_far_its_two_timings_were_apart(size):
    """Four panes at 160x45: plain's strip read ``plain step = 9.9 ms · timed twice:``,
    the value cut off. Each figure is whole now, in fewer words where need be."""
    from specdeck.sessions.session import load_session

    session = load_session(EXAMPLES / "code-all-strategies.json")
    app = SpecdeckApp(ReplaySource(session.traces, session.settings,
                                   measured={"plain": [100.0, 900.0]}),
                      wall_clock=lambda: 0.0)
    async with app.run_test(size=size) as pilot:
        await raced(app, pilot)
        plain = app.pane("plain")
        (row,) = [row for row in inside(app, plain.region) if "step" in row]
        assert "160% apart" in row and "ms" in row, row  # a busy machine's spread


@size_ids
@run_async
async def test_the_browsers_diff_hint_reads_whole(size, tmp_path):
    """``f`` marks a session to diff: at 160 columns its hint was cut (``… · esc:``)."""
    from specdeck.sessions.session import save_document
    from specdeck.testing.traces import demo_traces
    from specdeck.tui.session_browser import SessionBrowser
    from helpers.sessions import document, sample_traces

    save_document(tmp_path / "20261205-010931_plain_draft_mtp_ngram.json",
                  document(sample_traces()))
    app = SpecdeckApp(ReplaySource(demo_traces()), wall_clock=lambda: 0.0,
                      sessions_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, SessionBrowser), seconds=10)
        await pilot.pause()
        await pilot.press("f")
        await pilot.pause()
        hint = " ".join(" ".join(inside(app, app.screen.query_one("#sessions-status").region))
                        .split())
        assert hint.startswith("diff 20261205-010931_plain_draft_mtp_ngram.json with")
        assert hint.endswith("esc: unmark"), hint


# -- 7. a burst of keys lands whole ----------------------------------------------------------


def burst(app, keys: list[str]) -> None:
    """Keys sent at once, as a terminal hands on a fast typist's or a paste's: none
    waits for the app to handle the one before (``pilot.press`` does)."""
    from textual import events

    for key in keys:
        event = events.Key(key, key if len(key) == 1 else {"comma": ","}.get(key))
        event.set_sender(app)
        app._driver.send_message(event)


def typed(text: str) -> list[str]:
    return ["comma" if ch == "," else ch for ch in text]


@run_async
async def test_a_burst_of_keys_lands_whole_in_the_settings(tiny_family):
    """``s``, eight tabs to the strategies, ``end``, ``ctrl+u`` and ``plain,ngram`` sent
    at once left the field empty or with part of the text: the field ran its editing
    keys after the letters typed behind them, a tab moved the focus after them, and
    the dialog took its first field after them."""
    from specdeck.tui.settings_screen import SettingsScreen

    app = live_app(make_request(tiny_family, max_tokens=8), save_sessions=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        burst(app, ["s", *["tab"] * 8, "end", "ctrl+u", *typed("plainx"), "backspace",
                    *typed(",ngram")])
        await until(pilot, lambda: isinstance(app.screen, SettingsScreen), seconds=10)
        field = app.screen.query_one("#strategies")
        await until(pilot, lambda: shows(inside(app, field.region), "plain,ngram"),
                    seconds=30)
        await pilot.pause(0.2)
        (row,) = [row for row in inside(app, field.region) if "plain" in row]
        assert row.strip(" ▊▎") == "plain,ngram", row


# -- 3. loading is not a stall ------------------------------------------------------------


@run_async
async def test_loading_is_no_stall_but_a_stopped_load_is(tiny_family, monkeypatch):
    """While a run loads (a new engine process imports mlx, reads weights, warms up) a
    busy machine holds its heartbeat back: a toast said the engine 'has not answered for
    5 s: stopped, or stuck in a long step?'. Here the silence allowed is shorter than the
    engine's start (0.3 s): no word of it, and the run is measured. An engine stopped
    while it loads is still told."""
    import os
    import signal

    import specdeck.hosts.engine as engine_host

    monkeypatch.setattr(engine_host, "SILENT_AFTER_SECONDS", 0.3)
    request = make_request(tiny_family, max_tokens=8, strategies=("plain",))
    app = live_app(request, engine_process=True, save_sessions=False)
    toasts: list[str] = []
    app.notify = lambda message, **_: toasts.append(message)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert app.phase == "measured"
        assert not any("has not answered" in t for t in toasts), toasts
        assert "has not answered" not in status_row(app)

        pid = app._host.pid
        os.kill(pid, signal.SIGSTOP)  # stopped before the next run can start loading
        try:
            await pilot.press("r")
            await until(pilot, lambda: "has not answered" in status_row(app), seconds=30)
            assert "stopped by a signal" in " ".join(toasts)
        finally:
            os.kill(pid, signal.SIGCONT)
        await settle(app, pilot)
        assert app.phase == "measured" and "the engine process answers again" in toasts


# -- 4. a strategy that cannot run leaves the others running ------------------------------


@run_async
async def test_a_strategy_the_target_cannot_run_says_why_and_the_others_run(tiny_family):
    """``plain,draft,mtp`` on a target without an MTP head: every pane said "not run"
    after loading. Now the MTP pane says why (the folder's config said it before any
    weights loaded) and plain and draft are measured."""
    request = make_request(tiny_family, max_tokens=8, strategies=("plain", "draft", "mtp"))
    app = live_app(request, save_sessions=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        assert app.phase == "measured"
        mtp = " ".join(" ".join(inside(app, app.pane("mtp").content_region)).split())
        assert "not run: " in mtp and "has no MTP head" in mtp, mtp
        assert "config declares no MTP layers" in mtp
        for name in ("plain", "draft"):
            assert app.pane(name).complete
            assert shows(inside(app, app.pane(name).region), "length")
        await pilot.press("g")  # the race leaves the pane that did not run as it was
        await raced(app, pilot)
        assert "not run" in " ".join(inside(app, app.pane("mtp").region))


# -- 8. slow BLAS, said once, with the fix ------------------------------------------------


@run_async
async def test_without_openblas_a_toast_says_how_to_fix_it_and_the_status_keeps_one_row(
        tiny_family, monkeypatch):
    """The status line said "reference BLAS: slow" and nothing more (two rows at 80
    columns): its flag is short now, and a toast, once, names the package."""
    import specdeck.blas as blas

    monkeypatch.setenv("LD_PRELOAD", "")
    monkeypatch.setattr(blas, "openblas_path", lambda: None)
    app = live_app(make_request(tiny_family, max_tokens=8), save_sessions=False)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(pilot, lambda: "libopenblas0-pthread" in toast_text(app), seconds=10)
        assert "sudo apt-get install libopenblas0-pthread" in toast_text(app, " ")
        await settle(app, pilot)
        assert app.query_one("#status").region.height == 1
        assert status_row(app).rstrip().endswith("[race 1x · no OpenBLAS]")
        await pilot.press("w")  # the glossary says it too
        await pilot.pause()
        assert "no OpenBLAS" in screen_text(app)


# -- 11. words that match their numbers ---------------------------------------------------


def test_the_cost_view_says_even_so_only_where_the_rounds_read_slower():
    """'Even so its rounds run 1.00x plain: no k pays here': 1.00x is no 'even so'."""
    from specdeck.engines.core.cost_model import CostModel
    from specdeck.tui.cost_view import position_words

    level = position_words(CostModel((0.5,), 1, 0.1, 1.402))  # 1.5 tokens / 1.502 steps
    assert "Even so" not in level and "no faster than plain steps (1.00x)" in level
    slower = position_words(CostModel((0.5,), 1, 0.1, 1.6))
    assert "Even so its rounds run 0.88x plain: no k pays here" in slower


@run_async
async def test_the_diff_screen_shows_what_was_changed_and_folds_the_estimates():
    """The panes' diff of two sessions listed ~13 rows of ``config.memory_estimates.…``
    where a model or prompt changed: what a person changed shows, the rest is one line."""
    from specdeck.sessions.diff import diff_sessions
    from specdeck.sessions.session import load_session
    from specdeck.tui.diff_screen import DiffScreen

    a, b = (load_session(EXAMPLES / f"code-draft-k{k}.json") for k in (4, 16))
    app = replay_of(EXAMPLES / "code-draft-k4.json")
    async with app.run_test(size=(160, 45)) as pilot:
        await app.push_screen(DiffScreen(diff_sessions(a, b, None, "k4", "k16"), a.traces))
        await pilot.pause()
        rows = inside(app, app.screen.query_one("#diff-changes").region)
        assert shows(rows, "config.settings.num_draft_tokens")
        assert not shows(rows, "memory_estimates")
        assert shows(rows, "and 2 values worked out from the settings differ (memory")
