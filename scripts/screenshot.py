"""Render the README's pictures: a real run of the smollm2 family at the end of its race,
a rejected draft's round open in the inspector; the cost view ("why this k") of a real
k = 16 run of the demo family (``sessions/examples/code-draft-k16.json``); and the
exported page of the demo family's run of every strategy, a rejected draft's round open
(``docs/export.png``).

The run is ``sessions/examples/rewrite-smollm2.json``, recorded by ``specdeck --family
smollm2 compare --headless --strategies plain,draft,ngram --prompt chat_rewrite
--max-tokens 128 --alternatives 5`` (what bare ``specdeck`` opens on). Its picture is what
``specdeck export sessions/examples/rewrite-smollm2.json --svg docs/screenshot.svg
--inspect draft:64`` writes (the same function): the app replays it at a fixed terminal
size, its race clock held, so the picture is the same on every run. Textual exports an
SVG, and the PNG the README shows is drawn from it by
headless Chromium where one is installed (Debian: ``apt-get install
chromium-headless-shell``), which renders Textual's SVGs faithfully (Fira Code from
``fonts-firacode``). Without one, cairosvg (the ``docs`` extra: ``pip install -e
".[docs]"``) draws it, but without strike-through and with boxes for symbols its font
lacks (rejected drafts then show by their colour only); the SVG keeps every style. The
web page is photographed by chromium driven by selenium (the test extra) where both are
installed.

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

from specdeck.export.page import render_page  # noqa: E402
from specdeck.export.page_data import session_page  # noqa: E402
from specdeck.export.still import race_svg  # noqa: E402
from specdeck.sessions.session import load_session  # noqa: E402
from specdeck.tui.app import SpecdeckApp  # noqa: E402
from specdeck.tui.sources import ReplaySource  # noqa: E402

SESSION = ROOT / "sessions" / "examples" / "rewrite-smollm2.json"
#: The exported page's run: four panes, the demo family.
PAGE_SESSION = ROOT / "sessions" / "examples" / "code-all-strategies.json"
#: The browser window the page is photographed in: the four panes and a round's detail.
PAGE_WINDOW = (1700, 1250)
#: Tall enough for the summary and every position of k = 16; the Braille chart below
#: them is left out (cairosvg draws no Braille with Fira Code, the font it needs).
COST_VIEW_SIZE = (120, 37)


async def render_cost_view_svg() -> str:
    """The cost view of the k = 16 example: survival per position against the cost line."""
    session = load_session(ROOT / "sessions" / "examples" / "code-draft-k16.json")
    app = SpecdeckApp(ReplaySource(session.traces, session.settings),
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


def page_png(png: Path, chromium: str) -> bool:
    """Photograph the exported page of ``PAGE_SESSION`` with a rejected draft's round
    open; False where selenium or chromedriver is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return False
    driver_path = shutil.which("chromedriver")
    if driver_path is None:
        return False
    title = f"specdeck: {PAGE_SESSION.name}"
    page = png.with_suffix(".html")
    page.write_bytes(render_page(session_page(load_session(PAGE_SESSION), title), title))
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--force-device-scale-factor=1", "--window-size={},{}".format(*PAGE_WINDOW)):
        options.add_argument(flag)
    env = {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}
    driver = webdriver.Chrome(service=Service(driver_path, env=env), options=options)
    try:
        driver.get(page.as_uri())
        driver.find_elements("css selector", ".pane:nth-child(2) .token--rejected")[2].click()
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(png))
    finally:
        driver.quit()
        page.unlink()
    return True


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
    pictures = (("screenshot", lambda: race_svg(load_session(SESSION), inspect=("draft", None))),
                ("cost-view", lambda: asyncio.run(render_cost_view_svg())))
    for name, render in pictures:
        svg, png = out / f"{name}.svg", out / f"{name}.png"
        svg.write_text(render(), encoding="utf-8")
        if chromium is not None:
            chromium_png(svg, png, chromium)
        else:
            cairosvg_png(svg, png)
        print(f"wrote {svg} and {png} ({'Chromium' if chromium else 'cairosvg'})")
    if chromium is not None and page_png(out / "export.png", chromium):
        print(f"wrote {out / 'export.png'}")
    else:
        print("left docs/export.png: it needs chromium, chromedriver and selenium")
    return 0


if __name__ == "__main__":
    sys.exit(main())
