"""Waiting for a process to go, with a deadline (no fixed sleeps)."""

from __future__ import annotations

import os
import time


def gone(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` is gone within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
