"""The app's state on a replay (no models): phase, pause, speed and rejected drafts are
reactive values whose watchers keep the race, the panes and the status line in step;
the target's decoder, read by a worker, arrives as a message."""

from __future__ import annotations

from specdeck.hosts.engine import TargetLoaded
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import Phase, ReplaySource, pieces_by_token
from specdeck.testing.pilot import run_async, until
from specdeck.tui.racing import RACE_FPS
from specdeck.testing.traces import demo_traces

SIZE = (110, 36)


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def status(app: SpecdeckApp) -> str:
    return str(app.query_one("#status").render())


@run_async
async def test_keys_change_state_and_the_watchers_follow():
    clock = Clock()
    app = SpecdeckApp(ReplaySource(demo_traces()), wall_clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.phase is Phase.RACING and app.phase == "racing"
        assert isinstance(app.source, ReplaySource)
        await pilot.press("plus")
        assert app.speed == 2.0 and app.playback.speed == 2.0 and "race 2x" in status(app)
        await pilot.press("space")
        assert app.paused and app.playback.paused and "PAUSED" in status(app)
        await pilot.press("x")
        assert not app.show_rejected and "rejected hidden" in status(app)
        assert all(not pane.view.show_rejected for pane in app.panes)
        await pilot.press("space", "c")  # unpause, then stop the race
        assert app.phase is Phase.RACED and not app.paused and "PAUSED" not in status(app)
        shown = {pane.strategy: pane.shown for pane in app.panes}
        clock.now += 10.0  # the race was left: its timer no longer moves the panes...
        ticks: list[int] = []
        app.set_interval(1 / RACE_FPS, lambda: ticks.append(1))
        await until(pilot, lambda: len(ticks) >= 3)  # ...though it had time to, thrice
        assert {pane.strategy: pane.shown for pane in app.panes} == shown
        await pilot.press("r")  # a replay restarts its race
        assert app.phase is Phase.RACING
        clock.now += 60.0
        await until(pilot, lambda: app.phase is Phase.RACED)
        assert all(pane.complete for pane in app.panes)
        assert status(app).startswith("race finished")


@run_async
async def test_the_decoder_read_by_a_worker_arrives_as_a_message(tiny_family):
    app = SpecdeckApp(ReplaySource(demo_traces()), wall_clock=Clock())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        known = pieces_by_token(app.source.traces)
        unknown = next(i for i in range(300) if i not in known)  # the traces never show it
        assert app.token_text(unknown) is None
        app._target_loaded(TargetLoaded(app.run_id, str(tiny_family["llama_target"])))
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.token_text(unknown), str)
