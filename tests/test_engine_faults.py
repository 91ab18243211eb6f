"""Faults of the engine, noticed and survived: a stopped engine process is reported while it
is silent, the tokens that reached the app before the engine died are saved as a partial
session, and a save that misses the sessions folder is said in the app and at exit."""

from __future__ import annotations

import os
import signal
import threading
import time


import specdeck.hosts.engine as engine_host
import specdeck.engines.runs.compare as compare
from specdeck.hosts.engine import EventBatch, ProcessHost, RunCommand, RunEnded, ThreadHost
from specdeck.sessions.session import load_session
from helpers.app import SIZE, live_app, make_request
from specdeck.testing.pilot import run_async, settle, until


def status(app) -> str:
    """The status line as shown, its lines joined (they wrap at spaces)."""
    return str(app.query_one("#status").render()).replace("\n", " ")


@run_async
async def test_a_stopped_engine_is_reported_and_its_return_noticed(tiny_family, monkeypatch):
    monkeypatch.setattr(engine_host, "SILENT_AFTER_SECONDS", 1.5)
    app = live_app(make_request(tiny_family, max_tokens=100_000), engine_process=True,
                   save_sessions=False)
    toasts: list[str] = []
    app.notify = lambda message, **_: toasts.append(message)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.phase == "running")
        pid = app._host.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            await until(pilot, lambda: "has not answered" in status(app), seconds=30)
            shown = status(app)
            assert f"(pid {pid})" in shown and "stopped by a signal" in shown
            assert app.phase == "running"  # nothing was lost: the run just waits
        finally:
            os.kill(pid, signal.SIGCONT)
        await until(pilot, lambda: "has not answered" not in status(app), seconds=30)
        assert "the engine process answers again" in toasts
        assert any("has not answered" in t for t in toasts)
        await pilot.press("c")
        await settle(app, pilot)


@run_async
async def test_the_tokens_received_are_saved_when_the_engine_dies(tiny_family, tmp_path):
    app = live_app(make_request(tiny_family, max_tokens=100_000), engine_process=True,
                   sessions_dir=tmp_path)
    toasts: list[str] = []
    app.notify = lambda message, **_: toasts.append(message)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.phase == "running" and len(app.pane("plain").events) > 20)
        os.kill(app._host.pid, signal.SIGKILL)
        await settle(app, pilot)
        assert app.phase == "failed"
        shown = status(app)
        assert "exit code -9" in shown and "kept what arrived in" in shown
        received = list(app.pane("plain").events)
    (saved,) = tmp_path.glob("*_partial.json")
    # Said whole once: in the status line, or (cut short of it at 80 columns, as this
    # folder's long name is) in a notification.
    assert (str(saved) in shown) != (str(saved) in toasts)
    session = load_session(saved)
    assert session.partial and session.traces["plain"].events == received
    assert session.config["target"]["source"] == str(tiny_family["llama_target"])
    assert session.machine["chip"]  # described by the engine process before it died


def test_a_dead_engine_ends_its_run_when_another_took_its_exit_status(tiny_family,
                                                                      monkeypatch):
    """Any thread of the app may reap a child (multiprocessing's own cleanup on the next
    process start does): the run still ends, its exit code said to be unknown. The
    reader is held after the pipe closes until this thread took the status."""
    taken = threading.Event()
    relay = ProcessHost._relay

    def relay_then_wait(self, connection, pid):
        last = relay(self, connection, pid)
        taken.wait(60)
        return last

    monkeypatch.setattr(ProcessHost, "_relay", relay_then_wait)
    messages: list = []
    host = ProcessHost(messages.append)
    try:
        host.submit(RunCommand(1, make_request(tiny_family, max_tokens=100_000), False, None))
        deadline = time.monotonic() + 120
        while not any(isinstance(m, EventBatch) for m in messages):
            assert time.monotonic() < deadline, "the engine sent no events"
            time.sleep(0.05)
        pid = host.pid
        os.kill(pid, signal.SIGKILL)
        assert os.waitpid(pid, 0)[0] == pid  # this thread takes the exit status
        taken.set()
        while not any(isinstance(m, RunEnded) for m in messages):
            assert time.monotonic() < deadline, "the run was never ended"
            time.sleep(0.05)
    finally:
        host.close()
    (ended,) = [m for m in messages if isinstance(m, RunEnded)]
    assert ended.run_id == 1
    assert ended.error.startswith("the engine process ended unexpectedly (exit code unknown)")


def test_a_run_that_raises_keeps_what_it_streamed(tiny_family, tmp_path, monkeypatch):
    real = compare.run_strategy

    def breaks(name, *args, **kwargs):
        for i, event in enumerate(real(name, *args, **kwargs)):
            if name == "draft" and i == 5:
                raise MemoryError("out of memory in the verify pass")
            yield event

    monkeypatch.setattr(compare, "run_strategy", breaks)
    ended = []
    host = ThreadHost(lambda m: ended.append(m) if isinstance(m, RunEnded) else None)
    request = make_request(tiny_family, max_tokens=16)
    host.submit(RunCommand(1, request, True, str(tmp_path)))
    for _ in range(2400):
        if ended:
            break
        time.sleep(0.05)
    host.close()
    (message,) = ended
    assert message.error == "MemoryError: out of memory in the verify pass"
    session = load_session(message.saved)
    assert session.partial and len(session.traces["plain"].tokens) == 16
    assert session.traces["draft"].done is None and len(session.traces["draft"].rounds) == 4


@run_async
async def test_a_save_that_misses_the_sessions_folder_is_said(tiny_family, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    app = live_app(make_request(tiny_family), sessions_dir=blocker)
    async with app.run_test(size=(180, 40)) as pilot:
        await settle(app, pilot)
        assert app.phase == "measured"
        (line,) = app.save_problems
        assert line.startswith(f"cannot save in {blocker} (") and "instead" in line
        assert line in status(app)
    saved = line.split("saved to ")[1].split(" instead")[0]
    assert load_session(saved).strategies == ["plain", "draft"]

