"""Where a live comparison runs: in a child process, so drawing it cannot slow it down.

Decoding small models is bound by Python's per-operation overhead, and Python threads
share one interpreter lock: every millisecond the app spends rendering in its own
thread is a millisecond the measured run waits (``bench/ui_overhead.py`` measured
0.81x the headless speed at 30 repaints a second). So the app hands runs to an engine
process that keeps its models loaded between runs and streams batched events back
through a pipe (the app's process loads no weights). Tests that inject a clock or a
model store run the same loop in a thread instead (``ThreadHost``).

Both hosts take commands in order (a cancelled run finishes its round before the next
starts) and hand every message to ``deliver``, from a thread of their own.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from specdeck.engines.errors import ModelError, SettingsError
from specdeck.engines.events import Event
from specdeck.batcher import Batch, EventBatcher

if TYPE_CHECKING:
    from specdeck.engines.compare import CompareRequest, CompareResult
    from specdeck.engines.loading import ModelStore


# -- messages from the engine ------------------------------------------------------------


@dataclass(frozen=True)
class EventBatch:
    """(strategy, event) pairs of one run, in the order they happened."""

    run_id: int
    batch: Batch


@dataclass(frozen=True)
class Progress:
    """A line about loading or warming up."""

    run_id: int
    text: str


@dataclass(frozen=True)
class Estimates:
    """Each strategy's estimated peak bytes, before any of them runs."""

    run_id: int
    totals: dict[str, int]


@dataclass(frozen=True)
class TargetLoaded:
    """The target's folder, once loaded: the app decodes alternatives with its tokenizer."""

    run_id: int
    path: str


@dataclass(frozen=True)
class RunEnded:
    """The run finished, was cancelled, or failed with ``error`` (one line); ``saved`` is
    where its session was written, if it was."""

    run_id: int
    error: str | None = None
    saved: str | None = None


EngineMessage = EventBatch | Progress | Estimates | TargetLoaded | RunEnded


@dataclass(frozen=True)
class RunCommand:
    """Measure ``request``; save the result as a session into ``sessions_dir`` unless
    ``save`` is false (None: the default sessions folder)."""

    run_id: int
    request: "CompareRequest"
    save: bool = True
    sessions_dir: str | None = None


# -- the loop both hosts run -------------------------------------------------------------


def serve_run(command: RunCommand, store: "ModelStore", send: Callable[[EngineMessage], None],
              cancelled: Callable[[], bool], clock: Callable[[], float]) -> None:
    """Run one comparison, sending its events in batches and a ``RunEnded`` last."""
    from specdeck.engines.compare import run_compare

    run_id, request = command.run_id, command.request
    batcher = EventBatcher(lambda batch: send(EventBatch(run_id, batch)))
    announced = False

    def on_event(name: str, event: Event) -> None:
        nonlocal announced
        if not announced:  # the first event: the target is loaded
            announced = True
            send(TargetLoaded(run_id, str(
                store.get(request.target, request.revision, request.dtype).path)))
        batcher.add(name, event)

    error = saved = None
    try:
        result = run_compare(
            request, store, on_event=on_event,
            progress=lambda text: send(Progress(run_id, text)),
            on_estimates=lambda estimates: send(Estimates(run_id, {
                name: e.total for name, e in (estimates or {}).items()})),
            cancelled=cancelled, clock=clock,
        )
        if command.save and result.traces:
            saved = str(_save(result, command.sessions_dir))
    except (SettingsError, ModelError) as exc:
        error = str(exc)
    except Exception as exc:  # shown in the app, which stays usable
        error = f"{type(exc).__name__}: {exc}"
    batcher.flush()
    send(RunEnded(run_id, error, saved))


def _save(result: "CompareResult", sessions_dir: str | None) -> Path:
    """Save a measured (or cancelled: partial) run, as ``specdeck compare`` does."""
    from specdeck.engines.machine import describe_machine
    from specdeck.session import build_document, compare_config
    from specdeck.session_store import autosave

    document = build_document(compare_config(result), describe_machine(), result.traces)
    return autosave(document, Path(sessions_dir) if sessions_dir else None)


def serve(receive: Callable[[], RunCommand | None], send: Callable[[EngineMessage], None],
          cancelled_through: Callable[[], int], store: "ModelStore",
          clock: Callable[[], float]) -> None:
    """Run commands until ``receive`` gives None; a run is cancelled once
    ``cancelled_through()`` reaches its id."""
    while (command := receive()) is not None:
        if cancelled_through() >= command.run_id:
            send(RunEnded(command.run_id))
            continue
        serve_run(command, store, send,
                  lambda run_id=command.run_id: cancelled_through() >= run_id, clock)


# -- hosts -------------------------------------------------------------------------------


class ThreadHost:
    """Runs in a thread of this process, with the caller's model store and clock (tests
    gate the clock to hold a run mid-way)."""

    def __init__(self, deliver: Callable[[EngineMessage], None],
                 store: "ModelStore | None" = None,
                 clock: Callable[[], float] | None = None) -> None:
        self._deliver = deliver
        self._store = store
        self._clock = clock
        self._commands: queue.SimpleQueue[RunCommand | None] = queue.SimpleQueue()
        self._cancelled_through = 0
        self._thread: threading.Thread | None = None

    def submit(self, command: RunCommand) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="specdeck-engine",
                                            daemon=True)
            self._thread.start()
        self._commands.put(command)

    def _serve(self) -> None:
        import time

        from specdeck.engines.loading import ModelStore

        store = self._store if self._store is not None else ModelStore()
        serve(self._commands.get, self._deliver, lambda: self._cancelled_through, store,
              self._clock or time.perf_counter)

    def cancel(self, run_id: int) -> None:
        """Stop run ``run_id`` and any before it at their next round."""
        self._cancelled_through = max(self._cancelled_through, run_id)

    def close(self) -> None:
        if self._thread is not None:
            self._commands.put(None)


class ProcessHost:
    """Runs in a child process started on the first run (``spawn``: the app's threads
    are not forked). A child that dies ends its run with an error naming its exit code
    and the last line it wrote to stderr."""

    def __init__(self, deliver: Callable[[EngineMessage], None]) -> None:
        self._deliver = deliver
        self._context = multiprocessing.get_context("spawn")
        self._cancelled_through = self._context.RawValue("q", 0)
        self._process: Any = None
        self._connection: Any = None
        self._last_submitted = 0
        self._lock = threading.Lock()
        self._log = Path(tempfile.gettempdir()) / f"specdeck-engine-{os.getpid()}-{id(self):x}.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def submit(self, command: RunCommand) -> None:
        try:
            with self._lock:
                if self._process is None or not self._process.is_alive():
                    self._start()
                self._last_submitted = command.run_id
                self._connection.send(command)
        except (OSError, ValueError) as exc:
            self._deliver(RunEnded(command.run_id, f"could not start the engine process: {exc}"))

    def _start(self) -> None:
        ours, theirs = self._context.Pipe()
        self._process = self._context.Process(
            target=_child_main, args=(theirs, self._cancelled_through, str(self._log)),
            name="specdeck-engine", daemon=True,
        )
        # multiprocessing hands its helper process sys.stderr's file descriptor; the app
        # may have swapped in a stream without one while it owns the terminal.
        swapped = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        try:
            self._process.start()
        finally:
            sys.stdout, sys.stderr = swapped
        theirs.close()
        self._connection = ours
        threading.Thread(target=self._read, args=(ours, self._process), daemon=True,
                         name="specdeck-engine-reader").start()

    def _read(self, connection: Any, process: Any) -> None:
        """Hand every message on; when the child goes away, end the latest run handed to
        it unless it ended (runs are served in order; earlier ones are stale)."""
        last_ended = 0
        while True:
            try:
                message = connection.recv()
            except (EOFError, OSError):
                break
            if isinstance(message, RunEnded):
                last_ended = message.run_id
            self._deliver(message)
        process.join(timeout=5)
        with self._lock:
            unfinished = self._last_submitted if self._last_submitted > last_ended else None
        if unfinished is not None and process.exitcode not in (0, None):
            why = f"the engine process ended unexpectedly (exit code {process.exitcode})"
            last = _last_line(self._log)
            self._deliver(RunEnded(unfinished, why + (f": {last}" if last else "")))

    def cancel(self, run_id: int) -> None:
        """Stop run ``run_id`` and any before it at their next round."""
        value = self._cancelled_through
        value.value = max(value.value, run_id)

    def close(self) -> None:
        """Ask the child to stop; kill it if it does not within two seconds."""
        with self._lock:
            process, connection = self._process, self._connection
            self._process = None
        if process is None:
            return
        self.cancel(self._last_submitted)
        try:
            connection.send(None)
        except (OSError, ValueError):
            pass
        process.join(timeout=2)
        if process.is_alive():
            process.kill()
            process.join(timeout=2)
        self._log.unlink(missing_ok=True)


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _child_main(connection: Any, cancelled_through: Any, log: str) -> None:
    """The engine process: its output goes to ``log`` (the terminal belongs to the app)."""
    import time

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from specdeck.engines.loading import ModelStore

    def receive() -> RunCommand | None:
        try:
            return connection.recv()
        except EOFError:  # the app went away
            return None

    serve(receive, connection.send, lambda: cancelled_through.value, ModelStore(),
          time.perf_counter)
