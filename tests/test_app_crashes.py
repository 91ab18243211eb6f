"""The app never dies on data it accepted, nor on a byte it is sent, and a crash (should
one still happen) exits non-zero: sessions with no strategies or no rounds race and open
every screen; a sweep with any numbers the schema allows draws its chart; a byte that is
not UTF-8 reaches the app as U+FFFD (Textual's input thread raised on it)."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual import constants, events
from textual.app import App
from textual.drivers.linux_driver import LinuxDriver

import specdeck.tui.app as app_module
from helpers.sessions import document, sample_traces, sweep_document
from specdeck.cli import main
from specdeck.commands.sweep import print_sweep
from specdeck.engines.core.errors import AppCrashed
from specdeck.sessions.chart import auto_levels, series_of, speedup_chart_svg
from specdeck.sessions.session import SessionError, save_document, session_from_document
from specdeck.sessions.sweep_file import sweep_from_document
from specdeck.testing.pilot import run_async
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import ReplaySource
from specdeck.tui.speedup_chart import _LABEL, SpeedupChart
from specdeck.tui.sweep_view import SweepApp
from specdeck.tui.terminal import run_app_to_the_end

SIZE = (120, 40)
FEW = settings(max_examples=8, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@st.composite
def sparse_sessions(draw) -> dict:
    """Schema-valid sessions cut short anywhere: no strategies, strategies with no
    rounds, no prefill, no end."""
    doc = document(sample_traces())
    names = draw(st.lists(st.sampled_from(["plain", "draft"]), unique=True, max_size=2))
    doc["strategies"] = {name: doc["strategies"][name] for name in names}
    doc["config"]["strategies"] = names
    for entry in doc["strategies"].values():
        entry["rounds"] = entry["rounds"][:draw(st.integers(0, len(entry["rounds"])))]
        entry["tokens"] = [t for r in entry["rounds"] for t in r["tokens"]] \
            if all("tokens" in r for r in entry["rounds"]) else entry["tokens"][:0]
        entry["text"] = ""
        if draw(st.booleans()):
            entry["prefill"] = None
        if draw(st.booleans()):
            entry["done"] = None
    return doc


async def tour(app: SpecdeckApp, pilot) -> None:
    """The race to its end, then every key that opens a screen or steps a pane."""
    app.seek_race(1e9)
    for key in ("g", "i", "n", "b", "x", "p", "k", "escape", "d", "escape", "j", "escape",
                "w", "escape", "question_mark", "escape", "g"):
        await pilot.press(key)
        await pilot.pause()
    for _ in range(3):  # the race timer's ticks, run here rather than slept for
        app.race_tick()
        await pilot.pause()
    assert app._exception is None and app.return_code is None


@FEW
@given(doc=sparse_sessions())
def test_sessions_with_no_strategies_or_no_rounds_race_and_open_every_screen(doc) -> None:
    try:
        session = session_from_document(doc)
    except SessionError:
        return  # not schema-valid: refused on reading, never opened

    @run_async
    async def run() -> None:
        app = SpecdeckApp(ReplaySource(session.traces, session.settings, session.prompt),
                          wall_clock=time.monotonic)
        async with app.run_test(size=SIZE) as pilot:
            await tour(app, pilot)

    run()


NUMBERS = st.one_of(st.floats(allow_nan=False), st.integers(-2**63, 2**63 - 1),
                    st.sampled_from([1e308, -1e308, 5e-324, 0, -0.0, 9.99, 10, 99.9, 100]))
KS = st.integers(-2**63, 2**63 - 1) | st.sampled_from([0, 1, -1, 3, 2**16, 2**62])


def extreme_sweep(speedups: list, ks: list) -> dict:
    """The hand-built sweep with its speculative cells' speedups and draft ks replaced."""
    doc = sweep_document()
    speculative = [c for c in doc["cells"] if c["strategy"] != "plain"]
    for cell, speedup in zip(speculative, speedups):
        cell["speedup"] = cell["median_tokens_per_s"] = cell["predicted_speedup"] = speedup
    for cell, k in zip([c for c in speculative if c["strategy"] == "draft"], ks):
        cell["k"] = k
    return doc


@settings(max_examples=150, deadline=None)
@given(speedups=st.lists(NUMBERS, min_size=5, max_size=5),
       ks=st.lists(KS, min_size=3, max_size=3), width=st.integers(20, 200))
def test_a_sweep_with_any_numbers_draws_both_charts(speedups, ks, width) -> None:
    """The SVG, and the app's text chart whose every plot row is as wide as the plot (a
    y label of 10.00 pushed its row one column right, past the colours' table)."""
    try:
        sweep = sweep_from_document(extreme_sweep(speedups, ks))
    except SessionError:
        return
    assert speedup_chart_svg(sweep.cells).startswith("<svg")
    chart = SpeedupChart(series_of(sweep.cells), levels=auto_levels(sweep.cells)).chart(width)
    for line, owners in zip(chart.lines, chart.owners):
        assert len(line) - len(line[:_LABEL]) == len(owners), line


@pytest.mark.parametrize("speedup", [1e308, 12.5, 100.0, -3.0])
def test_the_sweep_view_shows_extreme_speedups(speedup, capsys) -> None:
    sweep = sweep_from_document(extreme_sweep([speedup, 2.0, 50.0, 0.5, speedup], [1, 2, 0]))
    print_sweep(sweep.cells, sweep.recommendations)
    capsys.readouterr()

    @run_async
    async def run() -> None:
        app = SweepApp(sweep)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
        assert app._exception is None

    run()


@run_async
async def test_a_byte_that_is_not_utf8_reaches_the_app_as_a_replacement_character() -> None:
    """An xterm sending 8-bit Meta, or a paste: Textual 8.2.8's Linux driver decoded
    input strictly, and UnicodeDecodeError ended its input thread (and the app)."""
    got: list[events.Event] = []
    failures: list[BaseException] = []

    class Recording(LinuxDriver):
        def process_message(self, message) -> None:
            got.append(message)

    driver = Recording(App())
    read, write = os.pipe()
    driver.fileno = read
    previous = threading.excepthook
    threading.excepthook = lambda hook: failures.append(hook.exc_value)
    thread = threading.Thread(target=driver.run_input_thread)
    try:
        thread.start()
        os.write(write, b"a\xff\xe9b")
        deadline = time.monotonic() + 10
        while len([m for m in got if isinstance(m, events.Key)]) < 3 and thread.is_alive():
            assert time.monotonic() < deadline, got
            time.sleep(0.02)
    finally:
        driver.exit_event.set()
        thread.join(timeout=5)
        threading.excepthook = previous
        os.close(read)
        os.close(write)
    assert failures == []
    characters = [m.character for m in got if isinstance(m, events.Key)]
    assert characters[0] == "a" and characters[-1] == "b" and "\ufffd" in characters


class Crashing(App[None]):
    def on_mount(self) -> None:
        raise RuntimeError("boom")


def test_an_app_that_crashes_exits_non_zero(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(constants, "DRIVER", "textual.drivers.headless_driver:HeadlessDriver")
    with pytest.raises(AppCrashed):
        run_app_to_the_end(Crashing())
    # Through the command line: a replay whose app crashes (a race tick raising) exits 1.
    path = tmp_path / "run.json"
    save_document(path, document(sample_traces()))
    monkeypatch.setattr(app_module, "require_terminal", lambda: None)
    monkeypatch.setattr(SpecdeckApp, "race_tick", lambda self: 1 / 0)
    assert main(["replay", str(path)]) == 1
    assert "the app stopped on an unexpected error" in capsys.readouterr().err
    asyncio.set_event_loop(asyncio.new_event_loop())  # the app's run closed its loop
