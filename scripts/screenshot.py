"""Render the README's screenshots: a real run on the demo family, mid-race, the round
inspector open on a draft round that was corrected; and the cost view ("why this k") of a
real k = 16 run of the demo family (``sessions/examples/code-draft-k16.json``).

The run is ``sessions/examples/code-all-strategies.json``, recorded by ``specdeck compare
--strategies plain,draft,mtp,ngram`` on the built-in demo models; the app replays it at a
fixed terminal size with its race clock standing still, so the picture is the same on
every run. Textual exports an SVG, and the PNG the README shows is drawn from it by
headless Chromium where one is installed (Debian: ``apt-get install
chromium-headless-shell``), which renders Textual's SVGs faithfully (Fira Code from
``fonts-firacode``). Without one, cairosvg (the ``docs`` extra: ``pip install -e
".[docs]"``) draws it, but without strike-through and with boxes for symbols its font
lacks (rejected drafts then show by their colour only); the SVG keeps every style.

    python scripts/screenshot.py                 # docs/screenshot.* and docs/cost-view.*
    python scripts/screenshot.py --with cairosvg # the PNG from cairosvg even so
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from specdeck.sessions.session import load_session  # noqa: E402
from specdeck.tui.app import SpecdeckApp  # noqa: E402

SESSION = ROOT / "sessions" / "examples" / "code-all-strategies.json"
SIZE = (160, 45)
#: Where the race is held (seconds from each strategy's start), and the round of the
#: draft pane the inspector explains: one whose drafts were partly rejected.
RACE_AT = 0.30
#: Tall enough for the summary and every position of k = 16; the Braille chart below
#: them is left out (cairosvg draws no Braille with Fira Code, the font it needs).
COST_VIEW_SIZE = (120, 37)


async def render_svg() -> str:
    session = load_session(SESSION)
    app = SpecdeckApp(traces=session.traces, settings=session.settings,
                      memory_estimates=session.memory_estimates, prompt=session.prompt,
                      title=session.replay_title, wall_clock=lambda: 0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("space")  # hold the race where it is put
        app.seek_race(RACE_AT)
        draft = app.pane("draft")
        draft.focus()
        await pilot.pause()
        while (draft.current_round() is None or draft.current_round().end != "correction"
               or not draft.current_round().accepted):
            assert draft.step(), "no partly accepted round to show"
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


#: Headless Chromium under the names Debian and others install it.
CHROMIUMS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


def chromium_png(svg: Path, png: Path, chromium: str) -> None:
    """Screenshot the SVG in headless Chromium, the window as large as its viewBox."""
    width, height = (round(float(v)) for v in re.search(
        r'viewBox="0 0 ([0-9.]+) ([0-9.]+)"', svg.read_text(encoding="utf-8")).groups())
    command = [chromium, "--headless", "--disable-gpu", "--hide-scrollbars",
               "--force-device-scale-factor=1", f"--window-size={width},{height}",
               f"--screenshot={png}", svg.as_uri()]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.insert(1, "--no-sandbox")  # Chromium refuses root otherwise
    # Without the OpenBLAS that specdeck preloads on Linux: Chromium crashes with it.
    env = {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}
    subprocess.run(command, check=True, capture_output=True, timeout=300, env=env)


def cairosvg_png(svg: Path, png: Path) -> None:
    import cairosvg

    cairosvg.svg2png(url=str(svg), write_to=str(png), output_width=1970)


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Render docs/screenshot.* and docs/cost-view.* (SVG and PNG).")
    parser.add_argument("--with", dest="renderer", choices=("auto", "chromium", "cairosvg"),
                        default="auto", help="what draws the PNG (default: Chromium when "
                        "installed, else cairosvg)")
    renderer = parser.parse_args().renderer
    chromium = next((path for name in CHROMIUMS if (path := shutil.which(name))), None)
    if renderer == "chromium" and chromium is None:
        print(f"scripts/screenshot.py: no headless Chromium ({', '.join(CHROMIUMS)}) on PATH",
              file=sys.stderr)
        return 2
    if renderer == "cairosvg" or chromium is None:
        try:
            import cairosvg  # noqa: F401
        except ImportError:
            print('scripts/screenshot.py: no headless Chromium, and cairosvg is not '
                  'installed: pip install -e ".[docs]"', file=sys.stderr)
            return 2
        chromium = None
    out = ROOT / "docs"
    out.mkdir(exist_ok=True)
    for name, render in (("screenshot", render_svg), ("cost-view", render_cost_view_svg)):
        svg, png = out / f"{name}.svg", out / f"{name}.png"
        svg.write_text(asyncio.run(render()), encoding="utf-8")
        if chromium is not None:
            chromium_png(svg, png, chromium)
        else:
            cairosvg_png(svg, png)
        print(f"wrote {svg} and {png} ({'Chromium' if chromium else 'cairosvg'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
