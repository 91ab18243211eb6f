"""A failed save never loses a run, and two runs never overwrite each other's session.

Real failures, not mocks: a full file system (a 64 KiB tmpfs, where the test may mount
one), a file-size limit (``RLIMIT_FSIZE`` in a child process), a read-only folder, a
sessions path that is a file, ``--json`` naming a directory; four processes saving the
same run in the same second; a save killed with SIGKILL half-way.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from helpers.sessions import document, plain_trace
from specdeck.engines.core.atomic_files import STALE_SECONDS, remove_stale_temporaries, write_new
from specdeck.cli import main
from specdeck.commands.exit_status import EXIT_NOT_SAVED
from specdeck.commands.options import write_results
from specdeck.sessions.session import load_session
from specdeck.sessions.store import SaveFailed, fallback_dirs, save_session

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


def big_document(tokens: int = 4000) -> dict:
    """A run whose file is ~300 kB: more than the small file systems below hold."""
    doc = document({"plain": plain_trace("plain", list(range(tokens)))})
    doc["created"] = "2026-11-29T10:17:11+00:00"
    return doc


def state_sessions() -> Path:
    return fallback_dirs()[0]  # under $XDG_STATE_HOME, which conftest.py points at tmp


def mounted(path: Path, options: str) -> bool:
    """Mount a tmpfs at ``path`` (root only, where mounting is allowed)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    path.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True).returncode == 0


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB file system."""
    path = tmp_path / "full"
    if not mounted(path, "size=64k"):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield path
    subprocess.run(["umount", str(path)], check=False)


@pytest.fixture
def read_only(tmp_path):
    """A folder no save can write to: a read-only tmpfs as root (root ignores
    permissions), a folder without write permission otherwise."""
    path = tmp_path / "read-only"
    if mounted(path, "ro,size=64k"):
        yield path
        subprocess.run(["umount", str(path)], check=False)
        return
    path.mkdir()
    path.chmod(0o555)
    try:
        (path / "probe").write_text("x")
    except OSError:
        yield path
    else:
        pytest.skip("cannot make a read-only folder here")
    finally:
        path.chmod(0o755)


def only_whole_sessions(directory: Path) -> list[Path]:
    """The files in ``directory``: sessions that load, no temporary left behind."""
    files = sorted(directory.iterdir())
    for path in files:
        assert not path.name.startswith("."), f"left behind: {path.name}"
        load_session(path)
    return files


def test_a_full_disk_keeps_the_run_in_the_state_folder(full_disk) -> None:
    doc = big_document()
    outcome = save_session(doc, full_disk)
    assert outcome.path.parent == state_sessions()
    assert "No space left on device" in outcome.problem and str(full_disk) in outcome.problem
    assert load_session(outcome.path).traces["plain"].tokens == list(range(4000))
    assert only_whole_sessions(full_disk) == []  # nothing half-written, no temporary


def test_a_read_only_folder_and_a_file_in_the_way_fall_back(read_only, tmp_path) -> None:
    doc = big_document(10)
    for where in (read_only, read_only / "sub", tmp_path / "file.json" / "sessions"):
        (tmp_path / "file.json").write_text("x")
        outcome = save_session(doc, where)
        assert outcome.path.parent == state_sessions() and outcome.problem
        assert str(where) in outcome.problem
    file = tmp_path / "file.json"
    outcome = save_session(doc, file)  # the sessions path is a file
    assert "cannot save in" in outcome.problem and outcome.path.parent == state_sessions()
    assert file.read_text() == "x"


def test_when_no_place_takes_it_every_place_is_named(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    monkeypatch.setattr("specdeck.sessions.store.tempfile.gettempdir", lambda: str(blocker))
    with pytest.raises(SaveFailed) as failed:
        save_session(big_document(10), blocker)
    message = str(failed.value)
    assert message.count(str(blocker)) == 3 and "\n" not in message


def _compare_args(family, *extra: str) -> list[str]:
    return ["compare", "--headless", "--target", str(family["llama_target"]),
            "--draft", str(family["llama_draft"]), "--strategies", "plain,draft",
            "--prompt", "def add(a, b):", "--max-tokens", "12", "--warmup-tokens", "0",
            *extra]


def test_compare_prints_its_summary_and_names_the_fallback(tiny_family, read_only, tmp_path,
                                                           capsys) -> None:
    out = tmp_path / "out.json"
    code = main(_compare_args(tiny_family, "--sessions-dir", str(read_only), "--json",
                              str(out)))
    captured = capsys.readouterr()
    assert code == EXIT_NOT_SAVED, captured.err
    assert "plain: 12 tokens" in captured.out and "draft: 12 tokens" in captured.out
    assert "Traceback" not in captured.err
    assert orjson.loads(out.read_bytes())["kind"] == "compare"  # --json, independently
    (line,) = [x for x in captured.err.splitlines() if "instead" in x]
    saved = Path(line.split("saved it to ")[1].split(" instead")[0])
    assert line.startswith(f"specdeck: error: cannot save in {read_only}")
    assert saved.parent == state_sessions() and load_session(saved).strategies == [
        "plain", "draft"]


def test_json_naming_a_directory(tiny_family, tmp_path, capsys) -> None:
    code = main(_compare_args(tiny_family, "--json", str(tmp_path)))
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == (
        f"specdeck: error: --json {tmp_path} is a directory: name a file to write")
    # A directory that appears during the run: the session is still saved.
    said: list[str] = []
    sessions = tmp_path / "sessions"
    assert not write_results(big_document(10), tmp_path, True, sessions, said.append)
    assert said[0].startswith(f"error: cannot write --json {tmp_path} (")
    assert said[1].startswith(f"saved {sessions}")
    assert len(only_whole_sessions(sessions)) == 1


FSIZE_CHILD = """
import resource, signal, sys
sys.path.insert(0, sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
from specdeck.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_file_size_limit_prints_the_summary_and_says_nothing_was_saved(
        tiny_family, tmp_path) -> None:
    """``ulimit -f 16``: no place can take the session or --json; the run's summary still
    prints, each failure is one line, and the exit status says it."""
    args = _compare_args(tiny_family, "--sessions-dir", str(tmp_path / "s"), "--json",
                         str(tmp_path / "out.json"))
    args[args.index("--max-tokens") + 1] = "200"
    (tmp_path / "tmp").mkdir()
    result = subprocess.run(
        [sys.executable, "-c", FSIZE_CHILD, str(TESTS), *args, "--ignore-eos"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "SPECDECK_NO_OPENBLAS": "1", "TMPDIR": str(tmp_path / "tmp")},
    )
    assert result.returncode == EXIT_NOT_SAVED, result.stderr
    assert "plain: 200 tokens" in result.stdout and "Traceback" not in result.stderr
    errors = [x for x in result.stderr.splitlines() if x.startswith("specdeck: error:")]
    assert len(errors) == 2, result.stderr
    assert "cannot write --json" in errors[0] and "File too large" in errors[0]
    assert "the session was not saved" in errors[1] and "nor in" in errors[1]
    assert not list(tmp_path.rglob(".*.tmp"))


def _save_at_once(barrier, directory: str, queue) -> None:
    barrier.wait()
    queue.put(str(save_session(big_document(50), Path(directory)).path))


def test_four_processes_saving_in_the_same_second_make_four_files(tmp_path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, queue = context.Barrier(4), context.Queue()
    workers = [context.Process(target=_save_at_once, args=(barrier, str(tmp_path), queue))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    paths = sorted(queue.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    assert len(set(paths)) == 4
    assert [p.name for p in only_whole_sessions(tmp_path)] == [
        "20261129-101711_plain-2.json", "20261129-101711_plain-3.json",
        "20261129-101711_plain-4.json", "20261129-101711_plain.json",
    ]


def test_without_hard_links_names_are_still_claimed_exclusively(tmp_path, monkeypatch) -> None:
    def no_links(src, dst):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    names = ["a.json", "a-2.json", "a-3.json"]
    (tmp_path / "a.json").write_bytes(b"first")
    assert write_new(tmp_path, iter(names), b"second") == tmp_path / "a-2.json"
    assert (tmp_path / "a.json").read_bytes() == b"first"
    assert (tmp_path / "a-2.json").read_bytes() == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-2.json", "a.json"]


SLOW_SAVER = """
import os, sys, time
sys.path.insert(0, sys.argv[2])
from helpers.sessions import document, plain_trace
from specdeck.sessions.store import save_session
real = os.fsync
def slow(fd):
    print("saving", flush=True)
    time.sleep(60)
os.fsync = slow
save_session(document({"plain": plain_trace("plain", list(range(500)))}), sys.argv[1])
"""


def test_a_save_killed_half_way_leaves_no_temporary_behind_for_long(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SLOW_SAVER, str(tmp_path), str(TESTS)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "saving"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (killed,) = tmp_path.glob(".*.tmp")  # what SIGKILL left
    # Another process's save in progress, with its own (live) process id.
    live = tmp_path / f".run.json.{os.getpid()}-abcdefgh.specdeck.tmp"
    live.write_bytes(b"{")
    save_session(big_document(10), tmp_path)  # too recent to be called stale yet
    assert killed.exists() and live.exists()
    old = time.time() - STALE_SECONDS - 1
    for path in (killed, live):
        os.utime(path, (old, old))
    save_session(big_document(10), tmp_path)
    assert not killed.exists() and live.exists()  # the dead writer's only
    os.utime(live, (time.time() - 2 * 86400,) * 2)
    assert remove_stale_temporaries(tmp_path) == [live]  # abandoned whoever wrote it
    (tmp_path / ".other.tmp").write_bytes(b"")  # not ours: never touched
    remove_stale_temporaries(tmp_path, now=time.time() + 10 * 86400)
    assert (tmp_path / ".other.tmp").exists()

