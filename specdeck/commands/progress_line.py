"""One line of progress on stderr for long commands (calibrate, sweep, ranking drafts).

On a terminal the line is redrawn in place. Off one (a log file, a pipe, CI) carriage
returns and erase codes would pile up as one unreadable line of hundreds of updates
(``specdeck calibrate 2> log`` wrote 306 of them), so there a plain line is written at
the first update, then at most one every ``every`` seconds, and at the last.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class ProgressLine:
    """Shows ``text`` of the latest update; ``end`` before any other line is printed."""

    def __init__(self, stream: TextIO | None = None, every: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every, self.clock = every, clock
        isatty = getattr(self.stream, "isatty", None)
        self.in_place = bool(isatty and isatty())
        self.drawn = False  # a line drawn in place and not yet ended
        self.written_at: float | None = None

    def show(self, text: str, last: bool = False) -> None:
        """The progress now (``last``: the final update, always written)."""
        if self.in_place:
            print(f"\r{text}\033[K", end="", file=self.stream, flush=True)
            self.drawn = True
            return
        now = self.clock()
        if last or self.written_at is None or now - self.written_at >= self.every:
            print(text, file=self.stream, flush=True)
            self.written_at = now

    def end(self) -> None:
        """Ends a line drawn in place, so that the next line printed starts afresh."""
        if self.drawn:
            print(file=self.stream, flush=True)
            self.drawn = False
