"""Render the README's screenshot: the playground mid-race with the inspector open.

The app replays hand-built traces (readable text, fixed times) at a fixed terminal size,
so the picture is the same on every run. Textual exports an SVG; cairosvg turns it into
the PNG the README shows (``pip install -e ".[docs]"``; cairosvg draws no strike-through,
so rejected drafts show by their colour only in the PNG; the SVG keeps every style).

    python scripts/screenshot.py            # writes docs/screenshot.svg and .png
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from specdeck.engines.config import DecodeSettings  # noqa: E402
from specdeck.tui.app import SpecdeckApp  # noqa: E402
from specdeck.testing.traces import demo_traces  # noqa: E402

SIZE = (150, 42)


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


def main() -> int:
    import cairosvg

    out = ROOT / "docs"
    out.mkdir(exist_ok=True)
    svg = asyncio.run(render_svg())
    (out / "screenshot.svg").write_text(svg, encoding="utf-8")
    cairosvg.svg2png(bytestring=svg.encode(), write_to=str(out / "screenshot.png"),
                     output_width=1800)
    print(f"wrote {out / 'screenshot.svg'} and {out / 'screenshot.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
