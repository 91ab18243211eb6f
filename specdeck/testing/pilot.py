"""Driving the app under Textual's Pilot, for tests and ``bench/ui_overhead.py``."""

from __future__ import annotations

import asyncio
import functools
import io
from typing import Any, Awaitable, Callable


def run_async(test: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Run an async test function with asyncio (no pytest plugin needed)."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(test(*args, **kwargs))

    return wrapper


async def settle(app: Any, pilot: Any, timeout: float = 120.0) -> None:
    """Let the engine end its runs, the app's workers finish and the UI take every
    message they posted."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while getattr(app, "engine_busy", False):
        assert loop.time() < deadline, "the engine did not end its run"
        await pilot.pause(0.1)
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


async def until(pilot: Any, condition: Callable[[], bool], seconds: float = 120.0) -> None:
    """Let the app run until ``condition()`` holds (a scroll, a race's start): on a
    loaded machine one pause is not always enough for Textual to get there."""
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("the condition never held")


def screen_text(app: Any) -> str:
    """What the screen shows, as text (what the terminal would be sent, styles left out):
    what a person reads, cut where the screen cuts it."""
    from rich.console import Console

    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(),
                      record=True, force_terminal=False, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)
