"""Batch the engine's events so the app repaints ~15 times a second, not per token.

Sending one message per token would flood the app at thousands of tokens a second. Every
repaint while a strategy is measured takes CPU from it (``bench/ui_overhead.py``): 15
batches a second still read as a live stream and cost half what 30 do; the race, which
is not measured, replays at 30 frames a second.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from specdeck.engines.core.events import Done, Event

Batch = list[tuple[str, Event]]


class EventBatcher:
    """Collects (strategy, event) pairs; hands them to ``send`` at most every ``interval``
    seconds, and at once when a run ends (so a finished pane never waits)."""

    def __init__(
        self,
        send: Callable[[Batch], None],
        interval: float = 1 / 15,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._interval = interval
        self._clock = clock
        self._pending: Batch = []
        self._last = clock()
        self._lock = threading.Lock()

    def add(self, name: str, event: Event) -> None:
        with self._lock:
            self._pending.append((name, event))
            due = isinstance(event, Done) or self._clock() - self._last >= self._interval
        if due:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            self._last = self._clock()
        if batch:
            self._send(batch)
