"""The playground itself, run headless on a saved session with its race clock held by
the caller: the cast records it frame by frame, the still pictures its finished race.

No second renderer: what these files show is what the app draws, at a fixed terminal
size, its clock moved by hand so every export of a session comes out the same.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator

from textual.pilot import Pilot

from specdeck.sessions.session import Session
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import ReplaySource

#: Columns and rows of the terminal: four panes side by side with every figure of their
#: statistics strips.
SIZE = (160, 45)


@dataclass
class HeldClock:
    """A wall clock that stands still until ``now`` is set."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def replayed_app(session: Session, size: tuple[int, int]
                       ) -> AsyncIterator[tuple[SpecdeckApp, Pilot, HeldClock]]:
    """The app on ``session`` at ``size`` (columns, rows), its race started at t = 0."""
    clock = HeldClock()
    app = SpecdeckApp(ReplaySource.of(session), title=session.replay_title,
                      wall_clock=clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        yield app, pilot, clock
