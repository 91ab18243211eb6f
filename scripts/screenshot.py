"""Render the README's screenshots: the playground mid-race with the inspector open, and
the cost view ("why this k") of a real k = 16 run of the demo family.

The app replays saved traces (hand-built ones with readable text for the first; the
shipped example session ``sessions/examples/code-draft-k16.json`` for the second) at a
fixed terminal size, so the pictures are the same on every run. Textual exports an SVG;
cairosvg turns it into the PNG the README shows (``pip install -e ".[docs]"``; cairosvg
draws no strike-through, so rejected drafts show by their colour only in the PNG; the
SVG keeps every style).

    python scripts/screenshot.py    # writes docs/screenshot.* and docs/cost-view.*
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from specdeck.engines.config import DecodeSettings  # noqa: E402
from specdeck.tui.app import SpecdeckApp  # noqa: E402
from specdeck.session import load_session  # noqa: E402
from specdeck.testing.traces import demo_traces  # noqa: E402

SIZE = (150, 42)
#: Tall enough for the summary and every position of k = 16; the Braille chart below
#: them is left out (cairosvg draws no Braille with Fira Code, the font it needs).
COST_VIEW_SIZE = (120, 37)


async def render_svg() -> str:
    app = SpecdeckApp(traces=demo_traces(), settings=DecodeSettings(num_draft_tokens=3),
                      wall_clock=lambda: 0.0, title="demo session")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("space")  # hold the race where it is put
        app.seek_race(0.30)
        app.pane("draft").focus()
        await pilot.press("i")
        await pilot.pause()
        return app.export_screenshot()


async def render_cost_view_svg() -> str:
    """The cost view of the k = 16 example: survival per position against the cost line."""
    session = load_session(ROOT / "sessions" / "examples" / "code-draft-k16.json")
    app = SpecdeckApp(traces=session.traces, settings=session.settings,
                      wall_clock=lambda: 0.0, title="sessions/examples/code-draft-k16.json")
    async with app.run_test(size=COST_VIEW_SIZE) as pilot:
        await pilot.pause()
        app.seek_race(1e9)
        app.race_tick()
        app.pane("draft").focus()
        await pilot.press("k")
        await pilot.pause()
        return app.export_screenshot()


def main() -> int:
    import cairosvg

    out = ROOT / "docs"
    out.mkdir(exist_ok=True)
    for name, render in (("screenshot", render_svg), ("cost-view", render_cost_view_svg)):
        svg = asyncio.run(render())
        (out / f"{name}.svg").write_text(svg, encoding="utf-8")
        cairosvg.svg2png(bytestring=svg.encode(), write_to=str(out / f"{name}.png"),
                         output_width=1800)
        print(f"wrote {out / f'{name}.svg'} and {out / f'{name}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
