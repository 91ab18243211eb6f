"""Files and values from others are bounded and checked before anything is built from them.

A model folder never runs code (an ``auto_map`` tokenizer with ``y`` on stdin), a session
path that is a device, a FIFO or too large ends in one line (and never hangs), a config
claiming 100,000 layers is refused at once, a prompt longer than the model's context and
a run far beyond the machine's memory are refused, out-of-range values and NaNs are named.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from helpers.sessions import document, sample_traces
from specdeck.cli import main
from specdeck.engines.models.catalog import describe_dir
from specdeck.engines.core.errors import ModelError
from specdeck.engines.core.files import MAX_FILE_BYTES
from specdeck.engines.measure.memory import MemoryEstimate, check_headroom
from specdeck.sessions.session import save_document
from specdeck.commands.sessions import file_size

ROOT = Path(__file__).resolve().parent.parent


def specdeck(*args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specdeck", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, "SPECDECK_NO_OPENBLAS": "1"})


def one_line(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specdeck: error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def model_copy(family: dict, tmp_path: Path, name: str = "model") -> Path:
    path = tmp_path / name
    shutil.copytree(family["llama_target"], path)
    return path


def edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


# --- a model folder never runs code ---------------------------------------------------------


EVIL = """
from pathlib import Path
Path(__file__).with_name("RAN").write_text("the model's code ran")
from transformers import PreTrainedTokenizerFast
class EvilTokenizer(PreTrainedTokenizerFast):
    pass
"""


def custom_code_model(family, tmp_path, where: str) -> Path:
    path = model_copy(family, tmp_path)
    (path / "evil_tok.py").write_text(EVIL)
    auto_map = {"AutoTokenizer": ["evil_tok.EvilTokenizer", "evil_tok.EvilTokenizer"]}
    if where == "tokenizer":
        edit_json(path / "tokenizer_config.json", auto_map=auto_map,
                  tokenizer_class="EvilTokenizer")
    else:
        edit_json(path / "config.json", auto_map={"AutoConfig": "evil_tok.Config"})
    return path


@pytest.mark.parametrize("where", ["tokenizer", "config"])
def test_a_model_that_ships_code_is_refused_even_with_y_on_stdin(tiny_family, tmp_path,
                                                                 where) -> None:
    path = custom_code_model(tiny_family, tmp_path, where)
    result = specdeck("compare", "--headless", "--target", str(path), "--strategies",
                      "plain", "--prompt", "x", "--no-save", stdin="y\ny\ny\n")
    one_line(result.returncode, result.stderr, "auto_map", "never runs a model's own code")
    assert not (path / "RAN").exists()
    assert "[y/N]" not in result.stdout + result.stderr


CHILD = """
import sys
from pathlib import Path
import specdeck.engines.models.catalog as catalog
import specdeck.engines.models.loading as loading
catalog.refuse_custom_code = lambda path: None  # the check off: transformers must say no
try:
    loading.load_tokenizer(catalog.resolve(sys.argv[1]))
except Exception as exc:
    print(type(exc).__name__, str(exc)[:200])
"""


def test_without_the_check_transformers_is_still_told_no(tiny_family, tmp_path) -> None:
    """Every tokenizer load passes trust_remote_code=False: with specdeck's own refusal
    switched off, transformers refuses (it does not ask) and the code never runs."""
    path = custom_code_model(tiny_family, tmp_path, "tokenizer")
    result = subprocess.run([sys.executable, "-c", CHILD, str(path)], input="y\ny\n",
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert not (path / "RAN").exists(), result.stdout + result.stderr
    assert result.stdout.startswith("ModelError"), result.stdout + result.stderr
    assert "[y/N]" not in result.stdout + result.stderr


# --- model configs --------------------------------------------------------------------------


def test_a_config_claiming_100000_layers_is_refused_at_once(tiny_family, tmp_path) -> None:
    path = model_copy(tiny_family, tmp_path)
    edit_json(path / "config.json", num_hidden_layers=100_000)
    started = time.perf_counter()
    with pytest.raises(ModelError, match="num_hidden_layers is 100000") as refused:
        describe_dir(path)
    assert time.perf_counter() - started < 0.5
    assert len(str(refused.value)) < 300
    result = specdeck("compare", "--headless", "--target", str(path), "--strategies", "plain",
                      "--prompt", "x", "--no-save")
    line = one_line(result.returncode, result.stderr, "num_hidden_layers is 100000")
    assert len(line) < 300


@pytest.mark.parametrize(("change", "needle"), [
    ({"hidden_size": 10**9}, "hidden_size is 1000000000"),
    ({"vocab_size": -1}, "vocab_size is -1"),
    ({"num_attention_heads": "4"}, "num_attention_heads is '4'"),
    ({"text_config": {"num_hidden_layers": 5000}}, "num_hidden_layers is 5000"),
    ({"mlx_lm_extra_tensors": {"mtp_file": "../../etc/passwd"}}, "inside the model's folder"),
])
def test_absurd_configs_are_named(tiny_family, tmp_path, change, needle) -> None:
    path = model_copy(tiny_family, tmp_path)
    edit_json(path / "config.json", **change)
    with pytest.raises(ModelError, match="config.json") as refused:
        describe_dir(path)
    assert needle in str(refused.value)


def test_nan_in_a_config_is_named(tiny_family, tmp_path) -> None:
    path = model_copy(tiny_family, tmp_path)
    text = (path / "config.json").read_text().replace('"rms_norm_eps": 1e-06', '"rms_norm_eps": NaN')
    (path / "config.json").write_text(text)
    with pytest.raises(ModelError, match="NaN is not a number JSON allows"):
        describe_dir(path)


@pytest.mark.parametrize(("name", "kind"), [
    ("model.safetensors", "fifo"), ("model.safetensors", "zero"), ("model.safetensors", "dir"),
    ("config.json", "fifo"), ("config.json", "zero"),
])
def test_model_files_that_are_not_files_end_in_one_line(tiny_family, tmp_path, name,
                                                        kind) -> None:
    path = model_copy(tiny_family, tmp_path)
    (path / name).unlink(missing_ok=True)
    {"fifo": os.mkfifo, "zero": lambda p: os.symlink("/dev/zero", p),
     "dir": os.mkdir}[kind](path / name)
    result = specdeck("models", str(path), "--no-cache", timeout=60)
    assert "Traceback" not in result.stderr and result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"specdeck: error: {path}") or str(path) in line, line
    assert "not a regular file" in line or "no config.json" in line, line


# --- session files --------------------------------------------------------------------------


@pytest.mark.parametrize(("make", "needle"), [
    (lambda p: os.symlink("/dev/zero", p), "is a character device (like /dev/zero)"),
    (os.mkfifo, "is a FIFO (named pipe), not a regular file"),
])
@pytest.mark.parametrize("command", ["replay", "diff"])
def test_a_device_or_a_fifo_ends_in_one_line_and_never_hangs(tmp_path, make, needle,
                                                               command) -> None:
    path = tmp_path / "run.json"
    make(path)
    args = [command, str(path)] + (["--headless"] if command == "replay" else [])
    started = time.perf_counter()
    result = specdeck(*args, timeout=60)
    one_line(result.returncode, result.stderr, needle)
    assert time.perf_counter() - started < 30


def test_a_large_session_is_refused_unless_allowed(tmp_path, capsys) -> None:
    path = tmp_path / "run.json"
    save_document(path, document(sample_traces()))
    size = path.stat().st_size
    code = main(["replay", str(path), "--headless", "--max-file-size", str(size - 1)])
    err = capsys.readouterr().err
    one_line(code, err, "more than the", "allowed", "--max-file-size SIZE reads it")
    assert main(["replay", str(path), "--headless", "--max-file-size", str(size)]) == 0
    assert main(["diff", str(path), "--max-file-size", "0"]) == 0  # no limit
    assert file_size("2G") == 2 * 2**30 and file_size("512MiB") == 512 * 2**20
    assert file_size("none") is None and MAX_FILE_BYTES == 256 * 2**20
    with pytest.raises(SystemExit):
        main(["replay", str(path), "--max-file-size", "lots"])


def test_nan_in_a_session_is_named(tmp_path, capsys) -> None:
    path = tmp_path / "run.json"
    data = orjson.dumps(document(sample_traces())).replace(b'"seconds":0.02', b'"seconds":NaN', 1)
    path.write_bytes(data)
    code = main(["replay", str(path), "--headless"])
    one_line(code, capsys.readouterr().err, "NaN at line 1 column",
             "is not a number JSON allows")


# --- values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "needle"), [
    (["--seed", "-1"], "the seed must be from 0 to 2**64 - 1 (got -1)"),
    (["--seed", str(2**64)], f"(got {2**64})"),
    (["--alternatives", "100000"], "alternatives must be from 0 to 64"),
    (["--temp", "nan"], "temperature must be 0 (greedy) or from 0.001 to 1000 (got nan)"),
    (["--top-p", "nan"], "top-p must be in (0, 1] (got nan)"),
])
def test_out_of_range_values_end_in_one_line(args, needle, capsys) -> None:
    code = main(["compare", "--headless", "--strategies", "plain", "--prompt", "x",
                 "--no-save", *args])
    one_line(code, capsys.readouterr().err, needle)


def test_sweep_seeds_stay_in_range(capsys) -> None:
    code = main(["sweep", "--seed", str(2**64 - 2), "--reps", "3", "--strategies", "draft"])
    one_line(code, capsys.readouterr().err, f"(got {2**64})")


def test_a_prompt_longer_than_the_context_is_refused(tiny_family, tmp_path, capsys) -> None:
    path = model_copy(tiny_family, tmp_path)
    edit_json(path / "config.json", max_position_embeddings=16)
    code = main(["compare", "--headless", "--target", str(path), "--strategies", "plain",
                 "--prompt", "def add(a, b):\n    return a + b\n" * 4, "--no-save"])
    one_line(code, capsys.readouterr().err, "reads at most 16 (max_position_embeddings)")


def test_a_run_far_beyond_the_machine_is_refused_unless_forced(tiny_family, capsys) -> None:
    args = ["compare", "--headless", "--target", str(tiny_family["llama_target"]),
            "--strategies", "plain", "--prompt", "x", "--no-save", "--max-tokens",
            str(10**12)]
    assert main(args) == 2
    *warnings, error = capsys.readouterr().err.strip().splitlines()
    assert all("warning: the prompt (1 tokens) and --max-tokens" in w for w in warnings)
    assert error.startswith("specdeck: error: plain would need about")
    for needle in ("more than this machine's", "lower --max-tokens", "--force"):
        assert needle in error
    huge = MemoryEstimate("plain", 10**13, 0, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(ModelError, match="more than this machine's 1.0 GiB"):
        check_headroom([huge], total=2**30, free=2**30)
    forced = check_headroom([huge], total=2**30, free=2**30, force=True)
    assert forced.startswith("plain needs about 9.1 TiB more memory")
