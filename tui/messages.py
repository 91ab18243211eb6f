"""What reaches the app from the engine host's thread: one message type, posted (never
blocking), carrying a ``specdeck.engine_host`` message."""

from __future__ import annotations

from textual.message import Message

from specdeck.engine_host import EngineMessage


class FromEngine(Message):
    """A batch of events, a progress line, the estimates, the loaded target or the end of
    a run; each names its run, so the app drops those of cancelled or replaced runs."""

    def __init__(self, payload: EngineMessage) -> None:
        super().__init__()
        self.payload = payload
