"""The app's model picker, memory estimates beside measured peaks, and the sweep view
(in the app and ``specdeck replay SWEEP.json --headless``), driven by Pilot on a fake
catalog and hand-built documents."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from textual.widgets import DataTable, Input

import specdeck.tui.model_picker as model_picker
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.formatting import byte_size
from specdeck.engines.core.requests import CompareRequest
from specdeck.cli import main
from specdeck.sessions.session import load_session
from specdeck.sessions.sweep_file import cell_row, load_sweep
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import ReplaySource
from specdeck.tui.model_picker import catalog_dirs
from specdeck.sessions.chart import speedup_chart_svg
from specdeck.tui.speedup_chart import AUTO_LEVEL, BREAK_EVEN, plot_speedups
from specdeck.tui.sweep_view import SweepApp
from helpers.sessions import document, sample_traces, sweep_document
from specdeck.testing.pilot import run_async, screen_text, settle, until
from specdeck.testing.traces import demo_traces
from helpers.app import (
    ROOT, SettingsHost, compare_request, live_app, open_picker, picker_rows,
)


# --- the model picker -----------------------------------------------------------------


@run_async
async def test_picking_a_draft_lists_compatible_models_first_and_fills_the_field(catalog):
    app = SettingsHost(compare_request(catalog["target"].path))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        picker = await open_picker(app, pilot, "draft")
        assert picker_rows(picker) == [
            ("suggested", "draft-1m"), ("suggested", "org/draft-5m"),
            ("suggested", "draft-10m"),
            ("same tokenizer", "big-same-tok"), ("same tokenizer", "target"),
            ("incompatible", "other-tok"), ("tokenizer unknown", "no-tokenizer"),
        ]
        # The catalog was asked about the directory already in the target field.
        assert catalog["target"].path in catalog["seen"]["dirs"]
        await pilot.press("down", "enter")  # the hub model: its id goes in the field
        await pilot.pause()
        assert app.screen.query_one("#draft", Input).value == "org/draft-5m"

        picker = await open_picker(app, pilot, "draft")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.query_one("#draft", Input).value == str(catalog["d1"].path)

        picker = await open_picker(app, pilot, "draft")
        await pilot.press("escape")  # cancelling keeps the field
        await pilot.pause()
        assert app.screen.query_one("#draft", Input).value == str(catalog["d1"].path)


@run_async
async def test_every_picker_column_stands_under_its_heading(catalog, monkeypatch):
    # A DataTable measures the rows added to it only when idle; a frame drawn before
    # that (a loaded machine) once left the heading at the labels' widths for good,
    # askew over the rows. Every test run draws that frame.
    measure = DataTable._on_idle
    measured: list[DataTable] = []

    async def late_measure(table: DataTable, event) -> None:
        late = table.row_count and table._require_update_dimensions
        if late:
            table.refresh()
            await asyncio.sleep(0.3)
        await measure(table, event)
        if late:
            measured.append(table)

    monkeypatch.setattr(DataTable, "_on_idle", late_measure)
    app = SettingsHost(compare_request(catalog["target"].path))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await open_picker(app, pilot, "draft")
        await until(pilot, lambda: bool(measured))
        await pilot.pause()
        rows = screen_text(app).splitlines()
        heading = next(row for row in rows if " fit " in row and " model " in row)
        first = next(row for row in rows if "draft-1m" in row)
        assert heading.index(" fit ") + 1 == first.index("suggested")
        assert heading.index(" model ") + 1 == first.index("draft-1m")
        assert heading.index(" params ") < first.index("1.0M") < heading.index(" quant ")


@run_async
async def test_mtp_and_target_pickers(catalog):
    app = SettingsHost(compare_request(catalog["target"].path))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        picker = await open_picker(app, pilot, "mtp_model")
        rows = picker_rows(picker)
        assert rows[0] == ("suggested", "target")  # the only one with an MTP head
        assert [mark for mark, _ in rows[1:]] == ["no MTP head"] * 4 + [
            "incompatible", "tokenizer unknown"]
        await pilot.press("escape")
        await pilot.pause()

        picker = await open_picker(app, pilot, "target")
        assert [name for _, name in picker_rows(picker)] == [
            m.name for key, m in catalog.items() if key != "seen"]
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.screen.query_one("#target", Input).value == str(catalog["other"].path)


def test_the_catalog_includes_the_families_and_named_directories(tmp_path, monkeypatch):
    model = tmp_path / "mine"
    model.mkdir()
    (model / "config.json").write_text("{}")
    families = {"demo": tmp_path / "demo", "smollm2": tmp_path / "smollm2"}
    monkeypatch.setattr(model_picker, "family_roots", lambda: families)
    assert catalog_dirs({"target": str(model), "draft": "", "mtp_model": "org/x"}) == [
        families["demo"], families["smollm2"], model]
    monkeypatch.setattr(model_picker, "family_roots", dict)
    assert catalog_dirs({"target": "org/x", "draft": str(tmp_path)}) == []


# --- memory: estimate beside the measured peak -----------------------------------------


def strip_text(pane) -> str:
    return str(pane.query_one(".stats-text").render())


@run_async
async def test_a_replay_shows_each_panes_estimate_next_to_its_peak():
    app = SpecdeckApp(ReplaySource(
        demo_traces(), DecodeSettings(num_draft_tokens=3),
        memory_estimates={"plain": 175 * 2**20, "draft": int(12.34 * 2**20)},
    ), wall_clock=lambda: 0.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.seek_race(60.0)  # the end: Done carries the peak
        await pilot.pause()
        assert "peak 180 MiB / est 175 MiB" in strip_text(app.pane("plain"))
        assert "peak 212 MiB / est 12.3 MiB" in strip_text(app.pane("draft"))


def test_a_sessions_recorded_estimates_reach_the_app(tmp_path, monkeypatch):
    from specdeck import tui
    doc = document(sample_traces())
    doc["config"]["memory_estimates"] = {
        "plain": {"weights": 100, "total": 1_000}, "draft": {"total": 2_000},
        "ngram": {"total": "lots"},  # not a byte count: left out
    }
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(doc))
    assert load_session(path).memory_estimates == {"plain": 1_000, "draft": 2_000}
    opened = {}
    monkeypatch.setattr(tui, "run_app", lambda source, **kw: opened.update(source=source))
    assert main(["replay", str(path)]) == 0
    assert opened["source"].memory_estimates == {"plain": 1_000, "draft": 2_000}


@run_async
async def test_a_live_run_shows_the_estimate_it_made(tiny_family):
    from specdeck.engines.runs.compare import describe_models, estimate_memory
    from specdeck.engines.models.loading import ModelStore

    request = CompareRequest(
        target=str(tiny_family["llama_target"]), draft=str(tiny_family["llama_draft"]),
        strategies=["plain", "draft"], prompt="def add(a, b):\n    return", warmup_tokens=0,
        settings=DecodeSettings(max_tokens=8, stop_at_eos=False, alternatives=5),
    )
    app = live_app(request)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        assert app.phase == "measured"
        prompt_tokens = app.pane("plain").events[0].prompt_tokens
        expected = estimate_memory(request, prompt_tokens,
                                   describe_models(request, ModelStore()))
        for name in ("plain", "draft"):
            pane = app.pane(name)
            assert pane.memory_estimate == expected[name].total > 0
            assert f"/ est {byte_size(expected[name].total)}" in strip_text(pane)


# --- the sweep view ---------------------------------------------------------------------


@pytest.fixture
def sweep_file(tmp_path) -> Path:
    path = tmp_path / "sweep-1.json"
    path.write_bytes(orjson.dumps(sweep_document()))
    return path


def row_of(lines: list[str], label: str) -> str:
    return next(line for line in lines if line.lstrip().startswith(label))


def test_the_text_chart_puts_each_point_at_its_speedup_and_marks_break_even():
    chart = plot_speedups({"code: draft": [(1, 1.5), (2, 1.25), (4, 0.5)],
                           "prose: mtp": [(1, 0.75)]}, width=40, height=12)
    plot = [line[6:] for line in chart.lines[:12]]
    # y from 0 to 1.5 over 48 dot rows: 1.5 is the top row, 0.5 the row labelled 0.50.
    assert row_of(chart.lines, "1.50").endswith("┤" + plot[0]) and plot[0][0] == "●"
    assert row_of(chart.lines, "0.50")[6:].rstrip().endswith("●")  # k=4: the right edge
    assert row_of(chart.lines, "0.75")[6] == "■"  # the second series' marker
    even = row_of(chart.lines, "1.00")
    assert even.count(BREAK_EVEN) > 30  # the break-even line crosses the plot
    assert BREAK_EVEN not in "".join(plot[:3])
    assert chart.lines[13].split() == ["1", "2", "4"]  # evenly spaced: a log scale, said
    assert chart.lines[14].strip() == "drafts per round (k, MTP depth), log scale"
    assert chart.legend == ["● code: draft", "■ prose: mtp",
                            "┄┄ break-even (1.00x plain): above it speculation wins"]


def test_the_y_labels_are_evenly_spaced_on_a_short_plot():
    """Eight rows for 0.5-2.5x cannot give every 0.25 a row of its own: the labels step
    by 0.5 instead (they read 2.25, then 1.75, with 2.00 dropped)."""
    chart = plot_speedups({"chain": [(1, 1.2), (2, 2.5), (4, 0.5)]}, width=40, height=8)
    labels = [float(line.split("┤")[0]) for line in chart.lines[:8] if "┤" in line]
    steps = {round(a - b, 2) for a, b in zip(labels, labels[1:])}
    assert len(steps) == 1 and 1.0 in labels and labels[0] >= 2.0


def test_auto_is_a_level_across_the_text_chart_in_its_series_colour():
    """``auto`` has no k: its speedup is a dotted row across the plot, marked ``a`` at
    its leftmost free cell, in its series' colour (a level whose series has no fixed k
    gets the next colour); the legend gives the figure. Points and lines stay on top."""
    series = {"code: draft": [(1, 1.5), (2, 1.25), (4, 0.5)], "prose: mtp": [(1, 0.75)]}
    chart = plot_speedups(series, width=40, height=12,
                          levels={"code: draft": 1.25, "chat: ngram n=3": 0.25})
    level = row_of(chart.lines, "1.25")
    assert level[6] == "a" and level.count(AUTO_LEVEL) > 30
    assert "●" in level  # draft k=2 sits on auto's level, drawn over it
    low = chart.lines.index(row_of(chart.lines, "0.25"))
    assert row_of(chart.lines, "0.25")[6] == "a"
    assert {chart.owners[low][c] for c in range(40)} == {2}  # the next colour
    row = chart.lines.index(level)
    drawn = [c for c in range(40) if level[6 + c] == AUTO_LEVEL]
    assert {chart.owners[row][c] for c in drawn} == {0}  # draft's colour
    assert chart.legend[2:4] == [f"a{AUTO_LEVEL} code: draft auto: 1.25x plain",
                                 f"a{AUTO_LEVEL} chat: ngram n=3 auto: 0.25x plain"]
    assert chart.legend_owners == [0, 1, 0, 2, None]
    assert AUTO_LEVEL not in "".join(plot_speedups(series, width=40, height=12).lines)
    # On k=1's row the level is marked at its first cell the series left free.
    top = row_of(plot_speedups(series, width=40, height=12, levels={"code: draft": 1.5}).lines,
                 "1.50")
    drawn = [ch == "●" or "\u2800" <= ch <= "\u28ff" for ch in top[6:]]  # marker, line
    assert top[6] == "●" and top[6 + drawn.index(False)] == "a"


def test_an_auto_level_at_break_even_leaves_the_break_even_line_visible():
    """auto at 1.00x draws along break-even's row: every other free cell shows the
    break-even dash (dim, owned by no series), the rest the level in its colour."""
    series = {"code: draft": [(1, 1.5), (2, 1.25), (4, 0.5)]}
    chart = plot_speedups(series, width=40, height=12, levels={"code: draft": 1.0})
    even = row_of(chart.lines, "1.00")
    row, cells = chart.lines.index(even), even[6:]
    assert cells[0] == "a" and cells.count(AUTO_LEVEL) >= 15 and cells.count(BREAK_EVEN) >= 15
    for col, ch in enumerate(cells):
        if ch == BREAK_EVEN:
            assert chart.owners[row][col] is None
        elif ch == AUTO_LEVEL:
            assert chart.owners[row][col] == 0


def test_the_svg_chart_draws_auto_as_a_dotted_level() -> None:
    doc = sweep_document()
    doc["cells"].append({**doc["cells"][1], "k": "auto", "label": "draft k=auto",
                         "speedup": 1.75})
    svg = speedup_chart_svg(doc["cells"])
    assert svg.count('stroke-dasharray="1 4"') == 2  # the level and its legend sample
    assert "code: draft auto 1.75x" in svg
    without = speedup_chart_svg(sweep_document()["cells"])
    assert ">1.75</text>" in svg and ">1.75</text>" not in without  # the y axis reaches it
    assert "auto" not in without


def test_the_svg_grows_to_hold_a_long_legend() -> None:
    """Twelve prompts with a fixed k and auto each: 24 legend lines, more than the
    chart's 420 pixels hold; the picture grows so the last one is inside it."""
    import re

    cells = [{**sweep_document()["cells"][1], "prompt": f"p{i}", "k": k,
              "speedup": 1.0 + i / 10} for i in range(12) for k in (1, "auto")]
    svg = speedup_chart_svg(cells)
    height = int(re.search(r'<svg [^>]*height="(\d+)"', svg).group(1))
    last = max(float(y) for y in re.findall(r'<text x="566" y="([\d.]+)"', svg))
    assert len(re.findall(r'<text x="566"', svg)) == 24
    assert height > 420 and last < height
    assert 'height="420"' in speedup_chart_svg(sweep_document()["cells"])


def test_the_svg_legend_shows_a_hostile_prompt_name_cut_and_literal() -> None:
    """A JSONL prompt's "name" is data: control characters (no XML may hold them raw:
    the whole picture would not open) and thousands of characters (the legend ran off
    the picture's right edge). The legend shows it visibly, cut to LEGEND_CHARS with the
    whole name in a tooltip; the picture widens for entries up to that long, no more."""
    import xml.etree.ElementTree as ET

    from specdeck.sessions.chart import LEGEND_CHARS

    name = "\x1b]0;pwned\x07" + "x" * 3000
    cells = [{**sweep_document()["cells"][1], "prompt": name, "k": k, "speedup": 1.5}
             for k in (1, 2, "auto")]
    svg = ET.fromstring(speedup_chart_svg(cells))
    entries = [t for t in svg.iter("{http://www.w3.org/2000/svg}text")
               if t.find("{http://www.w3.org/2000/svg}title") is not None]
    assert len(entries) == 2  # the series and its auto level
    for entry in entries:
        shown, whole = "".join(entry.itertext()), entry.find("{http://www.w3.org/2000/svg}title").text
        label = shown[len(whole):]
        assert label.startswith("␛]0;pwned␇xxx") and len(label) == LEGEND_CHARS
        assert "\x1b" not in whole and whole.startswith(label.split("…")[0])
        assert len(whole) == 1000 and whole.endswith(label.split("…")[1])
    # Cut in the middle: the strategy and auto's figure are kept whole at the end.
    assert [label.split("…")[1] for label in ("".join(e.itertext())[len(
        e.find("{http://www.w3.org/2000/svg}title").text):] for e in entries)] == [
        "x" * 21 + ": draft", "x" * 10 + ": draft auto 1.50x"]
    assert 720 < int(svg.get("width")) <= 566 + 7 * LEGEND_CHARS + 8
    assert 'width="720"' in speedup_chart_svg(sweep_document()["cells"])


@run_async
async def test_the_sweep_view_charts_auto_beside_the_fixed_k(tmp_path):
    doc = sweep_document()
    doc["cells"].append({**doc["cells"][1], "k": "auto", "label": "draft k=auto",
                         "speedup": 1.75})
    path = tmp_path / "sweep-auto.json"
    path.write_bytes(orjson.dumps(doc))
    app = SweepApp(load_sweep(path))
    async with app.run_test(size=(100, 60)) as pilot:
        await pilot.pause()
        chart = str(app.screen.query_one("#sweep-chart").render()).splitlines()
        assert f"a{AUTO_LEVEL} code: draft auto: 1.75x plain" in chart
        assert row_of(chart, "1.75")[6] == "a"


@run_async
async def test_the_sweep_view_shows_table_chart_and_recommendations(sweep_file):
    sweep = load_sweep(sweep_file)
    app = SweepApp(sweep)
    async with app.run_test(size=(140, 60)) as pilot:
        await pilot.pause()
        screen = app.screen
        table = screen.query_one("#sweep-table", DataTable)
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows == [cell_row(c) for c in sweep.cells]
        assert rows[1][:5] == ["code", "0", "draft k=1", "300.0", "1.50 ▲"]
        assert rows[3][5] == "0.080 noisy" and rows[6][-1] == "MISMATCH"
        chart = str(screen.query_one("#sweep-chart").render())
        assert "● code: draft" in chart and "■ prose: mtp" in chart
        # prose's depth 2 (0.25x) differs from plain: a correctness failure, not a point.
        assert "■" not in row_of(chart.splitlines(), "0.25")
        assert "■" in row_of(chart.splitlines(), "0.75")
        assert "1.00 ┤" in chart and BREAK_EVEN * 10 in chart
        recommendations = str(screen.query_one("#sweep-recommendations").render())
        assert "best draft k=1, 1.50x plain" in recommendations
        why = str(screen.query_one("#sweep-why").render()).splitlines()
        assert why == [f"{c['prompt']} {c['label']}: why {c['label']}" for c in sweep.cells
                       if c["strategy"] != "plain"]
        await pilot.press("escape")
        await pilot.pause()
    assert app.return_code == 0


def test_replay_opens_a_sweep_in_the_sweep_view(sweep_file, monkeypatch):
    from specdeck.tui import sweep_view
    opened = []
    monkeypatch.setattr(sweep_view, "run_sweep_view", opened.append)
    assert main(["replay", str(sweep_file)]) == 0
    assert [len(s.cells) for s in opened] == [7]


def test_replay_headless_prints_a_sweep_without_mlx_or_textual(sweep_file):
    env = {**os.environ, "SPECDECK_NO_OPENBLAS": "1"}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "specdeck", "replay", str(sweep_file),
         "--headless"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "specdeck.sessions.sweep_file" in imported  # the listing works
    assert not {m for m in imported if m.split(".")[0] in ("mlx", "mlx_lm", "optiq", "textual")}
    out = result.stdout
    assert "on Test CPU, Linux 6.1" in out
    assert "draft k=1" in out and "1.50 ▲" in out and "MISMATCH" in out
    assert "code @ temp 0: best draft k=1, 1.50x plain" in out
    assert "  code draft k=2: why draft k=2" in out


@pytest.mark.parametrize("change, needle", [
    (lambda d: d["cells"][1].pop("speedup"), "cell 1 lacks speedup"),
    (lambda d: d["cells"][2].update(noisy="yes"), "cell 2 noisy has the wrong type (str)"),
    (lambda d: d.update(schema_version=9), "newer specdeck (sweep schema 9)"),
    (lambda d: d.update(cells={}), "cells must be a list"),
])
def test_a_bad_sweep_ends_in_one_line(tmp_path, capsys, change, needle):
    doc = sweep_document()
    change(doc)
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(doc))
    assert main(["replay", str(path), "--headless"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"specdeck: error: {path}: ")
    assert needle in lines[0]


def test_diff_of_two_sweeps_lines_up_cells(sweep_file, tmp_path, capsys):
    """The same grid measured twice (another machine, model or version), cell by cell."""
    from specdeck.sessions.sweep_file import diff_sweeps

    assert main(["diff", str(sweep_file)]) == 2
    assert "a sweep is compared with another sweep" in capsys.readouterr().err
    other = sweep_document()
    other["cells"][1]["speedup"] = 3.0  # code draft k=1: twice as fast as in a
    other["cells"][6]["correct"] = True  # prose mtp depth=2 now matches plain
    del other["cells"][3]  # code draft k=4 not measured in b
    b = tmp_path / "sweep-2.json"
    b.write_bytes(orjson.dumps(other))
    rows = {r["label"] + " " + r["prompt"]: r
            for r in diff_sweeps(load_sweep(sweep_file), load_sweep(b))}
    assert rows["draft k=1 code"]["speedup_ratio"] == pytest.approx(2.0)
    assert rows["draft k=4 code"]["b"] is None
    assert rows["mtp depth=2 prose"]["a"]["correct"] is False
    assert main(["diff", str(sweep_file), str(b)]) == 1
    out = capsys.readouterr().out
    assert "missing" in out and "DIFFERS" in out and "2.00" in out
    assert main(["diff", str(sweep_file), str(sweep_file), "--json"]) == 0
    assert len(orjson.loads(capsys.readouterr().out)["cells"]) == 7
    assert main(["diff", str(sweep_file), str(ROOT / "sessions" / "examples" / "code-draft-k4.json")]) == 2
    assert "not a specdeck sweep" in capsys.readouterr().err


def test_a_sweep_that_specdeck_wrote_replays(tiny_family, tmp_path, capsys):
    out = tmp_path / "sweep.json"
    assert main([
        "sweep", "--target", str(tiny_family["llama_target"]),
        "--draft", str(tiny_family["llama_draft"]), "-k", "1,2", "--reps", "1",
        "--warmup", "0", "--max-tokens", "6", "--prompt", "def add(a, b):", "--json", str(out),
    ]) == 0
    written = capsys.readouterr().out
    sweep = load_sweep(out)
    assert [c["label"] for c in sweep.cells] == ["plain", "draft k=1", "draft k=2"]
    assert main(["replay", str(out), "--headless"]) == 0
    replayed = capsys.readouterr().out
    # The same table and recommendations as the sweep printed when it ran.
    assert replayed.endswith(written) and "draft k=2" in written


@run_async
async def test_picking_a_family_target_fills_its_draft(tiny_family, tmp_path, monkeypatch):
    import shutil

    root = tmp_path / "cache" / "families" / "smollm2"
    shutil.copytree(tiny_family["llama_target"], root / "target")
    shutil.copytree(tiny_family["llama_draft"], root / "draft")
    monkeypatch.setenv("SPECDECK_CACHE_DIR", str(tmp_path / "cache"))
    from specdeck.engines.models import catalog

    # The families and the settings' folders only: not this machine's Hugging Face cache.
    monkeypatch.setattr(model_picker, "find_models",
                        lambda dirs=(), cache_dir=None, hub=True, on_problem=None:
                        catalog.find_models(dirs, hub=False, on_problem=on_problem))
    app = SettingsHost(compare_request(tiny_family["hybrid_target"]))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        picker = await open_picker(app, pilot, "target")
        names = [name for _, name in picker_rows(picker)]
        assert {"demo target", "demo draft", "smollm2 target", "smollm2 draft"} <= set(names)
        for _ in range(names.index("smollm2 target")):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.query_one("#target", Input).value == str(root / "target")
        assert app.screen.query_one("#draft", Input).value == str((root / "draft").resolve())
