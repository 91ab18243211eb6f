"""The playground driven by Pilot on the tiny models: run, pause, step, inspect, toggle
rejected drafts, change k, cancel mid-run, restart, race. Assertions are on what the
panes hold and show, and on their statistics."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable

from specdeck.engines.core.config import AUTO, DecodeSettings
from specdeck.engines.core.events import Done, Round, Trace
from specdeck.engines.core.stats import compute_stats
from specdeck.sessions.playback import Schedule
from specdeck.tui.help_screen import HelpScreen
from specdeck.tui.inspector import RoundInspector
from specdeck.tui.settings_screen import SettingsScreen
from specdeck.tui.session_browser import SessionBrowser
from specdeck.safe_text.plain import printable
from specdeck.sessions.session import load_session
from specdeck.testing.pilot import run_async, screen_text, settle, until
from helpers.app import SIZE, live_app, make_request, replay_of
from helpers.processes import gone

EXAMPLES = Path(__file__).resolve().parent.parent / "sessions" / "examples"


class GatedClock:
    """A perf_counter that blocks the generation thread after ``open_calls`` readings
    until ``release()``: the test then acts while the run is provably mid-way."""

    def __init__(self, open_calls: int) -> None:
        self.calls = 0
        self.open_calls = open_calls
        self.gate = threading.Event()
        self.blocked = threading.Event()

    def __call__(self) -> float:
        self.calls += 1
        if self.calls > self.open_calls and not self.gate.is_set():
            self.blocked.set()
            self.gate.wait(timeout=60)
        return time.perf_counter()

    async def wait_blocked(self) -> None:
        for _ in range(600):
            if self.blocked.is_set():
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the run never reached the gate")


def engine_processes() -> set[int]:
    """The child processes (engine processes among them) this test process runs now."""
    return {child.pid for child in multiprocessing.active_children()}


def shown_trace(pane) -> Trace:
    return Trace(pane.strategy, pane.events[: pane.shown])


@run_async
async def test_live_run_marks_tokens_and_fills_statistics(tiny_family):
    app = live_app(make_request(tiny_family, strategies=("plain", "draft", "ngram")))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.phase == "measured"
        plain, draft, ngram = app.pane("plain"), app.pane("draft"), app.pane("ngram")
        assert [p.border_title for p in app.panes] == ["plain", "draft k=2", "ngram n=3 k=8"]
        for pane in (plain, draft, ngram):
            assert pane.complete and pane.status == "length"
        # Every token is marked by kind: plain has only target tokens...
        assert {kind for _, kind in plain.view.tokens} == {"target"}
        kinds = {kind for _, kind in draft.view.tokens}
        assert "accepted" in kinds and kinds <= {"accepted", "rejected", "correction", "bonus"}
        # ...and speculation is lossless: without its rejected drafts, the draft pane reads
        # exactly like the plain one.
        kept = ("accepted", "correction", "bonus", "target")
        assert draft.view.text(kinds=kept) == plain.view.text()
        assert ngram.view.text(kinds=kept) == plain.view.text()
        assert plain.view.text() == printable(shown_trace(plain).text)
        rejected = [r for r in draft.events if isinstance(r, Round) and r.rejected]
        assert len(draft.view.text(kinds=("rejected",))) == sum(
            len("".join(r.rejected_pieces)) for r in rejected
        )
        # Statistics are those of the shown events, speedup against the plain pane.
        expected = compute_stats(draft.events)
        assert draft.stats.acceptance_rate == expected.acceptance_rate
        assert draft.stats.rounds == expected.rounds and draft.stats.rounds > 0
        assert draft.stats.generated_tokens == 40 == plain.stats.generated_tokens
        strip = str(draft.query_one(".stats-text").render())
        assert "x plain" in strip and f"rounds {expected.rounds}" in strip
        assert "by pos" in strip and "ttft" in strip and "peak" in strip
        assert "baseline" in str(plain.query_one(".stats-text").render())


@run_async
async def test_the_engine_process_measures_dies_is_replaced_and_ends_with_the_app(
        tiny_family, tmp_path):
    """The engine process's life, one story: it measures and names alternatives, a
    restart reuses it, kill -9 ends its run with an error, ``r`` starts a new one, and
    quitting mid-run keeps what that one measured and ends it."""
    from tokenizers import Tokenizer

    before = engine_processes()
    app = live_app(make_request(tiny_family), engine_process=True, sessions_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        (pid,) = engine_processes() - before
        draft = app.pane("draft")
        assert draft.complete and compute_stats(draft.events).generated_tokens == 40
        # The inspector names the target's alternatives from the tokenizer file alone.
        tokenizer = Tokenizer.from_file(str(tiny_family["llama_target"] / "tokenizer.json"))
        round_ = next(e for e in draft.events if isinstance(e, Round) and e.alternatives)
        token = int(round_.alternatives[0][1][0])
        assert app.token_text(token) == tokenizer.decode([token], skip_special_tokens=False)

        app.request = make_request(tiny_family, max_tokens=100_000)
        await pilot.press("r")  # a restart reuses the process and its loaded models
        await until(pilot, lambda: app.phase == "running")  # the first strategy streams
        assert engine_processes() - before == {pid}
        os.kill(pid, signal.SIGKILL)
        await settle(app, pilot)
        assert app.phase == "failed"
        status = str(app.query_one("#status").render())
        assert "engine process ended unexpectedly (exit code -9)" in status
        assert app.pane("draft").status == "not run"

        app.sessions_dir = tmp_path / "quit"
        await pilot.press("r")  # a new engine process runs it
        await until(pilot, lambda: app.phase == "running" and app.pane("plain").events)
        (second,) = engine_processes() - before
        assert second != pid
        await pilot.press("q")
    # Quitting mid-run keeps what the engine measured (it saved it as it stopped)...
    (saved,) = (tmp_path / "quit").glob("*.json")
    session = load_session(saved)
    assert session.partial and saved.name.endswith("_partial.json")
    assert 0 < session.traces["plain"].done.generated_tokens < 100_000
    # ...and ends the engine process.
    assert gone(second, 5), "the engine process outlived the app"


@run_async
async def test_pause_step_inspect_and_hide_rejected(tiny_family):
    clock = GatedClock(open_calls=60)
    app = live_app(make_request(tiny_family), clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await clock.wait_blocked()
        await pilot.press("space")
        assert app.paused
        frozen = {p.strategy: p.shown for p in app.panes}
        clock.gate.set()
        await settle(app, pilot)
        draft = app.pane("draft")
        # Paused: the run went on being measured, the panes did not move.
        assert {p.strategy: p.shown for p in app.panes} == frozen
        assert draft.events and draft.shown < len(draft.events)

        draft.focus()
        await pilot.pause()
        before = sum(isinstance(e, Round) for e in draft.events[: draft.shown])
        await pilot.press("n")
        after = sum(isinstance(e, Round) for e in draft.events[: draft.shown])
        assert after == before + 1
        step_round = draft.current_round()
        assert step_round is not None and step_round.index == after - 1

        await pilot.press("i")
        inspector = app.query_one(RoundInspector)
        assert inspector.display and inspector.shown == ("draft", step_round)
        await pilot.press("n")
        assert inspector.shown[1].index == step_round.index + 1

        # Rejected drafts: hidden with one key, still kept, back with the same key.
        await pilot.press("space")  # resume: show everything
        assert draft.complete
        with_rejected = draft.view.text()
        assert draft.view.text(kinds=("rejected",))
        await pilot.press("x")
        hidden = draft.view.text()
        assert len(hidden) < len(with_rejected)
        assert draft.view.text(kinds=("rejected",)) == ""
        assert "".join(draft.view.lines()) == hidden.replace("\n", "")
        await pilot.press("x")
        assert draft.view.text() == with_rejected


@run_async
async def test_a_paused_run_that_ends_says_paused_in_its_borders_and_status(tiny_family):
    clock = GatedClock(open_calls=60)
    app = live_app(make_request(tiny_family), clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await clock.wait_blocked()
        await pilot.press("space")
        clock.gate.set()
        await settle(app, pilot)
        assert app.phase == "measured"
        # A pane that holds text it does not show says paused in its border, not running.
        held = [p for p in app.panes if not p.complete]
        assert held and {p.status for p in held} == {"paused · space: resume"}
        # A measured run's message, saved path and all, needs more than two lines at 80
        # columns: its brief is shown instead (the path goes to a toast), never cut
        # flags, which stay whole on one line.
        status = str(app.query_one("#status").render())
        assert status.startswith("measured · ") and "saved" in app.status_text
        flags = [line for line in screen_text(app).splitlines() if "[race 1x · PAUSED" in line]
        assert len(flags) == 1 and flags[0].rstrip().endswith("]")
        await pilot.press("space")
        assert {p.status for p in app.panes} == {"length"}


@run_async
async def test_cancel_stops_at_once_and_drops_late_events(tiny_family):
    clock = GatedClock(open_calls=60)
    app = live_app(make_request(tiny_family, max_tokens=200), clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await clock.wait_blocked()
        await pilot.pause()
        await pilot.press("c")
        assert app.phase == "cancelled"
        held = {p.strategy: len(p.events) for p in app.panes}
        unfinished = [p for p in app.panes if not any(isinstance(e, Done) for e in p.events)]
        assert unfinished and all(p.status == "cancelled" for p in unfinished)
        clock.gate.set()
        await settle(app, pilot)  # the worker stops after its current round
        assert {p.strategy: len(p.events) for p in app.panes} == held
        assert all(p.stats.generated_tokens < 200 for p in unfinished)


@run_async
async def test_escape_never_cancels_and_c_says_where_the_partial_run_went(tiny_family, tmp_path):
    clock = GatedClock(open_calls=60)
    app = live_app(make_request(tiny_family, max_tokens=200), clock=clock,
                      sessions_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await clock.wait_blocked()
        await pilot.press("escape", "escape")  # an extra escape after a dialog: harmless
        assert app.phase.streaming
        await pilot.press("c")
        assert app.phase == "cancelled" and "saving what was measured" in app.status_text
        clock.gate.set()
        await settle(app, pilot)
        (partial,) = tmp_path.glob("*.json")
        assert partial.name.endswith("_partial.json") and load_session(partial).partial
        assert app.status_text.startswith(
            f"cancelled · partial session saved to {partial} · r: measure again")


@run_async
async def test_a_live_race_says_r_measures_again(tiny_family):
    now = [0.0]
    app = live_app(make_request(tiny_family, max_tokens=8), wall_clock=lambda: now[0],
                      save_sessions=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("g")
        await pilot.press("escape")  # does not stop the race
        assert app.phase == "racing"
        now[0] = 1e6
        app.race_tick()
        assert app.status_text.startswith("race finished: ")
        assert " · g: race again · r: measure again · " in app.status_text


@run_async
async def test_restart_and_change_k(tiny_family):
    app = live_app(make_request(tiny_family, k=2, max_tokens=16))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        first = app.pane("draft").view.text()
        first_run = app.run_id
        await pilot.press("r")
        await settle(app, pilot)
        assert app.run_id == first_run + 1 and app.phase == "measured"
        assert app.pane("draft").view.text() == first  # greedy: same run again

        await pilot.press("right_square_bracket")
        await settle(app, pilot)
        draft = app.pane("draft")
        assert app.request.settings.num_draft_tokens == 3
        assert draft.border_title == "draft k=3"
        widths = {len(e.drafted) for e in draft.events if isinstance(e, Round)}
        assert max(widths) == 3
        assert len(draft.stats.acceptance_by_position) == 3

    # Panes that set their own drafts (draft@2) or draft at a depth: k has nothing to change.
    app = live_app(make_request(tiny_family, k=2, max_tokens=16, strategies=("plain", "draft@2")))
    notes: list[str] = []
    app.notify = lambda message, **_: notes.append(message)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        run_id = app.run_id
        await pilot.press("right_square_bracket")
        await settle(app, pilot)
        assert app.run_id == run_id and app.request.settings.num_draft_tokens == 2
        assert app.pane("draft@2").border_title == "draft@2"
        assert any("no pane here drafts at -k" in note for note in notes)


@run_async
async def test_settings_dialog_applies_and_reports_errors(tiny_family):
    app = live_app(make_request(tiny_family, k=2, max_tokens=16))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("s")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        screen.query_one("#k").value = "99"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is screen  # stays open, says why
        assert "draft tokens" in str(screen.query_one("#settings-error").render())
        screen.query_one("#k").value = "1"
        screen.query_one("#max_tokens").value = "12"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert not isinstance(app.screen, SettingsScreen)
        draft = app.pane("draft")
        assert draft.stats.generated_tokens == 12
        assert {len(e.drafted) for e in draft.events if isinstance(e, Round)} == {1}

        await pilot.press("s")
        await pilot.pause()
        app.screen.query_one("#strategies").value = "plain,ngram"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert [p.strategy for p in app.panes] == ["plain", "ngram"]
        assert app.pane("ngram").complete and app.pane("ngram").stats.generated_tokens == 12


@run_async
async def test_race_replays_in_sync_from_each_start(tiny_family):
    now = [0.0]
    app = live_app(make_request(tiny_family), wall_clock=lambda: now[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        traces = {p.strategy: Trace(p.strategy, list(p.events)) for p in app.panes}
        await pilot.press("g")
        assert app.phase == "racing"
        assert all(p.shown == 0 and p.view.text() == "" for p in app.panes)
        schedule = Schedule.of(traces)
        # The tiny models run for a fraction of a second: at 1x the race is slowed
        # down so that it takes 8 s, every pane alike, and the status line says so.
        stretch = app.playback.stretch
        assert stretch == pytest.approx(8.0 / schedule.duration)
        half = schedule.duration / 2
        now[0] = half * stretch
        app.race_tick()
        due = schedule.due(half)
        assert {p.strategy: p.shown for p in app.panes} == due
        assert 0 < sum(due.values()) < sum(len(t.events) for t in traces.values())
        assert f"shown {stretch:.3g}x slower than real time" in app.status_text
        await pilot.press("minus")  # 0.5x: the next wall second moves the race half as far
        # 0.5 x duration more reaches the end; a hair more, or the float sum of the two
        # halves can fall one rounding short of it (the durations are measured: it failed
        # now and then)
        now[0] += schedule.duration * stretch * 1.001
        app.race_tick()
        assert app.phase == "raced"
        assert all(p.complete for p in app.panes)
        assert app.pane("plain").view.text() == printable(traces["plain"].text)
        # The finish line: each pane's place and time, the first to finish first.
        ends = schedule.ends
        first, second = sorted(ends, key=ends.get)
        assert app.pane(first).status.startswith("1st · finished at ")
        assert app.pane(second).status.startswith("2nd · finished at ")
        assert app.status_text.startswith("race finished: draft ")  # against plain


@run_async
async def test_help_lists_bindings_and_narrow_terminal_stacks_panes():
    """Layout and keys, shown on a recorded run (no engine needed)."""
    recorded = EXAMPLES / "code-all-strategies.json"
    # Three panes side by side would be 30 columns each: they stack instead.
    app = replay_of(recorded, ("plain", "draft", "ngram"))
    async with app.run_test(size=(90, 50)) as pilot:
        panes = app.query_one("#panes")
        await until(pilot, lambda: panes.size.width > 0)  # sized, so arranged
        assert panes.has_class("-stacked")
        await until(pilot, lambda: app.pane("draft").region.y > app.pane("plain").region.y,
                    seconds=5)  # laid out so
        assert app.pane("plain").region.x == app.pane("draft").region.x  # stacked
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = {b.id for b in app.BINDINGS}
        assert {"specdeck.restart", "specdeck.cancel", "specdeck.step"} <= keys
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
    two = replay_of(recorded, ("plain", "draft"))
    async with two.run_test(size=(80, 40)) as pilot:  # two panes of 40 columns fit
        panes = two.query_one("#panes")
        await until(pilot, lambda: panes.size.width > 0 and two.pane("draft").region.width)
        assert not panes.has_class("-stacked")
        assert two.pane("draft").region.x > two.pane("plain").region.x  # side by side


@run_async
async def test_model_error_is_shown_not_raised(tiny_family, tmp_path):
    request = make_request(tiny_family)
    request.target = str(tmp_path / "missing")
    app = live_app(request)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.phase == "failed"
        assert "model not found" in str(app.query_one("#status").render())
        assert all(p.status == "not run" for p in app.panes)


@run_async
async def test_live_runs_are_saved_as_sessions(tiny_family, tmp_path):
    """Like `specdeck compare`, the app saves each measured run (a cancelled one as
    partial: ``test_escape_never_cancels_and_c_says_where_the_partial_run_went``)."""

    app = live_app(make_request(tiny_family), sessions_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        saved = sorted(tmp_path.glob("*.json"))
        assert len(saved) == 1
        session = load_session(saved[0])
        assert session.strategies == ["plain", "draft"] and not session.partial
        for pane in app.panes:
            assert session.traces[pane.strategy].tokens == Trace(pane.strategy, pane.events).tokens
        assert str(saved[0]) in app.status_text
        await pilot.press("o")  # the browser lists the folder the app saves into
        await pilot.pause()
        assert isinstance(app.screen, SessionBrowser) and app.screen.directory == tmp_path
        table = app.screen.query_one(DataTable)
        assert saved[0].stem in {str(table.get_row_at(i)[1]) for i in range(table.row_count)}
        await pilot.press("escape")

    app = live_app(make_request(tiny_family, max_tokens=8), sessions_dir=tmp_path / "off",
                      save_sessions=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
    assert not (tmp_path / "off").exists()


@pytest.mark.parametrize("blas", ["OpenBLAS", "no OpenBLAS"])
@run_async
async def test_where_a_run_was_saved_is_said_whole_at_any_width(tiny_family, tmp_path,
                                                                monkeypatch, blas):
    """The status line says where a measured run was saved; at 80 columns its two lines
    cut that path off the end, so a notification says it instead (at 200, none: the
    path shows whole, though the line is not always whole). Under 30 rows the line says
    its brief, in one row: four panes fill 80x24 to the row, whichever BLAS it names."""
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libopenblas.so.0" if blas == "OpenBLAS" else "")

    def folder(width: int, rows: int) -> Path:
        return tmp_path / f"sessions saved at {width}x{rows}"

    app = live_app(make_request(tiny_family, max_tokens=8), sessions_dir=folder(80, 30))
    async with app.run_test(size=(80, 30)) as pilot:
        for width, rows, cut in ((80, 30, True), (200, 30, False), (80, 24, True)):
            if app.sessions_dir != folder(width, rows):  # resized, and measured again
                app.sessions_dir = folder(width, rows)
                app.clear_notifications()
                await pilot.resize_terminal(width, rows)
                await pilot.press("r")
            await settle(app, pilot)
            (path,) = folder(width, rows).glob("*.json")
            status = app.query_one("#status")
            shown = " ".join(status.render().plain.split("\n"))
            toasts = [str(note.message) for note in app._notifications]
            assert (str(path) not in shown) is cut
            assert any(str(path) in message for message in toasts) is cut
            if rows < 30:
                assert status.size.height == 1
                assert shown.startswith("measured · plain timed twice, "), shown
                assert f" apart · g: race   [race 1x · {blas}]" in shown, shown


@run_async
async def test_the_fetch_hint_leads_the_status_line_but_not_a_race(tiny_family):
    """Bare `specdeck` on the toy family says how to get a real model, in the status line
    (first, so that 80 columns still show it); a race needs the room and drops it."""
    hint = "toy models; a real one: specdeck fetch smollm2"
    app = live_app(make_request(tiny_family, max_tokens=8), hint=hint)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        status = str(app.query_one("#status").render())
        assert app.phase == "measured" and status.startswith(hint + " · measured")
        await pilot.press("g")
        await pilot.pause()
        assert not str(app.query_one("#status").render()).startswith(hint)
    app = live_app(make_request(tiny_family, max_tokens=8))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert str(app.query_one("#status").render()).startswith("measured")


@run_async
async def test_the_footer_shows_only_keys_that_fit_whole(tiny_family):
    """Textual's footer cut its last key mid-word at 80 columns ("x Rejecte"), and at 160
    ("q Qu"): the footer leaves out, from the end, the keys that do not fit whole, and
    shows them again when the terminal widens. Paired keys share a label."""
    from textual.widgets._footer import FooterKey

    app = live_app(make_request(tiny_family, max_tokens=8))

    def footer_line() -> str:
        return screen_text(app).splitlines()[-1]

    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        footer = app.screen.query_one("FittingFooter")
        shown = [k for k in footer.query(FooterKey) if k.display]
        assert 3 <= len(shown) < len(footer.query(FooterKey))
        assert all(k.region.right <= footer.region.right for k in shown)
        line = footer_line()
        assert line.lstrip().startswith("? Help") and "Step/back" in line
        assert "q Quit" in line and "^p palette" in line  # Quit keeps its room
        assert all(k.description in line for k in shown)
        await pilot.resize_terminal(220, 60)
        await pilot.pause()
        await pilot.pause()
        assert all(k.display for k in footer.query(FooterKey))
        assert "q Quit" in footer_line() and "- + Speed" in footer_line()
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert footer_line() == line
        for key in ("tab", "k"):  # other bindings: the footer composed anew, fitted again
            await pilot.press(key)
            await pilot.pause()
            await pilot.pause()
            footer = next(screen.query_one("FittingFooter") for screen
                          in reversed(app.screen_stack) if screen.query("FittingFooter"))
            shown = [k for k in footer.query(FooterKey) if k.display]
            assert all(k.region.right <= footer.region.right for k in shown), key
            assert all(k.description in footer_line() for k in shown), key


def test_each_pane_title_names_the_settings_that_define_its_strategy() -> None:
    from specdeck.tui.pane import pane_detail

    settings = DecodeSettings(num_draft_tokens=AUTO, mtp_depth=2, ngram_n=3, ngram_k=AUTO)
    assert pane_detail("draft", settings) == "k=auto"
    assert pane_detail("mtp", settings) == "depth=2"
    assert pane_detail("ngram", settings) == "n=3 k=auto"  # its k too (it read n=3 alone)
    assert pane_detail("plain", settings) == "" and pane_detail("ngram", None) == ""


def test_the_sessions_list_says_each_setting_once_and_whose_when_two_differ() -> None:
    from specdeck.sessions.store import SessionSummary
    from specdeck.tui.session_preview import setup

    def column(**settings) -> str:
        strategies = dict.fromkeys(("plain", "draft", "ngram", "chain"), {})
        return setup(SessionSummary(Path("s.json"), 0, strategies=strategies,
                                    settings=DecodeSettings(**settings)))

    assert column(num_draft_tokens=AUTO, ngram_k=AUTO) == "k=auto n=3"
    assert column(num_draft_tokens=2, ngram_k=4) == "k=2 n=3 ngram-k=4"
