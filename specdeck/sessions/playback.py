"""The race: replay several recorded runs in sync, each from its own t = 0, at true speed.

Strategies are measured one after another (fair timing), so their live streams never
overlap in time. Replaying them side by side on one clock makes their relative speed
visible. This module only schedules: given the traces and a play position it says how
many events of each trace are due. No UI import, so the app's race, the replay of a saved
session and tests share it.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from specdeck.engines.core.events import Done, Event, Trace

#: Speeds offered by the playground's speed keys, slowest first.
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 10.0)
#: At 1x a race takes at least this long: a run of half a second is slowed down so the
#: eye can follow it (all panes alike, so their relative speed stays true).
MIN_RACE_SECONDS = 8.0


def next_speed(speed: float, faster: bool) -> float:
    """The neighbouring speed on the ladder (staying put at either end)."""
    if faster:
        return next((s for s in SPEEDS if s > speed), speed)
    return next((s for s in reversed(SPEEDS) if s < speed), speed)


def stretch_for(duration: float, least: float = MIN_RACE_SECONDS) -> float:
    """How many times slower than real time a race of ``duration`` seconds is shown at
    1x: enough for it to take ``least`` seconds; 1 for a run that long already."""
    return max(1.0, least / duration) if duration > 0 else 1.0


def finish_places(ends: dict[str, float]) -> dict[str, int]:
    """Each run's place (1 = first) by the time it finished; equal times share a place."""
    ordered = sorted(set(ends.values()))
    return {name: ordered.index(end) + 1 for name, end in ends.items()}


def event_time(event: Event) -> float:
    """Seconds from the start of its run at which ``event`` happened."""
    return event.seconds if isinstance(event, Done) else event.t


@dataclass
class Schedule:
    """When each event of each trace is due, relative to its own run's start."""

    times: dict[str, list[float]]

    @classmethod
    def of(cls, traces: dict[str, Trace]) -> "Schedule":
        times = {}
        for name, trace in traces.items():
            stamps, latest = [], 0.0
            for event in trace.events:
                # Clocks only move forward: keep the order even if a stamp went backwards.
                latest = max(latest, event_time(event))
                stamps.append(latest)
            times[name] = stamps
        return cls(times)

    @property
    def duration(self) -> float:
        """When the slowest run ended."""
        return max((t[-1] for t in self.times.values() if t), default=0.0)

    @property
    def ends(self) -> dict[str, float]:
        """When each run (with events) ended, from its own start."""
        return {name: t[-1] for name, t in self.times.items() if t}

    def due(self, position: float) -> dict[str, int]:
        """How many events of each trace have happened by ``position`` seconds."""
        return {name: bisect_right(t, position) for name, t in self.times.items()}


@dataclass
class Playback:
    """A play position that advances with wall time times a speed, and can pause.

    The caller feeds elapsed wall seconds (from whatever clock it trusts, so tests and
    snapshots stay deterministic) and reads which events are due.
    """

    schedule: Schedule
    speed: float = 1.0
    position: float = 0.0
    paused: bool = False
    #: Times slower than real time the race runs at speed 1 (``stretch_for``).
    stretch: float = 1.0

    def __post_init__(self) -> None:
        if self.speed <= 0 or self.stretch <= 0:
            raise ValueError(f"speed and stretch must be > 0 (got {self.speed}, {self.stretch})")

    @property
    def finished(self) -> bool:
        return self.position >= self.schedule.duration

    def advance(self, wall_seconds: float) -> dict[str, int]:
        """Move on by ``wall_seconds`` of real time (unless paused); return what is due."""
        if not self.paused and wall_seconds > 0:
            self.position = min(
                self.position + wall_seconds * self.speed / self.stretch, self.schedule.duration
            )
        return self.schedule.due(self.position)

    def seek(self, position: float) -> dict[str, int]:
        self.position = min(max(position, 0.0), self.schedule.duration)
        return self.schedule.due(self.position)
