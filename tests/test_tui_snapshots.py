"""SVG snapshots of the playground: the main screen mid-race and the round inspector.

Hand-built traces with fixed times and peak memory, a frozen race clock and a fixed
terminal size make the screenshots byte-for-byte repeatable. After a deliberate change
to the look, regenerate with ``SPECDECK_UPDATE_SNAPSHOTS=1 python -m pytest
tests/test_tui_snapshots.py`` and review the new SVGs. They were made with the Textual
that pyproject's test extra pins; another version is named as the cause, not reported
as a changed picture.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import textual

from specdeck.engines.core.config import DecodeSettings
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import ReplaySource
from specdeck.testing.pilot import run_async
from specdeck.testing.traces import demo_traces

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
SIZE = (140, 40)


def pinned_textual() -> str:
    """The Textual version the snapshots were made with: the test extra's pin."""
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    return re.search(r'"textual==([^"]+)"', pyproject).group(1)


def check_snapshot(name: str, svg: str, tmp_path: Path) -> None:
    installed = textual.__version__
    assert installed == pinned_textual(), (
        f"the snapshots were made with Textual {pinned_textual()} (pyproject's test extra) "
        f"and this is Textual {installed}: install the pinned one (pip install -e '.[test]'), "
        "or move the pin and regenerate the snapshots after reviewing them"
    )
    path = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("SPECDECK_UPDATE_SNAPSHOTS") or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        if not os.environ.get("SPECDECK_UPDATE_SNAPSHOTS"):
            raise AssertionError(f"created {path}: review it and run the tests again")
        return
    if path.read_text(encoding="utf-8") != svg:
        actual = tmp_path / f"{name}.svg"
        actual.write_text(svg, encoding="utf-8")
        raise AssertionError(
            f"{name} changed: compare {actual} with {path}; if the change is intended, "
            "rerun with SPECDECK_UPDATE_SNAPSHOTS=1"
        )


def replay_app() -> SpecdeckApp:
    return SpecdeckApp(ReplaySource(demo_traces(), DecodeSettings(num_draft_tokens=3)),
                       wall_clock=lambda: 0.0, title="demo session")


@run_async
async def test_main_screen_mid_race(tmp_path):
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.seek_race(0.22)
        await pilot.pause()
        draft = app.pane("draft")
        assert 0 < draft.shown < len(draft.events)  # mid-race, not at an end
        check_snapshot("main_mid_race", app.export_screenshot(), tmp_path)


@run_async
async def test_inspector_on_a_correction_round(tmp_path):
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("space")  # pause the race at t = 0
        app.pane("draft").focus()
        for _ in range(2):
            await pilot.press("n")
        await pilot.press("i")
        await pilot.pause()
        round_ = app.pane("draft").current_round()
        assert round_.index == 1 and round_.end == "correction"
        check_snapshot("inspector", app.export_screenshot(), tmp_path)
