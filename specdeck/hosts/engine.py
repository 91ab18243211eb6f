"""Where a live comparison runs: in a child process, so drawing it cannot slow it down.

Decoding small models is bound by Python's per-operation overhead, and Python threads
share one interpreter lock: every millisecond the app spends rendering in its own
thread is a millisecond the measured run waits (``bench/ui_overhead.py``: a run in a
thread of the app, repainting 30 times a second, went at 0.78-0.84x of the headless speed;
the README has the figures). So the app hands runs to an engine
process that keeps its models loaded between runs and streams batched events back
through a pipe (the app's process loads no weights). Tests that inject a clock or a
model store run the same loop in a thread instead (``ThreadHost``).

Both hosts take commands in order (a cancelled run finishes its round before the next
starts) and hand every message to ``deliver``, from a thread of their own. What a run
streamed is never lost: when it ends in an error before the engine saved it (the engine
process died, or the run raised), ``PartialKeeper`` saves the events that arrived as a
partial session. The engine process sends a heartbeat; a process that stops answering
mid-run (SIGSTOP, a hang) is reported while it is silent (``EngineSilent``); while a run
loads, only a process the OS says is stopped.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import queue
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from specdeck.engines.core.errors import ModelError, SettingsError
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.core.events import Event, Trace
from specdeck.hosts.batcher import Batch, EventBatcher

if TYPE_CHECKING:  # loading imports mlx; only the engine (process or thread) loads it
    from specdeck.engines.models.loading import ModelStore


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
class NotRun:
    """Strategies of the run its models cannot run, and why (the others run), said
    before any weights load."""

    run_id: int
    reasons: dict[str, str]


@dataclass(frozen=True)
class Estimates:
    """Each strategy's estimated peak bytes, before any of them runs."""

    run_id: int
    totals: dict[str, int]


@dataclass(frozen=True)
class TargetLoaded:
    """The target's folder, once loaded: the app decodes alternatives with its tokenizer.
    ``machine`` describes where the run is measured (for a partial session, should the
    engine die)."""

    run_id: int
    path: str
    machine: dict | None = None


@dataclass(frozen=True)
class RunEnded:
    """The run finished, was cancelled, or failed with ``error`` (one line); ``saved`` is
    where its session was written, if it was; ``save_problem`` why that is not the
    sessions folder (a fallback place took it) or, without ``saved``, why it was not
    saved at all. ``measured``: the tok/s of every timed run of each strategy timed more
    than once; ``kept``: with repeats, the events of each strategy's median run (the
    panes streamed the first)."""

    run_id: int
    error: str | None = None
    saved: str | None = None
    save_problem: str | None = None
    measured: dict[str, list[float]] = field(default_factory=dict)
    kept: dict[str, list[Event]] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineSilent:
    """The engine process has sent nothing, not even its heartbeat, for ``seconds``
    while run ``run_id`` was in flight; ``seconds`` None: it answers again. ``why`` says
    what its state is, where the OS tells (stopped by a signal)."""

    run_id: int
    seconds: float | None
    pid: int | None = None
    why: str = ""


@dataclass(frozen=True)
class Heartbeat:
    """The engine process is alive (sent every ``HEARTBEAT_SECONDS``; never delivered)."""


EngineMessage = (EventBatch | Progress | NotRun | Estimates | TargetLoaded | RunEnded
                 | EngineSilent)

#: How often the engine process says it is alive, and how long it may be silent mid-run
#: before the app is told (a long step that holds the interpreter lock may delay a beat).
HEARTBEAT_SECONDS = 1.0
SILENT_AFTER_SECONDS = 5.0


@dataclass(frozen=True)
class RunCommand:
    """Measure ``request``; save the result as a session into ``sessions_dir`` unless
    ``save`` is false (None: the default sessions folder)."""

    run_id: int
    request: CompareRequest
    save: bool = True
    sessions_dir: str | None = None


# -- the loop both hosts run -------------------------------------------------------------


def serve_run(command: RunCommand, store: "ModelStore", send: Callable[[EngineMessage], None],
              cancelled: Callable[[], bool], clock: Callable[[], float],
              compare: Callable[..., Any] | None = None) -> None:
    """Run one comparison, sending its events in batches and a ``RunEnded`` last.

    ``compare`` runs it (default ``engines.compare.run_compare``; a group's rank passes
    its own, whose result says in ``group["lost"]`` why a lost group ended it early).
    """
    from specdeck.engines.runs.compare import run_compare
    from specdeck.engines.measure.machine import describe_machine
    from specdeck.sessions.session import result_document

    run_id, request = command.run_id, command.request
    batcher = EventBatcher(lambda batch: send(EventBatch(run_id, batch)))
    machine = describe_machine()  # before the run: nothing measured waits on it
    error = saved = save_problem = None
    measured: dict[str, list[float]] = {}
    kept: dict[str, list[Event]] = {}
    try:
        result = (compare or run_compare)(
            request, store, on_event=batcher.add,
            progress=lambda text: send(Progress(run_id, text)),
            on_estimates=lambda estimates: send(Estimates(run_id, {
                name: e.total for name, e in (estimates or {}).items()})),
            on_loaded=lambda models: send(
                TargetLoaded(run_id, str(models.target.path), machine)),
            on_not_run=lambda reasons: send(NotRun(run_id, reasons)),
            cancelled=cancelled, clock=clock,
        )
        measured = {name: runs for name, runs in result.measured.items() if len(runs) > 1}
        if request.repeats > 1:
            kept = {name: trace.events for name, trace in result.traces.items()}
        if command.save and result.traces:
            saved, save_problem = save_where_possible(
                result_document(result, machine), command.sessions_dir)
        error = (result.group or {}).get("lost")
    except (SettingsError, ModelError) as exc:
        error = str(exc)
    except Exception as exc:  # shown in the app, which stays usable
        error = f"{type(exc).__name__}: {exc}"
    batcher.flush()
    send(RunEnded(run_id, error, saved, save_problem, measured, kept))


def save_where_possible(document: dict, sessions_dir: str | None) -> tuple[str | None,
                                                                            str | None]:
    """``session_store.save_session``, as (where it was saved, the problem if any)."""
    from specdeck.sessions.store import SaveFailed, save_session

    try:
        outcome = save_session(document, Path(sessions_dir) if sessions_dir else None)
    except SaveFailed as exc:
        return None, f"the session was not saved: {exc}"
    return str(outcome.path), outcome.problem


class PartialKeeper:
    """Hands the engine's messages on, keeping the events of each run in flight; when a
    run ends in an error without a saved session (the engine process died, or the run
    raised), it saves what arrived as a partial session and says where in ``RunEnded``."""

    def __init__(self, deliver: Callable[[EngineMessage], None]) -> None:
        self._deliver = deliver
        self._runs: dict[int, tuple[RunCommand, dict[str, list[Event]], dict]] = {}
        self._lock = threading.Lock()

    def submitted(self, command: RunCommand) -> None:
        with self._lock:
            self._runs[command.run_id] = (command, {}, {})

    def __call__(self, message: EngineMessage) -> None:
        with self._lock:
            run = self._runs.get(message.run_id)
            if run is not None and isinstance(message, EventBatch):
                for name, event in message.batch:
                    run[1].setdefault(name, []).append(event)
            elif run is not None and isinstance(message, TargetLoaded) and message.machine:
                run[2].update(message.machine)
            elif isinstance(message, RunEnded):
                self._runs.pop(message.run_id, None)
        if isinstance(message, RunEnded) and run is not None and message.error and (
            message.saved is None and message.save_problem is None
        ):
            message = self._keep(message, *run)
        self._deliver(message)

    @staticmethod
    def _keep(message: RunEnded, command: RunCommand, events: dict[str, list[Event]],
              machine: dict) -> RunEnded:
        from specdeck.sessions.session import build_document, request_config

        if not command.save or not any(events.values()):
            return message
        traces = {name: Trace(name, list(e)) for name, e in events.items()}
        document = build_document(request_config(command.request), machine, traces)
        document["partial"] = True
        saved, problem = save_where_possible(document, command.sessions_dir)
        return replace(message, saved=saved, save_problem=problem)


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


class Host(Protocol):
    """Where the app hands its runs: a thread, a process or a group of processes."""

    def submit(self, command: RunCommand) -> None: ...

    def cancel(self, run_id: int) -> None: ...

    def close(self) -> None: ...


#: Makes a host that hands every message to the function given (the app's ``post``).
HostFactory = Callable[[Callable[[EngineMessage], None]], Host]


class ThreadHost:
    """Runs in a thread of this process, with the caller's model store and clock (tests
    gate the clock to hold a run mid-way)."""

    def __init__(self, deliver: Callable[[EngineMessage], None],
                 store: "ModelStore | None" = None,
                 clock: Callable[[], float] | None = None) -> None:
        self._deliver = PartialKeeper(deliver)
        self._store = store
        self._clock = clock
        self._commands: queue.SimpleQueue[RunCommand | None] = queue.SimpleQueue()
        self._cancelled_through = self._last_submitted = 0
        self._thread: threading.Thread | None = None

    def submit(self, command: RunCommand) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="specdeck-engine",
                                            daemon=True)
            self._thread.start()
        self._last_submitted = command.run_id
        self._deliver.submitted(command)
        self._commands.put(command)

    def _serve(self) -> None:
        from specdeck.engines.models.loading import ModelStore

        store = self._store if self._store is not None else ModelStore()
        serve(self._commands.get, self._deliver, lambda: self._cancelled_through, store,
              self._clock or time.perf_counter)

    def cancel(self, run_id: int) -> None:
        """Stop run ``run_id`` and any before it at their next round."""
        self._cancelled_through = max(self._cancelled_through, run_id)

    def close(self) -> None:
        """Stop every run at its next round, then the thread (within two seconds, as the
        process host's child): none goes on computing for an app that is gone."""
        if self._thread is not None:
            self.cancel(self._last_submitted)
            self._commands.put(None)
            self._thread.join(timeout=2)


class ChildHost:
    """What the hosts whose engine is another process share: the process, started on
    the first run (and again after it died), the runs handed to it and ended by it, when
    it was last heard from, and the log its output goes to (the terminal belongs to the
    app). What a run streamed is kept (``PartialKeeper``)."""

    #: What the engine is, for the error when it cannot start, and its log's name.
    kind = "engine process"
    log_name = "engine"

    def __init__(self, deliver: Callable[[EngineMessage], None]) -> None:
        self._deliver = PartialKeeper(deliver)
        self._process: Any = None
        self._connection: Any = None
        self._last_submitted = self._last_ended = 0
        self._heard = time.monotonic()
        self._silent = False
        #: Whether the run in flight has streamed an event: before, it loads and warms
        #: up, where a busy machine can hold the heartbeat back for many seconds.
        self._streaming = False
        self._lock = threading.Lock()
        self._log = Path(tempfile.gettempdir()) / (
            f"specdeck-{self.log_name}-{os.getpid()}-{id(self):x}.log")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def submit(self, command: RunCommand) -> None:
        try:
            with self._lock:
                if not self._running():
                    self._start()
                if self._last_submitted <= self._last_ended:
                    self._heard = time.monotonic()  # silence counts from the new run on
                self._last_submitted = command.run_id
                self._streaming = False
                self._deliver.submitted(command)
                self._hand_over(command)
        except (OSError, ValueError) as exc:
            self._deliver(RunEnded(command.run_id, f"could not start the {self.kind}: {exc}"))

    def _relay(self, connection: Any, pid: int | None) -> int:
        """Hand every message from the engine on until it goes away (a heartbeat only
        says it is alive); the last run it ended (runs are served in order: one handed
        over later did not finish)."""
        while True:
            try:
                message = connection.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                self._heard = time.monotonic()
                was_silent, self._silent = self._silent, False
                if isinstance(message, RunEnded):
                    self._last_ended = max(self._last_ended, message.run_id)
                running = self._last_submitted
                if isinstance(message, EventBatch) and message.run_id == running:
                    self._streaming = True
            if was_silent:
                self._deliver(EngineSilent(running, None, pid))
            if not isinstance(message, Heartbeat):
                self._deliver(message)
        with self._lock:
            return self._last_ended

    def _running(self) -> bool:
        raise NotImplementedError

    def _start(self) -> None:
        raise NotImplementedError

    def _hand_over(self, command: RunCommand) -> None:
        raise NotImplementedError


class ProcessHost(ChildHost):
    """Runs in a child process started on the first run (``spawn``: the app's threads
    are not forked). A child that dies ends its run with an error naming its exit code
    and the last line it wrote to stderr. A child silent for ``silent_after`` seconds
    (default ``SILENT_AFTER_SECONDS``; no heartbeat) while a run is in flight is
    reported with ``EngineSilent``."""

    #: The group its engine splits the target over: none, one process.
    group = None

    def __init__(self, deliver: Callable[[EngineMessage], None],
                 silent_after: float | None = None) -> None:
        super().__init__(deliver)
        self._silent_after = silent_after or SILENT_AFTER_SECONDS
        self._context = multiprocessing.get_context("spawn")
        self._cancelled_through = self._context.RawValue("q", 0)

    def _running(self) -> bool:
        return self._process is not None and _alive(self._process)

    def _hand_over(self, command: RunCommand) -> None:
        self._connection.send(command)

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
        self._heard = time.monotonic()
        threading.Thread(target=self._read, args=(ours, self._process), daemon=True,
                         name="specdeck-engine-reader").start()
        threading.Thread(target=self._watch, args=(self._process,), daemon=True,
                         name="specdeck-engine-watchdog").start()

    def _read(self, connection: Any, process: Any) -> None:
        """Hand every message on; when the child goes away, end the latest run handed to
        it unless it ended (runs are served in order; earlier ones are stale). This thread
        alone reaps the child: were another to take its exit status first, the code would
        be unknown here, and the run is ended all the same."""
        last_ended = self._relay(connection, process.pid)
        process.join(timeout=5)
        with self._lock:
            unfinished = self._last_submitted if self._last_submitted > last_ended else None
        code = process.exitcode
        if unfinished is not None and code != 0:
            why = ("the engine process ended unexpectedly "
                   + (f"(exit code {code})" if code is not None else "(exit code unknown)"))
            last = last_line(self._log)
            self._deliver(RunEnded(unfinished, why + (f": {last}" if last else "")))

    def _watch(self, process: Any) -> None:
        """While a run is in flight, tell the app (again every second, with the count)
        that the child has sent nothing, not even a heartbeat, for ``silent_after``
        seconds or more. Before its first event the run is loading (imports, weights,
        warm-up), which may hold the heartbeat back on a busy machine: silence then is
        told only where the OS says the process is stopped."""
        told_at = 0.0
        while self._process is process and not _ended(process, min(0.5, self._silent_after / 4)):
            with self._lock:
                silent = time.monotonic() - self._heard
                busy = self._last_submitted > self._last_ended
                run, loading = self._last_submitted, not self._streaming
                due = busy and silent >= self._silent_after and (
                    not self._silent or silent - told_at >= 1.0)
            why = _process_state(process.pid) if due else ""
            if not due or loading and not why:
                continue
            with self._lock:
                self._silent, told_at = True, silent
            self._deliver(EngineSilent(run, silent, process.pid, why))

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
        if _alive(process):
            process.kill()
            process.join(timeout=2)
        self._log.unlink(missing_ok=True)


def _ended(process: Any, wait: float) -> bool:
    """Whether the child has gone, waiting up to ``wait`` seconds. It reads the process's
    sentinel and never reaps it (``is_alive`` does, racing the reader thread's ``join``
    for the exit status)."""
    return bool(multiprocessing.connection.wait([process.sentinel], timeout=wait))


def _alive(process: Any) -> bool:
    return not _ended(process, 0)


def _process_state(pid: int | None) -> str:
    """Why a silent process is silent, where the OS says (Linux: stopped by a signal)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""
    if state in ("T", "t"):
        return "stopped by a signal (SIGSTOP or Ctrl+Z; SIGCONT resumes it)"
    return ""


def last_line(path: Path) -> str:
    """The last line an engine wrote to its log (what it said before it died)."""
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _child_main(connection: Any, cancelled_through: Any, log: str) -> None:
    """The engine process: its output goes to ``log`` (the terminal belongs to the app);
    a thread of its own sends a heartbeat every ``HEARTBEAT_SECONDS``."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sending = threading.Lock()

    def send(message: EngineMessage | Heartbeat) -> None:
        with sending:  # one connection, two threads: one message at a time
            connection.send(message)

    def beat() -> None:
        while True:
            time.sleep(HEARTBEAT_SECONDS)
            try:
                send(Heartbeat())
            except (OSError, ValueError):  # the app went away
                return

    # Beating before the imports below (mlx, mlx-lm: seconds on a busy machine).
    threading.Thread(target=beat, name="specdeck-heartbeat", daemon=True).start()
    from specdeck.engines.models.loading import ModelStore

    def receive() -> RunCommand | None:
        try:
            return connection.recv()
        except EOFError:  # the app went away
            return None

    serve(receive, send, lambda: cancelled_through.value, ModelStore(), time.perf_counter)
