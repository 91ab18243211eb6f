"""Messages a live run's worker thread posts to the app (batched, never blocking)."""

from __future__ import annotations

from textual.message import Message

from engines.events import Event


class RunMessage(Message):
    """Base: every message names the run it belongs to, so stale runs are ignored."""

    def __init__(self, run_id: int) -> None:
        super().__init__()
        self.run_id = run_id


class EventsArrived(RunMessage):
    """A batch of (strategy, event) pairs, in the order they happened."""

    def __init__(self, run_id: int, batch: list[tuple[str, Event]]) -> None:
        super().__init__(run_id)
        self.batch = batch


class Progress(RunMessage):
    """A line about loading or warming up."""

    def __init__(self, run_id: int, text: str) -> None:
        super().__init__(run_id)
        self.text = text


class RunEnded(RunMessage):
    """The comparison finished, was cancelled, or failed with ``error`` (one line);
    ``saved`` is where its session was written, if it was."""

    def __init__(self, run_id: int, error: str | None = None, saved: str | None = None) -> None:
        super().__init__(run_id)
        self.error = error
        self.saved = saved


class EstimatesReady(RunMessage):
    """Each strategy's estimated peak bytes (from the model files), before it runs."""

    def __init__(self, run_id: int, totals: dict[str, int]) -> None:
        super().__init__(run_id)
        self.totals = totals
