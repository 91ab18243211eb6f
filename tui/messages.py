"""What reaches the app from other threads, posted (never blocking): the engine host's
messages, and what the app's own workers read."""

from __future__ import annotations

from typing import Callable

from textual.message import Message

from specdeck.hosts.engine import EngineMessage


class FromEngine(Message):
    """A batch of events, a progress line, the estimates, the loaded target or the end of
    a run; each names its run, so the app drops those of cancelled or replaced runs."""

    def __init__(self, payload: EngineMessage) -> None:
        super().__init__()
        self.payload = payload


class DecoderRead(Message):
    """A worker read the tokenizer in ``path``: ``decode`` names the inspector's
    alternatives (None when it cannot be read)."""

    def __init__(self, path: str, decode: Callable[[list[int]], str] | None) -> None:
        super().__init__()
        self.path = path
        self.decode = decode
