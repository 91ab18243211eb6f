"""``specdeck replay``, ``specdeck diff`` and saving from ``specdeck compare``: a real
recording round-trips, replay needs no mlx, bad files end in one line, Ctrl+C saves a
partial run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import orjson
import pytest

from specdeck.engines.runs.compare import run_compare
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.core.config import DecodeSettings
from specdeck.cli import main
from specdeck.sessions.diff import diff_sessions
from specdeck.sessions.session import SCHEMA_PATH, build_document, load_session, save_document
from helpers.sessions import MACHINE, NO_MLX, config, document, plain_trace, sample_traces
from specdeck.safe_text.plain import printable

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "def add(a, b):\n    return"


def specdeck(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPECDECK_NO_OPENBLAS": "1"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def recorded(tiny_family, tmp_path_factory) -> tuple[Path, dict]:
    """A real greedy plain + draft run of the tiny pair, saved; and its traces."""
    request = CompareRequest(
        target=str(tiny_family["llama_target"]), draft=str(tiny_family["llama_draft"]),
        strategies=["plain", "draft"], prompt=PROMPT, warmup_tokens=0,
        settings=DecodeSettings(max_tokens=24, num_draft_tokens=3, alternatives=3,
                                stop_at_eos=False),
    )
    result = run_compare(request)
    run_config = {**config(["plain", "draft"]), "prompt": PROMPT,
                  "settings": request.settings.to_dict()}
    doc = build_document(run_config, MACHINE, result.traces)
    path = tmp_path_factory.mktemp("recorded") / "run.json"
    save_document(path, doc)
    return path, result.traces


def test_a_recording_round_trips_through_replay(recorded, capsys) -> None:
    path, traces = recorded
    session = load_session(path)
    stats = session.stats()
    saved = orjson.loads(path.read_bytes())
    for name, trace in traces.items():
        assert session.traces[name].events == trace.events
        assert session.traces[name].tokens == trace.tokens
        assert session.traces[name].text == trace.text
        assert stats[name] == saved["strategies"][name]["stats"]
        assert any(r.alternatives for r in session.traces[name].rounds)

    assert main(["replay", str(path), "--headless"]) == 0
    out = capsys.readouterr().out
    for name, trace in traces.items():
        assert printable(trace.text).strip() in out  # control characters shown
        assert f"{name} (24 tokens, length)" in out
    assert f"{stats['draft']['tokens_per_s']:.1f}" in out
    assert f"{stats['draft']['acceptance_rate']:.1%}" in out


def test_greedy_draft_equals_plain_in_one_line(recorded, capsys) -> None:
    path, _ = recorded
    assert main(["diff", str(path)]) == 0
    assert "plain vs draft: identical (24 tokens)" in capsys.readouterr().out
    session = load_session(path)
    assert diff_sessions(session, session).identical


def test_replay_opens_the_app_on_the_saved_traces(recorded, monkeypatch) -> None:
    from specdeck import tui
    opened = {}
    monkeypatch.setattr(tui, "run_app",
                        lambda source, **kwargs: opened.update(kwargs, source=source))
    path, traces = recorded
    assert main(["replay", str(path)]) == 0
    assert {n: t.events for n, t in opened["source"].traces.items()} == {
        n: t.events for n, t in traces.items()}
    assert opened["source"].settings == DecodeSettings(
        max_tokens=24, num_draft_tokens=3, alternatives=3, stop_at_eos=False)
    assert opened["title"] == "replay: run.json"


HEAVY = ("mlx", "mlx_lm", "optiq", "textual")


def test_replay_imports_no_mlx(recorded) -> None:
    """The real command, with the interpreter listing every module it imports."""
    path, traces = recorded
    result = specdeck("-X", "importtime", "-m", "specdeck", "replay", str(path), "--headless")
    assert result.returncode == 0, result.stderr
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "specdeck.sessions.session" in imported  # the listing works
    assert not {m for m in imported if m.split(".")[0] in HEAVY}
    assert printable(traces["plain"].text).strip() in result.stdout


def test_replay_and_diff_work_where_mlx_is_not_installed(recorded) -> None:
    path, traces = recorded
    replay = specdeck("-c", NO_MLX, "replay", str(path), "--headless")
    assert replay.returncode == 0, replay.stderr
    assert printable(traces["draft"].text).strip() in replay.stdout
    diff = specdeck("-c", NO_MLX, "diff", str(path), "--json")
    assert diff.returncode == 0, diff.stderr
    assert orjson.loads(diff.stdout)["identical"] is True


# --- one clear line for every bad file ------------------------------------------------


def _bad_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    good = orjson.dumps(document(sample_traces()))
    newer = orjson.loads(good)
    newer["schema_version"] = 7
    files = {
        "missing": (tmp / "nope.json", b"", "no such file"),
        "not json": (tmp / "notes.json", b"<html>", "not JSON"),
        "truncated": (tmp / "cut.json", good[: len(good) // 2], "truncated"),
        "newer": (tmp / "new.json", orjson.dumps(newer), "newer specdeck (schema 7)"),
        "corrupt": (tmp / "bad.json", good.replace(b'"accepted":2', b'"accepted":9', 1),
                    "accepted (9) is outside 0..2"),
        "other json": (tmp / "pkg.json", b'{"name": "specdeck"}', "not a specdeck session"),
    }
    for name, (path, data, _) in files.items():
        if name != "missing":
            path.write_bytes(data)
    return {name: (path, needle) for name, (path, _, needle) in files.items()}


def _one_line_error(code: int, err: str, needle: str) -> None:
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specdeck: error: "), err
    assert needle in lines[0]


@pytest.mark.parametrize("command", ["replay", "diff"])
@pytest.mark.parametrize("case", ["missing", "not json", "truncated", "newer", "corrupt",
                                  "other json"])
def test_bad_files_end_in_one_line(tmp_path, capsys, command: str, case: str) -> None:
    path, needle = _bad_files(tmp_path)[case]
    args = [command, str(path)] + (["--headless"] if command == "replay" else [])
    code = main(args)
    captured = capsys.readouterr()
    _one_line_error(code, captured.err, needle)
    assert captured.out == ""


def test_a_bad_file_in_a_real_process_prints_no_traceback(tmp_path) -> None:
    path, needle = _bad_files(tmp_path)["truncated"]
    result = specdeck("-m", "specdeck", "replay", str(path), "--headless")
    _one_line_error(result.returncode, result.stderr, needle)


def test_text_from_the_file_is_printed_literally(tmp_path, capsys) -> None:
    """Prompts, names and errors may hold rich markup look-alikes: printed as they are."""
    traces = {"p[/]": plain_trace("p[/]", [1, 2]), "[bold]q": plain_trace("[bold]q", [1, 3])}
    doc = document(traces)
    doc["config"]["prompt"] = "x = a[/] + [red]b"
    doc["created"] = "[/]"
    doc["strategies"]["p[/]"]["done"]["error"] = "IndexError: [/i] out of range"
    a = tmp_path / "a[/].json"
    save_document(a, doc)
    assert main(["replay", str(a), "--headless"]) == 0
    out = capsys.readouterr().out
    for literal in ("x = a[/] + [red]b", "p[/] (2 tokens", "[bold]q", "[/i] out of range"):
        assert literal in out
    assert main(["diff", str(a), "--pair", "p[/]", "[bold]q"]) == 1
    assert "p[/] vs [bold]q: first divergence at token 1" in capsys.readouterr().out


# --- diff on the command line -----------------------------------------------------------


def _save(tmp_path: Path, name: str, tokens: list[int]) -> Path:
    path = tmp_path / name
    save_document(path, document({"plain": plain_trace("plain", tokens)}))
    return path


def test_diff_exit_status_and_json(tmp_path, capsys) -> None:
    a = _save(tmp_path, "a.json", [1, 2, 3, 4])
    b = _save(tmp_path, "b.json", [1, 2, 9, 4])
    assert main(["diff", str(a), str(a.with_name("a.json"))]) == 2  # one strategy only
    capsys.readouterr()
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "plain: first divergence at token 2 (' w3' vs ' w9')" in out
    assert "tokens_per_s" in out and "b / a" in out
    assert main(["diff", str(a), str(b), "--json", "--strategy", "plain"]) == 1
    data = orjson.loads(capsys.readouterr().out)
    assert data["panes"][0]["first_divergence"] == 2
    assert main(["diff", str(a), str(b), "--pair", "plain", "draft"]) == 2
    assert "b has no strategy 'draft'" in capsys.readouterr().err


def test_one_session_pane_against_pane(tmp_path, capsys) -> None:
    path = tmp_path / "s.json"
    save_document(path, document(sample_traces()))
    assert main(["diff", str(path), "--pair", "draft", "plain", "--json"]) == 0
    pane = orjson.loads(capsys.readouterr().out)["panes"][0]
    assert (pane["a_strategy"], pane["b_strategy"], pane["identical"]) == ("draft", "plain", True)
    assert main(["diff", str(path), "--strategy", "plain"]) == 2
    assert "use --pair" in capsys.readouterr().err


# --- saving from compare --------------------------------------------------------------


def _compare_args(tiny_family, *extra: str) -> list[str]:
    return ["compare", "--headless", "--target", str(tiny_family["llama_target"]),
            "--draft", str(tiny_family["llama_draft"]), "--strategies", "plain,draft",
            "--prompt", PROMPT, "--max-tokens", "12", "--warmup-tokens", "0", *extra]


def test_compare_saves_every_run(tiny_family, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPECDECK_SESSIONS_DIR")  # set for every test by conftest.py
    assert main(_compare_args(tiny_family)) == 0
    (saved,) = (tmp_path / "sessions").glob("*.json")
    assert saved.name.endswith("_plain-draft.json")
    assert f"saved {Path('sessions') / saved.name}" in capsys.readouterr().err
    session = load_session(saved)
    assert not session.partial and session.strategies == ["plain", "draft"]
    assert session.config["settings"]["max_tokens"] == 12
    schema = jsonschema.Draft202012Validator(orjson.loads(SCHEMA_PATH.read_bytes()))
    schema.validate(orjson.loads(saved.read_bytes()))  # the real machine and config too

    elsewhere = tmp_path / "elsewhere"
    assert main(_compare_args(tiny_family, "--sessions-dir", str(elsewhere))) == 0
    assert len(list(elsewhere.glob("*.json"))) == 1
    monkeypatch.setenv("SPECDECK_SESSIONS_DIR", str(tmp_path / "from-env"))
    assert main(_compare_args(tiny_family)) == 0
    assert len(list((tmp_path / "from-env").glob("*.json"))) == 1
    assert main(_compare_args(tiny_family, "--no-save")) == 0
    assert sorted(p.parent.name for p in tmp_path.rglob("*.json")) == [
        "elsewhere", "from-env", "sessions",
    ]


def test_ctrl_c_during_compare_saves_a_partial_session(tiny_family, tmp_path) -> None:
    sessions = tmp_path / "sessions"
    args = _compare_args(tiny_family, "--sessions-dir", str(sessions))
    args[args.index("--max-tokens") + 1] = "20000"  # far more than runs before Ctrl+C
    env = {**os.environ, "SPECDECK_NO_OPENBLAS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "specdeck", *args, "--ignore-eos"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    before = []
    try:
        for line in proc.stderr:
            before.append(line)
            if "running plain" in line:
                break
        assert proc.poll() is None, "".join(before)
        proc.send_signal(signal.SIGINT)  # mid-run: the run stops after its current round
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    err = "".join(before) + err
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "(partial)" in err
    (saved,) = sessions.glob("*.json")
    assert saved.name.endswith("_plain_partial.json")
    session = load_session(saved)
    assert session.partial and session.strategies == ["plain"]  # draft never started
    plain = session.traces["plain"]
    assert plain.done.reason == "cancelled" and plain.prefill is not None
    assert plain.done.generated_tokens == len(plain.tokens) < 20000
    assert session.config["strategies"] == ["plain", "draft"]
