"""Numbers and lists at their edges: every temperature is refused or samples finite
probabilities (never a NaN into a session), the warm-up never outruns the checks made
for --max-tokens, NaN is no timeout, an empty list is no sweep, and a prompt file is
refused by its size before it is read, a deep JSONL line by its shape."""

from __future__ import annotations

import time

import mlx.core as mx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdeck.cli import main
from specdeck.engines.core.config import TEMPERATURES, Sampling
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.decode.sampling import KeyStream, choose, sampling_logprobs
from specdeck.engines.decode.shared import log_probs


def one_line(code: int, err: str, needle: str) -> None:
    assert code == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("specdeck: error: ") and needle in line, line


#: Log-probabilities as models give them: a sharp head, a long tail down to -1e4, some
#: tokens impossible (-inf, as a filter leaves them).
def model_logprobs(seed: int) -> mx.array:
    key = mx.random.key(seed)
    logits = mx.random.normal((4, 64), key=key) * mx.array([1.0, 30.0, 300.0, 3000.0])[:, None]
    logits = mx.where(mx.arange(64) % 7 == 0, -mx.inf, logits)
    return log_probs(logits)


@settings(max_examples=120, deadline=None)
@given(temperature=st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-45, max_value=1e-2), st.floats(min_value=1e2, max_value=1e45),
    st.sampled_from([0.0, *TEMPERATURES, 1e-40, 1e-38, 1e38, 1e300])),
       top_p=st.sampled_from([1.0, 0.9, 0.1]), seed=st.integers(0, 2**16))
def test_a_temperature_is_refused_or_samples_finite_probabilities(temperature, top_p,
                                                                  seed) -> None:
    sampling = Sampling(temperature=temperature, top_p=top_p)
    try:
        sampling.validate()
    except SettingsError as exc:
        assert "temperature must be 0 (greedy) or from" in str(exc)
        return
    lp = sampling_logprobs(model_logprobs(seed), sampling)
    probs = mx.exp(lp)
    assert not mx.any(mx.isnan(lp)).item(), temperature
    # float32 normalises logits 3,000 apart to within ~1e-4 (seed 1139: 0.999866).
    assert mx.allclose(probs.sum(axis=-1), mx.ones(4), atol=1e-3).item(), temperature
    token = choose(lp, sampling, KeyStream(seed))
    assert mx.all(mx.isfinite(mx.take_along_axis(lp, token[:, None], axis=-1))).item()


@pytest.mark.parametrize("value", ["1e-40", "1e300", "nan", "inf", "-0.5", "5e-4"])
def test_temperatures_that_would_overflow_end_in_one_line(value, capsys) -> None:
    code = main(["compare", "--headless", "--strategies", "plain", "--prompt", "x",
                 "--no-save", "--temp", value])
    one_line(code, capsys.readouterr().err, "temperature must be 0 (greedy) or from 0.001")
    code = main(["sweep", "--strategies", "draft", "--temp", f"0,{value}"])
    one_line(code, capsys.readouterr().err, "temperature must be 0 (greedy) or from 0.001")


def test_the_warm_up_never_runs_longer_than_the_run(tiny_family, capsys) -> None:
    """A billion warm-up tokens ran a billion tokens past the context and memory checks
    made for --max-tokens; now the warm-up stops where the run does."""
    started = time.perf_counter()
    code = main(["compare", "--headless", "--target", str(tiny_family["llama_target"]),
                 "--strategies", "plain", "--prompt", "x", "--no-save", "--quiet",
                 "--ignore-eos", "--max-tokens", "4", "--warmup-tokens", str(10**9)])
    assert code == 0, capsys.readouterr().err
    assert time.perf_counter() - started < 30


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_a_stall_timeout_is_a_number_of_seconds(value, capsys) -> None:
    code = main(["compare", "--headless", "--strategies", "plain", "--prompt", "x",
                 "--no-save", "--stall-timeout", value])
    one_line(code, capsys.readouterr().err, "--stall-timeout must be a number of seconds > 0")


@pytest.mark.parametrize(("args", "needle"), [
    (["--strategies", ""], "choose at least one strategy to sweep"),
    (["--strategies", " , "], "choose at least one strategy to sweep"),
    (["-k", ""], "expected comma-separated whole numbers, auto, grow or pmin:P, got ''"),
    (["-k", ",,"], "expected comma-separated whole numbers, auto, grow or pmin:P, got ',,'"),
    (["--depth", ","], "expected comma-separated whole numbers, auto, grow or pmin:P"),
    (["--ngram", ""], "expected comma-separated integers"),
    (["--temp", ","], "expected comma-separated numbers"),
    (["--reps", str(10**9)], "--reps must be from 1 to 100"),
    (["--warmup", str(10**9)], "--warmup from 0 to 100"),
])
def test_an_empty_or_endless_sweep_is_refused(args, needle, capsys) -> None:
    try:
        code = main(["sweep", *args])
    except SystemExit as exc:  # argparse's own refusal of an option's value
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err


def test_a_huge_prompt_file_is_refused_by_its_size_at_once(tmp_path, capsys) -> None:
    prompt = tmp_path / "big.txt"
    with prompt.open("wb") as f:
        f.truncate(50 * 2**20)  # 50 MB, sparse
    started = time.perf_counter()
    code = main(["compare", "--headless", "--strategies", "plain", "--prompt", str(prompt),
                 "--no-save"])
    one_line(code, capsys.readouterr().err, "is 50.0 MiB, more than the 4.0 MiB allowed")
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize("line", ["[" * 2000 + "]" * 2000,
                                  '{"prompt": ' + "[" * 5000 + "]" * 5000 + "}",
                                  '{"prompt": "' + "x" * (4 * 2**20 + 1) + '"}'])
def test_a_jsonl_line_nested_or_long_past_reason_ends_in_one_line(tmp_path, capsys,
                                                                    line) -> None:
    prompts = tmp_path / "deep.jsonl"
    prompts.write_text(line + "\n")
    code = main(["sweep", "--prompt", str(prompts)])
    one_line(code, capsys.readouterr().err, f"{prompts} line 1")
