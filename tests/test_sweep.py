"""Sweeps: robust statistics on known timings, cell summaries by hand, and a real sweep on
the tiny models writing valid JSON and a chart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import orjson
import pytest

from specdeck.engines.runs import sweep
from specdeck.engines.core.events import Done, Prefill, Round
from specdeck.engines.core.stats import compute_stats, median, robust_cv
from specdeck.engines.core.requests import CellSpec
from specdeck.engines.runs.sweep import recommendations, summarise_cell
from specdeck.sessions.chart import series_of, speedup_chart_svg
from specdeck.cli import main


def test_median_and_robust_cv_known_answers() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    # median 101; deviations 1, 0, 2, 1, 49 -> MAD 1: the outlier barely counts
    assert robust_cv([100, 101, 99, 102, 150]) == pytest.approx(1.4826 / 101)
    assert robust_cv([5.0, 5.0, 5.0]) == 0.0
    with pytest.raises(ValueError):
        median([])


def run_events(tokens_per_round: list[tuple[list[int], int]], seconds: float, peak: int):
    """A run whose rounds draft ``drafted`` and accept ``accepted``; evenly spaced in time."""
    events = [Prefill(4, 0.1, 0.1)]
    n = len(tokens_per_round)
    for i, (drafted, accepted) in enumerate(tokens_per_round):
        tokens = drafted[:accepted] + [7]
        events.append(Round(
            index=i, drafted=drafted, accepted=accepted, tokens=tokens,
            end="correction" if accepted < len(drafted) else ("bonus" if drafted else "target"),
            pieces=[""] * len(tokens), rejected_pieces=[""] * (len(drafted) - accepted),
            draft_seconds=0.01 * len(drafted), verify_seconds=seconds / n - 0.01 * len(drafted),
            t=0.1 + seconds * (i + 1) / n,
        ))
    events.append(Done("length", sum(a + 1 for _, a in tokens_per_round), 0.1 + seconds, peak))
    return compute_stats(events)


def test_summarise_cell_by_hand() -> None:
    spec_plain = CellSpec("code", "plain", 0.0)
    plain_runs = [run_events([([], 0)] * 10, s, 1000) for s in (1.0, 1.0, 1.25)]
    plain = summarise_cell(spec_plain, "code", plain_runs, None, True, 0.05)
    assert plain.median_tokens_per_s == pytest.approx(10.0)
    assert plain.speedup == 1.0 and plain.why == "baseline"

    spec = CellSpec("code", "draft", 0.0, k=2)
    # 5 rounds: accepted 2,2,1,0,2 of 2 -> 7/10 accepted, 12 tokens
    rounds = [([1, 2], 2), ([1, 2], 2), ([1, 2], 1), ([1, 2], 0), ([1, 2], 2)]
    runs = [run_events(rounds, s, 1500) for s in (0.8, 0.8, 0.8)]
    cell = summarise_cell(spec, "code", runs, plain, True, 0.05)
    assert cell.acceptance_rate == pytest.approx(0.7)
    assert cell.mean_accepted == pytest.approx(1.4)
    assert cell.tokens_per_round == pytest.approx(12 / 5)
    assert cell.median_tokens_per_s == pytest.approx(12 / 0.8)
    assert cell.speedup == pytest.approx(1.5)
    assert cell.cv == 0.0 and not cell.noisy
    assert cell.acceptance_by_position == pytest.approx([4 / 5, 3 / 5])
    # survival 4/5 and 3/5: E = 1 + 1.4 tokens per verify pass
    assert cell.expected_tokens_per_round == pytest.approx(2.4)
    assert cell.memory_over_plain_bytes == 500
    # verify per round 0.8 / 5 - 0.02 = 0.14 s and a draft step 0.01 s, against a plain
    # step of 0.1 s: a round costs 2 x 0.1 + 1.4 plain steps.
    assert cell.verify_cost_vs_plain == pytest.approx(1.4)
    assert cell.draft_cost_vs_plain == pytest.approx(0.1)
    assert cell.predicted_speedup == pytest.approx(2.4 / 1.6)
    assert cell.textbook_speedup == pytest.approx(2.4 / 1.2)
    assert "70% accepted" in cell.why and "predicted 1.50x, measured 1.50x" in cell.why
    assert "2.40 tokens per verify pass" in cell.why
    assert "a draft step costs 0.10 plain steps" in cell.why
    assert ("the textbook's 2.00x takes a verify pass of 3 tokens as one plain step; "
            "here it costs 1.40 plain steps") in cell.why


def test_noisy_flag_and_recommendations() -> None:
    spec_plain = CellSpec("prose", "plain", 0.0)
    plain = summarise_cell(spec_plain, "prose", [run_events([([], 0)] * 10, 1.0, 1)] * 3, None, True, 0.05)
    slow = [run_events([([1, 2, 3, 4], 0)] * 10, s, 1) for s in (2.0, 3.0, 2.1)]
    cell = summarise_cell(CellSpec("prose", "draft", 0.0, k=4), "prose", slow, plain, True, 0.05)
    assert cell.noisy and cell.speedup < 1
    lines = recommendations([plain, cell])
    assert any("never beat plain" in line and "prose" in line for line in lines)
    bad = summarise_cell(CellSpec("prose", "draft", 0.0, k=2), "prose", slow, plain, False, 0.05)
    assert bad.why.startswith("output differs")
    assert any("differs from plain" in line for line in recommendations([plain, bad]))


def test_sweep_on_tiny_models_writes_json_and_chart(tiny_family, tmp_path, capsys) -> None:
    out = tmp_path / "sweep.json"
    code = main([
        "sweep", "--target", str(tiny_family["llama_target"]),
        "--draft", str(tiny_family["llama_draft"]), "--strategies", "draft,ngram",
        "-k", "1,2,4", "--reps", "1", "--warmup", "0", "--max-tokens", "12",
        "--prompt", "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return",
        "--json", str(out),
    ])
    assert code == 0, capsys.readouterr().err
    doc = orjson.loads(out.read_bytes())
    assert doc["kind"] == "sweep" and doc["partial"] is False
    labels = [c["label"] for c in doc["cells"]]
    assert labels == ["plain", "draft k=1", "draft k=2", "draft k=4",
                      "ngram n=3 k=1", "ngram n=3 k=2", "ngram n=3 k=4"]
    for cell in doc["cells"]:
        assert cell["correct"] is True
        for key in ("speedup", "cv", "acceptance_rate", "median_tokens_per_s", "why"):
            assert key in cell
    assert doc["recommendations"]
    svg = ET.fromstring(out.with_suffix(".svg").read_text())
    assert svg.tag.endswith("svg")
    text = out.with_suffix(".svg").read_text()
    assert "break-even" in text and "draft" in text and "ngram n=3" in text
    out, err = capsys.readouterr()
    assert "specdeck sweep" in out
    # Progress in a log (stderr is not a terminal here): plain lines, the last one whole.
    assert "\r" not in err and "\033" not in err
    assert "specdeck sweep: 7/7 runs" in err.splitlines()[-2]


def test_a_sweep_loads_its_models_in_the_dtype_named_before_it(
        tiny_family, tmp_path, monkeypatch, capsys) -> None:
    """``specdeck --dtype native sweep`` ran the fast dtype: sweep took no --dtype."""
    from specdeck.engines.models.loading import ModelStore

    loaded, get = [], ModelStore.get

    def recording_get(self, source, revision=None, dtype="fast"):
        loaded.append(dtype)
        return get(self, source, revision, dtype)

    monkeypatch.setattr(ModelStore, "get", recording_get)
    out = tmp_path / "sweep.json"
    code = main([
        "--dtype", "native", "sweep", "--target", str(tiny_family["llama_target"]),
        "--draft", str(tiny_family["llama_draft"]), "-k", "1", "--reps", "1",
        "--warmup", "0", "--max-tokens", "4", "--prompt", "def add(a, b):", "--json", str(out),
    ])
    assert code == 0, capsys.readouterr().err
    assert len(loaded) >= 2 and set(loaded) == {"native"}
    assert orjson.loads(out.read_bytes())["config"]["dtype"] == "native"


def test_sweep_reports_a_mismatch_as_a_correctness_failure(tiny_family, tmp_path, monkeypatch, capsys) -> None:
    real = sweep.run_strategy

    def corrupt(name, models, ids, settings, *args, **kwargs):
        for event in real(name, models, ids, settings, *args, **kwargs):
            if name == "draft" and isinstance(event, Round) and event.index == 2:
                event.tokens = [t + 1 for t in event.tokens]
            yield event

    monkeypatch.setattr(sweep, "run_strategy", corrupt)
    out = tmp_path / "sweep.json"
    code = main([
        "sweep", "--target", str(tiny_family["llama_target"]),
        "--draft", str(tiny_family["llama_draft"]), "-k", "2", "--reps", "1",
        "--warmup", "0", "--max-tokens", "10", "--prompt", "def f(x):", "--json", str(out),
    ])
    assert code == 1
    cells = orjson.loads(out.read_bytes())["cells"]
    assert [c["correct"] for c in cells] == [True, False]
    assert cells[1]["why"].startswith("output differs")
    assert series_of(cells) == {}  # a failed cell is not plotted
    assert "polyline" not in speedup_chart_svg(cells)


def test_a_sweep_without_json_is_saved_with_the_sessions(tiny_family, tmp_path, monkeypatch,
                                                         capsys) -> None:
    from specdeck.sessions.session import SCHEMA_VERSION
    from specdeck.sessions.sweep_file import load_sweep

    monkeypatch.setenv("SPECDECK_SESSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(sweep, "run_sweep", lambda request, **kw: ([], True))
    model = str(tiny_family["llama_target"])  # checked, never loaded
    assert main(["sweep", "--target", model, "--draft", model, "--prompt", "p"]) == 0
    saved = sorted(tmp_path.glob("sweep-*.json"))
    assert len(saved) == 1 and saved[0].with_suffix(".svg").is_file()
    loaded = load_sweep(saved[0])
    assert not loaded.partial and loaded.cells == []
    assert orjson.loads(saved[0].read_bytes())["schema_version"] == SCHEMA_VERSION
    assert loaded.config["sampling"]["seed"] == 0 and "seed" not in loaded.config
    assert f"wrote {saved[0]}" in capsys.readouterr().err


def _stderr_until(proc, text: str, timeout: float = 240) -> str:
    """Read the sweep's stderr (a progress line a run, as it is not a terminal) until
    ``text`` shows."""
    seen, deadline = "", time.monotonic() + timeout
    while text not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen
        seen += os.read(proc.stderr.fileno(), 4096).decode(errors="replace")
    return seen


@pytest.mark.parametrize("gap", [0.0, 0.05, 0.3])
def test_an_interrupted_sweep_exits_130_and_two_ctrl_c_leave_valid_files(
        tiny_family, tmp_path, gap) -> None:
    """Ctrl+C once stops the sweep and keeps the finished prompt groups; a second one,
    whenever it lands, never leaves a half-written file."""
    out = tmp_path / "sweep.json"
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"name": "a", "prompt": "def add(a, b):"}\n'
                       '{"name": "b", "prompt": "def sub(a, b):"}\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "specdeck", "sweep", "--target", str(tiny_family["llama_target"]),
         "--draft", str(tiny_family["llama_draft"]), "-k", "1,2", "--reps", "2",
         "--warmup", "0", "--max-tokens", "120", "--prompt", str(prompts),
         "--json", str(out)],
        stderr=subprocess.PIPE, stdout=subprocess.PIPE,
        env={**os.environ, "SPECDECK_NO_OPENBLAS": "1"},
    )
    try:
        _stderr_until(proc, "7/12 runs")  # the first prompt group (6 runs) is done
        proc.send_signal(signal.SIGINT)
        time.sleep(gap)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    # 130, or killed by the second SIGINT once the files were written (a shell reports
    # that as 130 too).
    assert proc.returncode in (130, -signal.SIGINT), stderr.decode()
    assert b"Traceback" not in stderr
    doc = orjson.loads(out.read_bytes())
    assert doc["partial"] is True and [c["prompt"] for c in doc["cells"]] == ["a"] * 3
    ET.fromstring(out.with_suffix(".svg").read_text())
    assert b"specdeck sweep" in stdout  # the table of what finished
