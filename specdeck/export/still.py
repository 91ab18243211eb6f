"""A still picture of a session's finished race: the app's own SVG screenshot (the
README's picture is one: ``specdeck export sessions/examples/code-all-strategies.json
--svg docs/screenshot.svg``)."""

from __future__ import annotations

import asyncio

from specdeck.export.replayed_app import SIZE, replayed_app
from specdeck.sessions.session import Session


async def _finished_race(session: Session, size: tuple[int, int]) -> str:
    async with replayed_app(session, size) as (app, pilot, _):
        app.seek_race(app.playback.schedule.duration)
        app.race_tick()
        await pilot.pause()
        return app.export_screenshot()


def race_svg(session: Session, size: tuple[int, int] = SIZE) -> str:
    """The SVG of the app at ``size`` once the race of ``session`` has finished."""
    return asyncio.run(_finished_race(session, size))
