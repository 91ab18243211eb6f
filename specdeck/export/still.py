"""A still picture of a session's finished race: the app's own SVG screenshot (the
README's picture is one: ``specdeck export sessions/examples/code-all-strategies.json
--svg docs/screenshot.svg``)."""

from __future__ import annotations

import asyncio

from specdeck.engines.core.errors import UserError
from specdeck.export.replayed_app import SIZE, replayed_app
from specdeck.safe_text.plain import visible
from specdeck.sessions.session import Session
from specdeck.tui.pane import StrategyPane


def inspected_round(session: Session, strategy: str, number: int | None) -> int:
    """The round of ``strategy`` to inspect: ``number`` (from 1), else its first round
    with a rejected draft; UserError naming what is missing."""
    trace = session.traces.get(strategy)
    if trace is None:
        raise UserError(f"--inspect: no strategy {visible(strategy, 60)!r} in the session "
                        f"({visible(', '.join(session.traces), 200)})")
    rounds = trace.rounds
    if number is None:
        number = next((i + 1 for i, r in enumerate(rounds) if r.rejected), 0)
        if not number:
            raise UserError(f"--inspect: {visible(strategy, 60)} rejected no draft: name a "
                            "round (STRATEGY:ROUND)")
    if not 1 <= number <= len(rounds):
        raise UserError(f"--inspect: {visible(strategy, 60)} has rounds 1 to {len(rounds)}")
    return number


async def _finished_race(session: Session, size: tuple[int, int],
                         inspect: tuple[str, int] | None) -> str:
    async with replayed_app(session, size) as (app, pilot, _):
        app.seek_race(app.playback.schedule.duration)
        app.race_tick()
        if inspect is not None:  # as a click on one of the round's tokens does
            strategy, number = inspect
            app.post_message(StrategyPane.RoundPicked(app.pane(strategy), number - 1))
        await pilot.pause()
        return app.export_screenshot()


def race_svg(session: Session, size: tuple[int, int] = SIZE,
             inspect: tuple[str, int | None] | None = None) -> str:
    """The SVG of the app at ``size`` once the race of ``session`` has finished; with
    ``inspect`` (a strategy, and a round number or None for its first with a rejected
    draft), that round open in the inspector."""
    picked = None
    if inspect is not None:
        picked = inspect[0], inspected_round(session, *inspect)
    return asyncio.run(_finished_race(session, size, picked))
