"""The command line's rough edges, each as a person met it: defaults where an option is
left out, the first problem named first, a path never taken for text, no traceback
when a pipe closes early, the demo family listed, sweeps diffed by their settings, help
that shows defaults, and one unit for bytes."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from specdeck.cli import build_parser, main
from specdeck.engines.models.demo import demo_models
from specdeck.prompts import get_prompt, read_prompts
from specdeck.engines.core.errors import UserError
from helpers.sessions import document, sample_traces, sweep_cell, sweep_document

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specdeck", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, **kwargs)


def no_traceback(err: str) -> None:
    assert "Traceback" not in err and "Exception ignored" not in err, err


# -- compare ---------------------------------------------------------------------------


def test_compare_without_prompt_uses_the_default_prompt_headless_and_in_the_app(
        tiny_family, tmp_path, monkeypatch, capsys) -> None:
    models = ["--target", str(tiny_family["llama_target"]),
              "--draft", str(tiny_family["llama_draft"])]
    out = tmp_path / "out.json"
    assert main(["compare", "--headless", *models, "--max-tokens", "3", "--no-save",
                 "--json", str(out)]) == 0
    assert orjson.loads(out.read_bytes())["config"]["prompt"] == get_prompt().text

    import specdeck.tui

    opened = []
    monkeypatch.setattr(specdeck.tui, "run_app",
                        lambda source, **kw: opened.append(source.request) or [])
    assert main(["compare", *models]) == 0
    assert opened[0].prompt == get_prompt().text


def test_the_playground_refuses_to_start_without_a_terminal(tiny_family, tmp_path) -> None:
    """Started with its input and error redirected (a background job, cron, a pipe), the
    app had drawn into the file and spun a core until killed: one line and exit 2 now,
    for a live comparison and a saved session alike; the same line without a terminal
    on standard error alone."""
    models = ["--target", str(tiny_family["llama_target"])]
    saved = tmp_path / "s.json"
    saved.write_bytes(orjson.dumps(document(sample_traces())))
    line = ("specdeck: error: the playground needs a terminal, and standard input and "
            "error are not one here: add --headless to print instead")
    for args in (["compare", *models, "--strategies", "plain", "--prompt", "hi"],
                 ["replay", str(saved)]):
        done = run(*args, stdin=subprocess.DEVNULL)
        assert done.returncode == 2 and done.stderr.strip().splitlines() == [line], done.stderr
    from specdeck.tui.terminal import require_terminal

    class Terminal:
        def isatty(self) -> bool:
            return True

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdin", Terminal())
        patch.setattr(sys, "stderr", Terminal())
        require_terminal()  # both a terminal: it starts
        patch.setattr(sys, "stderr", tmp_path.joinpath("log").open("w"))
        with pytest.raises(UserError, match="standard error is not one here"):
            require_terminal()


def test_a_missing_target_is_named_before_the_missing_draft(tmp_path, capsys) -> None:
    assert main(["compare", "--headless", "--target", str(tmp_path / "nonexistent")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"specdeck: error: model not found: {tmp_path / 'nonexistent'} (no such "
                   "directory; a Hugging Face id looks like mlx-community/Qwen3-0.6B-4bit)"]
    assert main(["sweep", "--target", str(tmp_path / "nonexistent")]) == 2
    assert "model not found" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["path/that/does/not/exist.txt", "notes.md", "run.jsonl",
                                   "prompts/nothing"])
def test_a_prompt_that_looks_like_a_missing_file_is_an_error(value, tmp_path,
                                                             monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=f"no prompt file {value}"):
        read_prompts(value)
    # Text stays text: it has spaces, or no file ending and no separator.
    assert read_prompts("what is 1/2 of 4.txt?")[0].text == "what is 1/2 of 4.txt?"
    assert read_prompts("hello")[0].text == "hello"


def test_compare_says_a_missing_prompt_file_in_one_line(tmp_path, capsys) -> None:
    assert main(["compare", "--headless", "--target", str(tmp_path), "--strategies", "plain",
                 "--prompt", "path/that/does/not/exist.txt"]) == 2
    assert capsys.readouterr().err.startswith(
        "specdeck: error: no prompt file path/that/does/not/exist.txt")


# -- sweep -----------------------------------------------------------------------------


def test_a_sweep_prompt_of_6000_characters_is_text(tiny_family, monkeypatch, capsys) -> None:
    import specdeck.engines.runs.sweep as sweep

    seen = []
    monkeypatch.setattr(sweep, "run_sweep",
                        lambda request, **kw: (seen.append(request) or [], True))
    text = "word " * 1200
    model = str(tiny_family["llama_target"])  # checked, never loaded
    assert main(["sweep", "--target", model, "--draft", model, "--prompt", text]) == 0
    assert seen[0].prompts[0].text == text
    no_traceback(capsys.readouterr().err)


def test_a_sweep_replayed_into_a_closed_pipe_prints_no_traceback(tmp_path) -> None:
    doc = sweep_document()
    doc["recommendations"] = [f"line {i}" for i in range(30_000)]  # printed after the table
    long_advice = tmp_path / "sweep-advice.json"
    long_advice.write_bytes(orjson.dumps(doc))
    doc["cells"] = [sweep_cell(f"prompt {i}", "draft", 1.0, k=2) for i in range(3000)]
    long_table = tmp_path / "sweep-table.json"
    long_table.write_bytes(orjson.dumps(doc))
    session = ROOT / "sessions/examples/code-all-strategies.json"
    # The reader leaves once it has read up to a line (as `head` does): inside the
    # recommendations, printed after the table; inside the table; inside a session.
    for target, last in ((long_advice, b"line 0\n"), (long_table, b"prompt 5"),
                         (session, b"plain")):
        proc = subprocess.Popen([sys.executable, "-m", "specdeck", "replay", str(target),
                                 "--headless"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        read = b""
        while last not in read:
            chunk = proc.stdout.read1(4096)
            assert chunk, read[-500:]  # the output ended before that line
            read += chunk
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) != 0
        no_traceback(err)


def test_diff_of_two_sweeps_names_the_settings_that_differ_and_missing_cells(
        tmp_path, capsys) -> None:
    a, b = sweep_document(), sweep_document()
    a["config"] = {"max_tokens": 128, "reps": 5}
    b["config"] = {"max_tokens": 64, "reps": 5}
    b["cells"] = b["cells"][:-1]  # prose mtp depth=2 measured in a only
    paths = []
    for name, doc in (("a", a), ("b", b)):
        paths.append(tmp_path / f"sweep-{name}.json")
        paths[-1].write_bytes(orjson.dumps(doc))
    assert main(["diff", *map(str, paths)]) == 1
    out = capsys.readouterr().out
    assert "settings that differ" in out and "config.max_tokens" in out
    assert "config.reps" not in out
    row = next(line for line in out.splitlines() if "depth=2" in line)
    assert "missing in b" in row and "DIFFERS" not in out
    assert main(["diff", *map(str, paths), "--json"]) == 1
    changes = orjson.loads(capsys.readouterr().out)["changes"]
    assert changes == [{"path": "config.max_tokens", "a": 128, "b": 64}]


# -- models ----------------------------------------------------------------------------


def test_models_lists_the_demo_family_and_finds_models_two_levels_down(
        tiny_family, tmp_path, capsys) -> None:
    assert demo_models() is not None
    assert main(["models", "--no-cache", "--json"]) == 0
    paths = {Path(m["path"]).resolve() for m in orjson.loads(capsys.readouterr().out)}
    assert Path(demo_models().target).resolve() in paths
    assert Path(demo_models().draft).resolve() in paths
    # A folder of families: each model is two levels down.
    families = tmp_path / "families"
    (families / "llama").mkdir(parents=True)
    for name in ("llama_target", "llama_draft"):
        (families / "llama" / name).symlink_to(tiny_family[name], target_is_directory=True)
    assert main(["models", "--no-cache", "--json", str(families)]) == 0
    names = {Path(m["path"]).name for m in orjson.loads(capsys.readouterr().out)}
    assert names == {"llama_target", "llama_draft"}
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    assert main(["models", "--no-cache", str(tmp_path / "empty")]) == 2
    assert "its subfolders or theirs" in capsys.readouterr().err


# -- help, version, units --------------------------------------------------------------


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_with_a_default_shows_it_in_help() -> None:
    parser = build_parser()
    for name, sub in subparsers(parser).items():
        formatter = sub._get_formatter()
        for action in sub._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            if any(action.default is none
                   for none in (None, False, argparse.SUPPRESS)) or isinstance(
                    action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            shown = formatter._get_help_string(action) % {"default": action.default}
            assert "default" in shown, (name, action.option_strings, shown)


@pytest.mark.parametrize("command", ["compare", "sweep", "calibrate"])
def test_the_models_named_before_a_command_are_the_ones_it_runs(command: str) -> None:
    """``specdeck --family smollm2 compare`` ran the demo models: the command's own
    ``--family`` (default None) overwrote the one given before its name."""
    parser = build_parser()
    before = parser.parse_args(["--family", "smollm2", command])
    after = parser.parse_args([command, "--family", "smollm2"])
    neither = parser.parse_args([command])
    assert before.family == after.family == "smollm2" and neither.family is None
    assert parser.parse_args(["--family", "smollm2", command, "--family", "demo"]).family == "demo"
    assert parser.parse_args(["--dtype", "native", command]).dtype == "native"
    assert parser.parse_args([command, "--dtype", "native"]).dtype == "native"
    assert parser.parse_args([command]).dtype == "fast"


@pytest.mark.parametrize("words, says", [
    (["--family", "demo", "--prompt", "/tmp/x.txt"], "--prompt is an option of a command: "
     "specdeck compare --prompt /tmp/x.txt (or sweep)"),
    (["--target", "my model", "compare"], "--target is an option of a command: "
     "specdeck compare --target 'my model' (or sweep, calibrate)"),
    (["--family", "demo", "demo"], "argument command: invalid choice: 'demo'"),
    (["--headless", "x.txt"], "argument command: invalid choice: 'x.txt'"),
    (["--headless"], "--headless is an option of a command: specdeck compare --headless "
     "(or replay)"),
    (["--family", "demo", "--quiet", "compare"], "--quiet is an option of a command: "
     "specdeck compare --quiet"),
    (["--headless", "replay", "s.json"], "--headless is an option of a command: "
     "specdeck replay --headless (or compare)"),
    (["--max-tokens=5"], "--max-tokens is an option of a command: specdeck compare "
     "--max-tokens=5 (or sweep)"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_a_commands_option_before_any_command_names_its_commands(words, says, capsys) -> None:
    """``specdeck --prompt x.txt`` said "invalid choice: 'x.txt'", which reads as if the
    file were wrong, and ``specdeck --headless`` only "unrecognized arguments"; a word
    that follows no command's option (or a flag) is still just no command's name."""
    with pytest.raises(SystemExit) as exit:
        main(words)
    assert exit.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"specdeck: error: {says}")


def test_version_and_the_top_help_say_what_bare_specdeck_does() -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("specdeck ")
    assert version.stdout.split()[1][0].isdigit()
    top = run("--help").stdout
    assert ("Bare specdeck opens the playground: on the smollm2 family once `specdeck "
            "fetch smollm2` has run, else on the built-in demo models") in " ".join(
        top.split())


def test_the_diff_shows_byte_counts_in_binary_units(tmp_path, capsys) -> None:
    a, b = document(sample_traces()), document(sample_traces())
    a["config"]["memory_estimates"] = {"draft": {"total": 31219712, "kv_cache": 1572864}}
    b["config"]["memory_estimates"] = {"draft": {"total": 31453184, "kv_cache": 1572864}}
    b["machine"] = {**b["machine"], "memory_bytes": 2**35}
    paths = []
    for name, doc in (("a", a), ("b", b)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_bytes(orjson.dumps(doc))
    main(["diff", *map(str, paths)])
    out = capsys.readouterr().out
    # The estimates are worked out from the settings: one line, not a row each.
    assert "memory_estimates" not in out and "31219712" not in out
    assert ("and 1 value worked out from the settings differs (memory estimates): --json "
            "lists them") in out
    row = next(line for line in out.splitlines() if "machine.memory_bytes" in line)
    assert "16.0 GiB" in row and "32.0 GiB" in row
