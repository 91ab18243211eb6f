"""Signals and child processes: SIGTERM and SIGHUP stop compare and sweep as the first
Ctrl+C does (what ran saved, said, the shell's status for the signal); the group launch
refuses what would hang or trace back, makes the launcher's status the command's, shows
its output inert, passes signals to the whole group and, on Linux, takes the launcher
down when specdeck dies; a run cancelled after its engine died says nothing was saved."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import mlx.core as mx
import pytest

import specdeck.hosts.launch as launch
from helpers.app import SIZE, live_app, make_request
from specdeck.cli import main
from specdeck.engines.core.requests import GroupSpec
from specdeck.hosts import engine
from specdeck.hosts.engine import RunEnded
from specdeck.testing.pilot import run_async, until
from specdeck.tui.messages import FromEngine

ROOT = Path(__file__).resolve().parent.parent


def started(args: list[str], tmp_path: Path, **env: str) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "err.txt"
    process = subprocess.Popen(
        [sys.executable, "-m", "specdeck", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=err.open("wb"), stdin=subprocess.DEVNULL,
        env={**os.environ, "SPECDECK_NO_OPENBLAS": "1",
             "SPECDECK_SESSIONS_DIR": str(tmp_path / "sessions"), **env})
    return process, err


def wait_for(err: Path, text: str, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while text not in err.read_text(errors="replace"):
        assert process.poll() is None, err.read_text()
        assert time.monotonic() < deadline, err.read_text()
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopping_signal_saves_what_ran_and_exits_with_its_status(tiny_family, tmp_path,
                                                                    signum) -> None:
    process, err = started(["compare", "--headless", "--target",
                            str(tiny_family["llama_target"]), "--strategies", "plain",
                            "--prompt", "x", "--ignore-eos", "--max-tokens", "100000",
                            "--warmup-tokens", "0", "--quiet"], tmp_path)
    wait_for(err, "running plain", process)
    process.send_signal(signum)
    assert process.wait(timeout=60) == 128 + signum
    said = err.read_text()
    assert "stopping after this round and saving what ran" in said
    (partial,) = (tmp_path / "sessions").glob("*_partial.json")
    assert f"saved {partial} (partial)" in said and "Traceback" not in said


@pytest.mark.skipif(shutil.which("g++") is None or mx.default_device().type != mx.DeviceType.cpu,
                    reason="mlx asks for g++ only to fuse operations on the CPU")
def test_mlx_asks_for_its_compiler_while_loading_not_mid_run(tiny_family, tmp_path) -> None:
    """glibc's system() ignores Ctrl+C while it runs, and mlx calls it once a process
    (``g++ --version``) the first time it fuses operations on the CPU: a Ctrl+C sent in a
    run's first step was lost. A g++ slow to answer, noting when it was asked, shows that
    the question comes before the run."""
    asked = tmp_path / "asked"
    fake = tmp_path / "bin" / "g++"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nsleep 0.5\necho "$*" >> {shlex.quote(str(asked))}\n'
                    f'exec {shlex.quote(shutil.which("g++"))} "$@"\n')
    fake.chmod(0o755)
    process, err = started(["compare", "--headless", "--target",
                            str(tiny_family["llama_target"]), "--strategies", "plain",
                            "--prompt", "x", "--ignore-eos", "--max-tokens", "100000",
                            "--warmup-tokens", "0", "--quiet"], tmp_path,
                           PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    try:
        wait_for(err, "running plain", process)
        assert asked.exists() and "--version" in asked.read_text(), err.read_text()
    finally:
        process.kill()
        process.wait()


def test_a_sweep_stopped_by_sigterm_keeps_what_finished(tiny_family, tmp_path) -> None:
    out = tmp_path / "sweep.json"
    process, err = started(["sweep", "--target", str(tiny_family["llama_target"]),
                            "--strategies", "ngram", "-k", "1,2,3", "--reps", "1",
                            "--warmup", "0", "--max-tokens", "300", "--prompt", "code",
                            "--prompt", "prose", "--json", str(out)], tmp_path)
    wait_for(err, "prose:", process, seconds=120)  # the code group is finished
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 128 + signal.SIGTERM
    assert out.is_file() and "interrupted: keeping the" in err.read_text()


# Two quick Ctrl+C: the first's handling runs under a tracer that sends the second at its
# line 1, then (afresh) at its line 2, ...; each must end in KeyboardInterrupt. It prints
# one more than the lines the handling ran.
SIGNAL_DURING_SIGNAL = """
import os, signal, sys, time
from specdeck.hosts.stopping import Stopping

handler, at, seen, inside = Stopping._on_signal.__code__, 0, 0, False

def trace(frame, event, arg):
    global seen, inside
    if frame.f_code is handler and event in ("call", "return"):
        inside = event == "call"
    elif inside and event == "line":
        seen += 1
        if seen == at:
            os.kill(os.getpid(), signal.SIGINT)
    return trace if inside else None

while seen >= at:
    at, seen = at + 1, 0
    with Stopping("interrupt"):
        sys.settrace(trace)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                pass
            sys.exit(f"no KeyboardInterrupt at line {at}")
        except KeyboardInterrupt:
            sys.settrace(None)
print(at)
"""


def test_a_signal_during_the_handling_of_another_quits_at_once() -> None:
    """Two quick Ctrl+C in a sweep once hung for good: the second landed while the
    first's handler held a lock that handling the second took again."""
    done = subprocess.run([sys.executable, "-c", SIGNAL_DURING_SIGNAL], capture_output=True,
                          text=True, timeout=20)
    assert done.returncode == 0 and int(done.stdout) > 5, done.stderr


# --- the group launch -------------------------------------------------------------------


def fake_launcher(monkeypatch, tmp_path: Path, body: str) -> None:
    """mlx.launch replaced by a script (its own command line ignored)."""
    script = tmp_path / "fake_launch.py"
    script.write_text(textwrap.dedent(body))
    monkeypatch.setattr(launch, "mlx_launch", lambda: [sys.executable, str(script)])


def test_the_launcher_s_failure_is_the_command_s_and_its_output_is_inert(
        monkeypatch, tmp_path, capfd) -> None:
    fake_launcher(monkeypatch, tmp_path, """
        import sys
        sys.stderr.write("\\x1b[33m[WARN] no such backend\\x1b[0m \\x1b]0;title\\x07\\n")
        sys.exit(3)
    """)
    assert launch.relaunch(GroupSpec(ranks=2), ["compare"]) == 3
    err = capfd.readouterr().err
    assert "[WARN] no such backend ␛]0;title␇" in err and "\x1b" not in err
    assert "mlx.launch ended with status 3" in err


def test_a_signal_reaches_the_whole_group_and_is_the_status(monkeypatch, tmp_path) -> None:
    marker = tmp_path / "rank.txt"
    rank = tmp_path / "rank.py"  # a rank, as mlx.launch starts one: it notes its signal
    rank.write_text(textwrap.dedent(f"""
        import signal, sys, time
        def ended(signum, frame):
            open({str(marker)!r}, "a").write("TERM")
            sys.exit(0)
        signal.signal(signal.SIGTERM, ended)
        open({str(marker)!r}, "a").write("up ")
        time.sleep(60)
    """))
    fake_launcher(monkeypatch, tmp_path, f"""
        import subprocess, sys
        subprocess.run([sys.executable, {str(rank)!r}])
    """)
    monkeypatch.setattr(launch, "free_port_run", lambda count: 40000)

    def stop_when_up() -> None:
        deadline = time.monotonic() + 30
        while "up" not in (marker.read_text() if marker.exists() else ""):
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_when_up, daemon=True).start()
    assert launch.relaunch(GroupSpec(ranks=2), ["compare"]) == 128 + signal.SIGTERM
    assert marker.read_text() == "up TERM"


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_the_launcher_dies_with_specdeck(tmp_path) -> None:
    pid_file = tmp_path / "launcher.pid"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        import specdeck.hosts.launch as launch
        from specdeck.engines.core.requests import GroupSpec
        launch.mlx_launch = lambda: [sys.executable, "-c",
            "import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"]
        launch.free_port_run = lambda count: 40000
        launch.relaunch(GroupSpec(ranks=2), ["compare"])
    """)], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    child = int(pid_file.read_text())
    parent.kill()  # SIGKILL: nothing of specdeck runs after it
    parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and "Z" not in _state(child):
        assert time.monotonic() < deadline, "mlx.launch outlived specdeck"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "Z"


@pytest.mark.parametrize(("args", "needle"), [
    (["-n", "100000"], "a group has from 1 to 256 processes (got 100000)"),
    (["--hostfile", "FIFO"], "is a FIFO (named pipe), not a regular file"),
    (["--hostfile", "BAD"], "--hostfile"),
])
def test_what_would_hang_or_trace_back_is_one_line(tmp_path, capsys, args, needle) -> None:
    os.mkfifo(tmp_path / "FIFO")
    (tmp_path / "BAD").write_text("{not json")
    args = [str(tmp_path / a) if a in ("FIFO", "BAD") else a for a in args]
    started_at = time.monotonic()
    code = main(["compare", "--headless", "--shard", "tensor", "--strategies", "plain",
                 "--prompt", "x", "--no-save", *args])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - started_at < 10


# --- the app's engine -------------------------------------------------------------------


def test_cancelling_after_the_engine_died_says_nothing_was_saved(tiny_family, tmp_path,
                                                                 monkeypatch) -> None:
    gate = threading.Event()
    # The engine takes the run and says nothing (it is loading, then it dies).
    monkeypatch.setattr(engine, "serve_run", lambda *args: gate.wait(timeout=60))

    @run_async
    async def run() -> None:
        app = live_app(make_request(tiny_family), sessions_dir=tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.phase.streaming and app.run_id > 0)
            await pilot.press("c")
            cancelled = app._cancelled_run
            assert cancelled and "saving what was measured" in app.status_text
            app.post_message(FromEngine(RunEnded(
                cancelled, "the engine process ended unexpectedly (exit code -9)")))
            await until(pilot, lambda: "nothing was saved" in app.status_text)
            assert "exit code -9" in app.status_text and "saving" not in app.status_text
            gate.set()

    run()
