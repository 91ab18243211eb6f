"""Where the panes' events come from, and where the app is."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.events import Trace
from specdeck.engines.core.requests import CompareRequest
from specdeck.sessions.session import Session

if TYPE_CHECKING:  # the app imports this module
    from specdeck.tui.app import SpecdeckApp


def pieces_by_token(traces: dict[str, Trace]) -> dict[int, str]:
    """Text of every token id the traces show, for naming alternatives without a tokenizer."""
    known: dict[int, str] = {}
    for trace in traces.values():
        for r in trace.rounds:
            known.update(zip(r.tokens, r.pieces))
            known.update(zip(r.rejected, r.rejected_pieces))
    return known


class Phase(str, Enum):
    """Where the app is; a string enum, so it reads (and compares) as its value."""

    IDLE = "idle"
    LOADING = "loading"
    RUNNING = "running"
    MEASURED = "measured"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RACING = "racing"
    RACED = "raced"

    @property
    def streaming(self) -> bool:
        """A run is being measured: its panes follow the engine."""
        return self in (Phase.LOADING, Phase.RUNNING)


@dataclass
class LiveSource:
    """The panes show runs the engine measures for ``request``."""

    request: CompareRequest

    @property
    def strategies(self) -> list[str]:
        return list(self.request.strategies)

    @property
    def settings(self) -> DecodeSettings:
        return self.request.settings

    @property
    def prompt(self) -> str | None:
        return self.request.prompt

    def token_text(self, token: int) -> str | None:
        return None  # the target's tokenizer names tokens (``SpecdeckApp.token_text``)

    async def restart(self, app: SpecdeckApp) -> None:
        await app.start_run()


@dataclass
class ReplaySource:
    """The panes show saved traces (a session), raced from their own timings."""

    traces: dict[str, Trace]
    #: The run's settings, which label the panes; None when the session lacks them.
    settings: DecodeSettings | None = None
    #: The prompt the run answered; None when the session lacks it.
    prompt: str | None = None
    #: Each strategy's estimated peak bytes, shown beside its measured peak.
    memory_estimates: dict[str, int] = field(default_factory=dict)
    #: The tok/s of every timed run of strategies timed more than once.
    measured: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._known = pieces_by_token(self.traces)

    @classmethod
    def of(cls, session: Session) -> ReplaySource:
        """A saved session, all it recorded, as ``specdeck replay`` shows it."""
        return cls(session.traces, session.settings, session.prompt,
                   session.memory_estimates, session.measured)

    @property
    def strategies(self) -> list[str]:
        return list(self.traces)

    def token_text(self, token: int) -> str | None:
        """A token's text as the traces show it (no tokenizer needed)."""
        return self._known.get(token)

    async def restart(self, app: SpecdeckApp) -> None:
        app.start_race()
