"""Signals that stop a run, handled alike by compare, sweep and calibrate: Ctrl+C
(SIGINT), SIGTERM (``kill``, a service manager, a job scheduler) and SIGHUP (the
terminal closed). Uncaught, SIGTERM and SIGHUP ended a run with nothing saved.

The first asks the run to stop: after the current round (``cancel``: what ran is kept
and saved as partial) or at once (``interrupt``: the command keeps what finished); a
second quits at once. While files are written (``hold``) a signal only says so. The
command then exits with the shell's status for the signal (128 + its number: 130, 143,
129). After SIGHUP, whatever went to the vanished terminal goes nowhere instead, so
writing the session cannot fail for it.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Literal

#: The signals that stop a run (SIGHUP and SIGTERM where the system has them).
STOPPING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                 if hasattr(signal, name))

Mode = Literal["cancel", "interrupt", "hold"]

#: The signal that stopped this process's run (the exit status follows it).
_received: list[int] = []


def record(signum: int) -> None:
    """Note that ``signum`` stopped this process's run (``stopped_status`` follows it)."""
    _received.append(signum)


def stopped_status() -> int:
    """The exit status of a run a signal stopped: 128 + the signal (Ctrl+C: 130)."""
    return 128 + (_received[-1] if _received else signal.SIGINT)


def _say(text: str) -> None:
    # os.write, not print: a signal handler may interrupt a print in progress.
    try:
        os.write(2, f"\nspecdeck: {text}\n".encode())
    except OSError:
        pass  # the terminal is gone


def _leave_the_terminal() -> None:
    """Send what would go to the closed terminal nowhere (files and pipes are kept)."""
    null = os.open(os.devnull, os.O_WRONLY)
    for descriptor in (1, 2):
        try:
            if os.isatty(descriptor):
                os.dup2(null, descriptor)
        except OSError:
            os.dup2(null, descriptor)  # a terminal that hung up may fail even isatty
    os.close(null)


class Stopping:
    """A context in which the stopping signals stop the run as ``mode`` says (it may
    change: a sweep ``hold``s once its cells are measured). ``requested`` is set at the
    first. A signal another part of the program already handles (a rank's SIGTERM) is
    left to it; SIGINT is always taken (a rank may inherit it ignored)."""

    def __init__(self, mode: Mode = "cancel") -> None:
        self.mode: Mode = mode
        # A flag, not a threading.Event: a second signal can land while the first's
        # handler holds the Event's lock, and setting it again would wait forever.
        self.requested = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "Stopping":
        if threading.current_thread() is threading.main_thread():
            for signum in STOPPING:
                current = signal.getsignal(signum)
                if signum == signal.SIGINT or current == signal.SIG_DFL:
                    self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def is_set(self) -> bool:
        return self.requested

    def _on_signal(self, signum: int, frame: object) -> None:
        name = "Ctrl+C" if signum == signal.SIGINT else signal.Signals(signum).name
        if self.mode == "hold":
            _say(f"{name}: writing what finished first")
            return
        first = not self.requested
        if first:
            self.requested = True
            record(signum)
            if signum == getattr(signal, "SIGHUP", None):
                _leave_the_terminal()
        if self.mode == "interrupt" or not first:
            raise KeyboardInterrupt
        _say(f"{name}: stopping after this round and saving what ran "
             f"({name} again to quit now)")
