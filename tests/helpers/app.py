"""Driving the app in tests: live runs, sessions replayed, races, what the screen shows,
and the model picker's fake catalog (a fixture, registered by ``conftest.py``)."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Callable

import pytest
from textual.app import App
from textual.geometry import Region
from textual.widgets import DataTable

import specdeck.tui.model_picker as model_picker
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.models.catalog import ModelInfo
from specdeck.hosts.engine import ThreadHost
from specdeck.sessions.session import load_session
from specdeck.testing.pilot import screen_text, settle, until
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.model_picker import ModelPicker
from specdeck.tui.sources import LiveSource, ReplaySource


@functools.cache
def shared_store() -> ModelStore:
    """The models every in-process app of this test process loads, each once."""
    return ModelStore()


def live_app(request: CompareRequest, *, engine_process: bool = False,
             clock: Callable[[], float] | None = None, **kwargs) -> SpecdeckApp:
    """The playground measuring ``request``: its engine in a thread of this process,
    with models loaded once per test process and ``clock`` timing its events (a test
    gates it to hold a run mid-way), unless ``engine_process`` (the tests of that
    boundary: the process's life, a crash, kill -9, a cancel across it). Every test
    builds its live apps here."""
    if engine_process:
        return SpecdeckApp(LiveSource(request), **kwargs)
    return SpecdeckApp(LiveSource(request),
                       host=lambda post: ThreadHost(post, shared_store(), clock), **kwargs)


def replay_of(path: Path, strategies: tuple[str, ...] | None = None,
              **kwargs) -> SpecdeckApp:
    """``specdeck replay PATH`` (only ``strategies``' panes, where named), its race clock
    standing still."""
    session = load_session(path)
    if strategies is not None:
        session = replace(session, traces={name: session.traces[name] for name in strategies})
    return SpecdeckApp(ReplaySource.of(session), title=session.replay_title,
                       wall_clock=lambda: 0.0, **kwargs)


async def raced(app: SpecdeckApp, pilot) -> None:
    """The replay's race run to its end: every pane shows its whole run."""
    await until(pilot, lambda: app.playback is not None)
    app.seek_race(1e9)
    # The race's next frame finds it finished, and the status line says so.
    await until(pilot, lambda: app.phase == "raced")
    await pilot.pause()


def inside(app: SpecdeckApp, region: Region) -> list[str]:
    """The screen's rows within ``region`` (a pane, a dialog), as a person reads them."""
    rows = screen_text(app).splitlines()
    return [row[region.x : region.right] for row in rows[region.y : region.bottom]]


def shows(lines: list[str], text: str) -> bool:
    return any(text in line for line in lines)


PROMPT = "def add(a, b):\n    return"


SIZE = (110, 36)


def make_request(family, k: int = 2, max_tokens: int = 40,
                 strategies: tuple[str, ...] = ("plain", "draft")) -> CompareRequest:
    return CompareRequest(
        target=str(family["llama_target"]), draft=str(family["llama_draft"]),
        strategies=list(strategies), prompt=PROMPT, warmup_tokens=2,
        settings=DecodeSettings(max_tokens=max_tokens, num_draft_tokens=k, stop_at_eos=False),
    )


ROOT = Path(__file__).resolve().parents[2]


def fake_model(root: Path, name: str, tokenizer: str | None, parameters: int,
               source: str = "dir", mtp: bool = False) -> ModelInfo:
    path = root / name.replace("/", "--")
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text("{}")
    return ModelInfo(
        name=name if source == "hub" else path.name, path=path, source=source,
        model_type="llama", architecture="LlamaForCausalLM", parameters=parameters,
        bits=None, group_size=None, dtype="F16", size_on_disk=parameters * 2,
        hybrid=False, has_mtp_head=mtp, tokenizer=tokenizer, vocab_size=2048,
    )


@pytest.fixture
def catalog(tmp_path, monkeypatch) -> dict[str, ModelInfo]:
    """A catalog in no particular order: a target, drafts of several sizes (one from the
    hub cache), a larger model with the same tokenizer and two it cannot use."""
    models = {
        "big": fake_model(tmp_path, "big-same-tok", "aaa111", 900_000_000),
        "other": fake_model(tmp_path, "other-tok", "bbb222", 1_000_000),
        "d10": fake_model(tmp_path, "draft-10m", "aaa111", 10_000_000),
        "target": fake_model(tmp_path, "target", "aaa111", 100_000_000, mtp=True),
        "hub": fake_model(tmp_path, "org/draft-5m", "aaa111", 5_000_000, source="hub"),
        "unknown": fake_model(tmp_path, "no-tokenizer", None, 2_000_000),
        "d1": fake_model(tmp_path, "draft-1m", "aaa111", 1_000_000),
    }
    listed, seen = list(models.values()), {}

    def fake_find_models(dirs=(), cache_dir=None, hub=True, on_problem=None):
        seen["dirs"] = list(dirs)
        return listed

    monkeypatch.setattr(model_picker, "find_models", fake_find_models)
    models["seen"] = seen
    return models


def picker_rows(screen: ModelPicker) -> list[tuple[str, str]]:
    table = screen.query_one("#picker-table", DataTable)
    return [(str(row[0]), str(row[1]))
            for row in (table.get_row_at(i) for i in range(table.row_count))]


class SettingsHost(App[None]):
    """The settings dialog over an empty app, as the playground opens it."""

    CSS_PATH = ROOT / "tui" / "app.tcss"

    def __init__(self, request) -> None:
        super().__init__()
        self.request = request

    def on_mount(self) -> None:
        from specdeck.tui.settings_screen import SettingsScreen

        self.push_screen(SettingsScreen(self.request))


def compare_request(target: Path) -> CompareRequest:
    return CompareRequest(target=str(target), strategies=["plain", "draft"],
                           prompt="def add(a, b):", draft=None)


async def open_picker(app: App, pilot, role: str) -> ModelPicker:
    await pilot.click(f"#pick-{role}")
    await settle(app, pilot)
    assert isinstance(app.screen, ModelPicker)
    return app.screen
