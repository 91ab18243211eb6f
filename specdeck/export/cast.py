"""The race as the terminal app plays it, recorded as an asciinema v2 cast.

The app runs headless on the session at a fixed size while the recording moves its race
clock ``FPS`` times a second of the race as shown (at 1x: slowed, as in the app, when the
slowest run took under 8 s; the status line says so). Each frame is the app's own
screen, from the compositor that Textual's screenshots read; a frame writes only the
runs of each row that changed. Every character of a frame's text goes through
``specdeck.safe_text.plain.printable``, so the only escape sequences in the cast are its own
colours and cursor moves, never one from the session.

The format (https://docs.asciinema.org/manual/asciicast/v2/): a JSON header line, then one
``[seconds, "o", text]`` line per frame.
"""

from __future__ import annotations

import asyncio
import json
import math
from itertools import chain

from rich.cells import cell_len
from rich.color import ColorSystem

from specdeck.export.replayed_app import SIZE, replayed_app
from specdeck.sessions.session import Session
from specdeck.tui.app import SpecdeckApp
from specdeck.safe_text.plain import printable, visible

#: Frames per second of the race as shown.
FPS = 12
#: Hide the cursor and clear the screen before the first frame.
_START = "\x1b[?25l\x1b[2J"


#: A screen row: each of its runs of one style, with the column the run starts at.
Row = tuple[tuple[int, str], ...]


def screen_rows(app: SpecdeckApp) -> list[Row]:
    """The app's screen now: per row, its runs of text with their colour codes."""
    update = app.screen._compositor.render_update(full=True, simplify=True)
    rows = []
    for line in update.strips:
        column, row = 0, []
        for text, style, control in chain.from_iterable(line):
            if control:
                continue
            text = printable(text)
            row.append((column, style.render(text, color_system=ColorSystem.TRUECOLOR)
                        if style else text))
            column += cell_len(text)
        rows.append(tuple(row))
    return rows


def changed_rows(before: list[Row], after: list[Row]) -> str:
    """What turns the screen ``before`` into ``after``: in each changed row, the runs
    from the first that changed to the last, written at their place."""
    out = []
    for y, row in enumerate(after):
        old = before[y] if y < len(before) else ()
        start = 0
        while start < min(len(row), len(old)) and row[start] == old[start]:
            start += 1
        same_end = 0  # runs at the end alike, at the same columns
        while (same_end < min(len(row), len(old)) - start
               and row[-1 - same_end] == old[-1 - same_end]):
            same_end += 1
        if start < len(row) - same_end:
            out.append(f"\x1b[{y + 1};{row[start][0] + 1}H"
                       + "".join(text for _, text in row[start:len(row) - same_end]))
    return "".join(out)


async def _record(session: Session, size: tuple[int, int], fps: int
                  ) -> list[tuple[float, str]]:
    events: list[tuple[float, str]] = []
    async with replayed_app(session, size) as (app, pilot, clock):
        end = app.playback.schedule.duration * app.playback.stretch
        shown: list[Row] = []
        last = math.ceil(end * fps)
        for frame in range(last + 1):
            clock.now = min(frame / fps, end)
            if frame == last:  # the clock's sum of steps may stop a hair short of it
                app.seek_race(app.playback.schedule.duration)
            app.race_tick()
            await pilot.pause()
            rows = screen_rows(app)
            change = changed_rows(shown, rows)
            if change or frame in (0, last):  # the last frame ends the cast on time
                events.append((clock.now, (_START if not frame else "") + change))
            shown = rows
    return events


def race_cast(session: Session, title: str, size: tuple[int, int] = SIZE,
              fps: int = FPS) -> bytes:
    """The cast of ``session``'s race at ``size`` (columns, rows), titled ``title``."""
    events = asyncio.run(_record(session, size, fps))
    header = {"version": 2, "width": size[0], "height": size[1],
              "title": visible(title), "env": {"TERM": "xterm-256color"}}
    lines = [json.dumps(header)] + [json.dumps([round(t, 6), "o", text])
                                    for t, text in events]
    return ("\n".join(lines) + "\n").encode()
