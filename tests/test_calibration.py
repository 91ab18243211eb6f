"""``specdeck calibrate``: the passes timed on tiny models with an injected clock, what
they predict (break-even acceptance, best k) worked out by hand, the cache per machine
and model pair read back untrusted, and the estimate before a run."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from functools import partial
from pathlib import Path

import orjson
import pytest

from specdeck.cli import main
from specdeck.engines.measure import pass_timing
from specdeck.engines.measure.calibration import (
    Calibration, Timing, calibration_file, estimate_line, load_calibration, save_calibration,
)
from specdeck.engines.core.config import MAX_MTP_DEPTH
from specdeck.engines.auto.explain import auto_estimate_line
from specdeck.engines.distributed.costs import PASS_SIZES

#: A target step of 10 ms; a verify pass of n tokens 10 + 5 (n - 1) ms, i.e.
#: c_verify(n) = 1 + 0.5 (n - 1) target steps; a draft step 2 ms (0.2 steps); an MTP
#: step 3 ms (0.3 steps). A round of k drafts costs 0.2 k + 1 + 0.5 k = 1 + 0.7 k steps.
STEP, SLOPE, DRAFT, MTP = 0.010, 0.005, 0.002, 0.003


def pass_seconds(n: int) -> float:
    return STEP + SLOPE * (n - 1)


def hand_made(draft: float | None = DRAFT, mtp: float | None = MTP) -> Calibration:
    return Calibration(
        machine="m", target="t", target_identity="ti", draft="d", draft_identity="di",
        passes=tuple(Timing(pass_seconds(n), 0.0) for n in PASS_SIZES),
        draft_step=Timing(draft, 0.0) if draft else None,
        mtp_step=Timing(mtp, 0.0) if mtp else None, reps=5, measured="2026-11-30T00:00:00+00:00",
    )


def test_break_even_and_best_k_worked_out_by_hand() -> None:
    cal = hand_made()
    assert cal.round_cost("draft", 1) == pytest.approx(1.7)
    assert cal.round_cost("draft", 4) == pytest.approx(3.8)
    # k = 1: 1 + a = 1.7 -> a = 0.7. k = 2: 1 + a + a^2 = 2.4 -> a = (-1 + sqrt(6.6)) / 2.
    assert cal.break_even("draft", 1) == pytest.approx(0.7, abs=1e-9)
    assert cal.break_even("draft", 2) == pytest.approx((-1 + math.sqrt(6.6)) / 2, abs=1e-9)
    # At 0.9: k=1 1.9/1.7 = 1.118, k=2 2.71/2.4 = 1.129, k=3 3.439/3.1 = 1.109: k = 2.
    assert cal.speedup("draft", 2, 0.9) == pytest.approx(2.71 / 2.4)
    assert cal.best_k("draft", 0.9) == (2, pytest.approx(2.71 / 2.4))
    # At 0.6 even k = 1 loses (1.6 / 1.7): plain decoding.
    assert cal.best_k("draft", 0.6) == (0, 1.0)
    # auto starts where the calibration prices it at 50 %: plain steps.
    assert "starts at plain steps (no k pays at 50% acceptance)" in auto_estimate_line(cal, "draft")
    # The MTP step (0.3) makes k = 1 cost 1.8: 1 + a = 1.8.
    assert cal.break_even("mtp", 1) == pytest.approx(0.8, abs=1e-9)


def test_a_k_that_cannot_pay_has_no_break_even() -> None:
    # A draft step of a whole target step: a round of k costs 1 + 1.5 k steps for at most
    # k + 1 tokens, so no acceptance pays.
    cal = hand_made(draft=STEP)
    assert [cal.break_even("draft", k) for k in (1, 2, 16)] == [None, None, None]
    assert cal.best_k("draft", 1.0) == (0, 1.0)
    assert "never beats plain" in estimate_line(cal, "draft", 16)
    assert "starts at plain steps" in auto_estimate_line(cal, "draft")


def test_the_cost_model_takes_every_measured_pass() -> None:
    cal = hand_made()
    model = cal.cost_model("draft", 0.8)
    for k in (1, 5, 16):
        assert model.verify_cost(k) == pytest.approx(1 + 0.5 * k)
        assert model.predicted(k) == pytest.approx(
            (1 + sum(0.8 ** i for i in range(1, k + 1))) / (1 + 0.7 * k))
    measured = cal.cost_model("draft", survival=[0.9, 0.5])
    assert measured.predicted(2) == pytest.approx(2.4 / 2.4)


def test_the_report_prints_what_the_numbers_say() -> None:
    from specdeck.commands.calibrate import report

    lines = report(hand_made(mtp=None), 0.9)
    text = "\n".join(lines)
    row = next(line for line in lines if line.split()[:1] == ["1"])
    assert "70%" in row and "1.70 steps" in row
    assert "draft at 90% acceptance: best k=2, 1.13x" in text
    assert "| marks 1.00x" in text
    table = next(line for line in lines if line.startswith("draft k"))
    # Up to 70% (k = 1's break-even: 1.7 / 1.7) plain wins; at 80% k = 1 (1.8 / 1.7 =
    # 1.06 against k = 2's 2.44 / 2.4 = 1.02); at 90% k = 2.
    assert table.split()[2:] == ["0", "0", "0", "0", "0", "1", "2"]


class FakeClock:
    """Seconds advance only when a probe ends, by the cost of the probe ``progress``
    named last; the fourth run of every probe is three times slower (a background task)."""

    def __init__(self, costs: dict[str, float]) -> None:
        self.costs, self.t, self.calls, self.label = costs, 0.0, 0, ""
        self.runs: dict[str, int] = {}

    def progress(self, p: pass_timing.CalibrationProgress) -> None:
        self.label = p.label

    def __call__(self) -> float:
        self.calls += 1
        if self.calls % 2 == 0:
            run = self.runs[self.label] = self.runs.get(self.label, 0) + 1
            self.t += self.costs[self.label] * (3.0 if run == 4 else 1.0)
        return self.t


def fake_costs() -> dict[str, float]:
    """What each probe takes as a whole: the chained ones run ``CHAIN`` steps."""
    costs = {"target step": STEP * pass_timing.CHAIN,
             "draft step": DRAFT * pass_timing.CHAIN, "MTP step": MTP * pass_timing.CHAIN}
    costs.update({f"pass of {n} tokens": pass_seconds(n) for n in PASS_SIZES[1:]})
    return costs


@pytest.fixture(scope="module")
def loaded(tiny_family: dict[str, Path]):
    from specdeck.engines.models.loading import ModelStore
    from specdeck.engines.proposers.mtp import load_mtp

    store = ModelStore()
    target = store.get(str(tiny_family["llama_target"]))
    draft = store.get(str(tiny_family["llama_draft"]))
    mtp = load_mtp(store.get(str(tiny_family["mtp_target"])))
    return target, draft, mtp


def test_measured_on_tiny_models_with_a_fake_clock(loaded) -> None:
    target, draft, _ = loaded
    clock = FakeClock(fake_costs())
    prompt = list(range(5, 40))
    cal = pass_timing.measure_calibration(target, prompt, draft, reps=5, warmup=1,
                                          clock=clock, progress=clock.progress,
                                          warmup_seconds=0.0)
    # Medians: the slow fourth run moves neither them nor the robust spread.
    assert [t.seconds for t in cal.passes] == pytest.approx(
        [pass_seconds(n) for n in PASS_SIZES])
    assert all(t.spread < 1e-9 for t in cal.passes)
    assert cal.draft_step.seconds == pytest.approx(DRAFT)
    assert cal.mtp_step is None and cal.proposers == ("draft",)
    assert cal.reps == 5 and clock.calls == 2 * 6 * (len(PASS_SIZES) + 1)
    assert cal.break_even("draft", 1) == pytest.approx(0.7, abs=1e-9)
    assert cal.best_k("draft", 0.9) == (2, pytest.approx(2.71 / 2.4))


def test_an_mtp_step_is_timed_on_a_hybrid_target(loaded) -> None:
    _, _, mtp = loaded
    clock = FakeClock(fake_costs())
    cal = pass_timing.measure_calibration(mtp.model, list(range(5, 30)), None, mtp, reps=3,
                                          warmup=0, clock=clock, progress=clock.progress,
                                          warmup_seconds=0.0)
    assert cal.proposers == ("mtp",)
    assert cal.mtp_step.seconds == pytest.approx(MTP)
    assert cal.break_even("mtp", 1) == pytest.approx(0.8, abs=1e-9)


def test_probes_leave_the_cache_as_they_found_it(loaded) -> None:
    """Every repetition sees the same context: after all the probes, a greedy step from
    the calibrated cache gives what a fresh prefill gives."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from specdeck.engines.decode.shared import forward, prefill

    _, _, mtp = loaded
    model, prompt = mtp.model.model, list(range(5, 30))
    fresh = make_prompt_cache(model)
    rest = prefill(model, fresh, mx.array(prompt, mx.uint32), 512)
    expected = forward(model, fresh, rest)
    used = make_prompt_cache(model)
    rest = prefill(model, used, mx.array(prompt, mx.uint32), 512)
    for n in (2, 9, 17):
        pass_timing._pass_probe(model, used, prompt, n)()
    pass_timing._steps_probe(model, used, prompt[-1])()
    assert mx.allclose(forward(model, used, rest), expected, atol=1e-5)


def test_cached_per_machine_and_model_pair(tiny_family, tmp_path: Path) -> None:
    target, draft = tmp_path / "target", tmp_path / "draft"
    shutil.copytree(tiny_family["llama_target"], target)
    shutil.copytree(tiny_family["llama_draft"], draft)
    cal = hand_made()
    path = save_calibration(cal, target, draft)
    assert path == calibration_file(target, draft) and path.is_file()
    assert load_calibration(target, draft) == cal
    assert load_calibration(target, None) is None  # another pair
    # Another machine (or an upgrade) looks elsewhere.
    from specdeck.engines.measure import measured_cache

    original = measured_cache.machine_fingerprint
    measured_cache.machine_fingerprint = lambda: "another machine"
    try:
        assert load_calibration(target, draft) is None
    finally:
        measured_cache.machine_fingerprint = original
    # Rewritten weights: a new identity, no stale result.
    weights = draft / "model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")
    assert load_calibration(target, draft) is None


@pytest.mark.parametrize("content", [
    b"{not json", b"[]", b'{"kind": "calibration", "version": 1}',
    orjson.dumps({**hand_made().to_dict(), "passes": [{"seconds": -1, "spread": 0}] * 17}),
    orjson.dumps({**hand_made().to_dict(), "draft_step": {"seconds": "fast"}}),
    orjson.dumps({**hand_made().to_dict(), "reps": 0}),
])
def test_a_broken_cache_file_is_ignored_with_one_line(tiny_family, content: bytes) -> None:
    target = tiny_family["llama_target"]
    path = calibration_file(target, None)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    lines: list[str] = []
    try:
        assert load_calibration(target, None, lines.append) is None
    finally:
        path.unlink()
    assert len(lines) == 1 and "ignoring the cached result" in lines[0]


def fake_timing(monkeypatch, **round_work: Timing) -> None:
    """``calibrate`` times its probes on a ``FakeClock``, and its loop as a plain step of
    10 ms and each drafter's ``round_work`` (``draft_round_overhead=...``)."""
    clock = FakeClock(fake_costs())
    measure = pass_timing.measure_calibration

    def driven(*args, progress, **kwargs):
        def both(p):
            clock.progress(p)
            progress(p)
        return measure(*args, **{**kwargs, "clock": clock, "progress": both,
                                 "warmup_seconds": 0.0})

    def loop(cal, *args, **kwargs):
        return replace(cal, plain_step=Timing(STEP, 0.0), **round_work)

    monkeypatch.setattr(pass_timing, "measure_calibration", driven)
    monkeypatch.setattr(pass_timing, "measure_loop", loop)


def test_calibrate_command_measures_caches_and_shows(tiny_family, capsys, monkeypatch) -> None:
    fake_timing(monkeypatch, draft_round_overhead=Timing(0.001, 0.0))  # 1 ms a round
    target, draft = str(tiny_family["llama_target"]), str(tiny_family["llama_draft"])
    args = ["calibrate", "--target", target, "--draft", draft, "--reps", "3", "--warmup", "1",
            "--acceptance", "90%"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "passes timed" in err and "timing the decoding loop" in err and "cached in" in err
    assert "and for the target alone in" in err
    assert "judging the draft's guesses on the built-in code and prose prompts" in err
    assert "the draft's greedy guesses on the built-in code and prose prompts" in out
    assert "\r" not in err and "\033" not in err  # a log, not a terminal: plain lines
    assert "in the decoding loop a plain step 10 ms, a round's own work 1.0 ms" in out
    # A round of k costs 0.1 steps more: at 90 %, k=1 1.9 / 1.8, k=2 2.71 / 2.5 = 1.08x,
    # k=3 3.439 / 3.2; k=1 breaks even at 80 % (1 + a = 1.8).
    assert "draft at 90% acceptance: best k=2, 1.08x" in out
    row = next(line for line in out.splitlines() if line.split()[:1] == ["1"])
    assert "80%" in row
    # --cached shows the same without measuring; --json is the cached record.
    monkeypatch.setattr(pass_timing, "measure_calibration", partial(pytest.fail, "measured"))
    assert main(["calibrate", "--target", target, "--draft", draft, "--cached", "--json"]) == 0
    record = orjson.loads(capsys.readouterr().out)
    assert record["passes"][1]["seconds"] == pytest.approx(pass_seconds(2))
    assert len(record["guess_survival"]) == 16
    assert Calibration.from_dict(record) == load_calibration(target, draft)
    # A run of the target without the draft (its MTP head, prompt lookup) finds it too,
    # with nothing of the draft's.
    alone = load_calibration(target)
    assert alone == load_calibration(target, draft).target_alone()
    assert alone.draft_step is None and alone.guess_survival is None and alone.passes


def test_calibrate_judges_an_mtp_heads_drafts(tiny_family, capsys, monkeypatch) -> None:
    """A target with an MTP head and no draft: its step is timed, its rounds' own work,
    and its greedy drafts on the built-in prompts (``mtp_runs``), cached and shown."""
    fake_timing(monkeypatch, mtp_round_overhead=Timing(0.002, 0.0))
    target = str(tiny_family["mtp_target"])
    assert main(["calibrate", "--target", target, "--reps", "3", "--warmup", "1"]) == 0
    out, err = capsys.readouterr()
    assert "judging the MTP head's drafts on the same prompts" in err
    assert "the MTP head's greedy drafts on the built-in code and prose prompts" in out
    assert "a round's own work 2.0 ms;" in out
    cached = load_calibration(target)
    assert cached.mtp_survival is not None and len(cached.mtp_survival) == MAX_MTP_DEPTH
    assert cached.guess_survival is None and cached.round_cost("mtp", 1) == pytest.approx(
        (MTP + pass_seconds(2) + 0.002) / STEP)


def test_cached_without_a_calibration_is_one_line(tiny_family, capsys) -> None:
    assert main(["calibrate", "--target", str(tiny_family["qwen3_target"]), "--cached"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no calibration of this pair" in err


def test_the_estimate_before_a_run_uses_the_calibration(tiny_family) -> None:
    from specdeck.engines.runs.compare import prepare
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.models.loading import ModelStore
    from specdeck.engines.core.requests import CompareRequest

    target, draft = tiny_family["qwen3_target"], tiny_family["llama_draft"]
    request = CompareRequest(target=str(target), draft=str(draft), prompt="def add(a, b):",
                             strategies=["plain", "draft"],
                             settings=DecodeSettings(num_draft_tokens=1))
    lines: list[str] = []
    prepare(request, ModelStore(), lines.append)
    assert not any("calibrated" in line for line in lines)
    save_calibration(hand_made(mtp=None), target, draft)
    try:
        lines.clear()
        prepare(request, ModelStore(), lines.append)
    finally:
        calibration_file(target, draft).unlink()
    assert ("draft: calibrated on this machine, a round of k=1 costs 1.70 plain steps for "
            "up to 2 tokens; it beats plain above 70% acceptance") in lines


def test_the_loops_own_costs_price_every_round() -> None:
    """With the loop timed, costs are in its plain steps and every round pays its own
    work: a plain step of 12.5 ms and 2 ms a round make k = 1 cost (2 + 15 + 2) / 12.5
    plain steps; 9 ms a round would make it cost more than its 2 tokens."""
    cal = replace(hand_made(), plain_step=Timing(0.0125, 0.01),
                  draft_round_overhead=Timing(0.002, 0.3))
    assert cal.verify_passes("draft")[0] == 1.0
    assert cal.verify_passes("draft")[1] == pytest.approx((0.015 + 0.002) / 0.0125)
    assert cal.round_cost("draft", 1) == pytest.approx(19 / 12.5)
    assert cal.break_even("draft", 1) == pytest.approx(19 / 12.5 - 1)
    assert replace(cal, draft_round_overhead=Timing(0.009, 0.0)).break_even("draft", 1) is None
    assert Calibration.from_dict(cal.to_dict()) == cal
    assert Calibration.from_dict({**cal.to_dict(), "draft_round_overhead": {"seconds": -1}}) is None
    # Version 1 records (no loop timed, priced in target steps) are not read.
    assert Calibration.from_dict({**cal.to_dict(), "version": 1}) is None


def test_the_loop_is_timed_on_tiny_models(loaded) -> None:
    """``measure_loop`` runs the real loop: a plain step and a round's own work come
    back, each drafter's of its own rounds, the passes stay as measured; with nobody
    drafting it changes nothing."""
    target, draft, mtp = loaded
    prompt = list(range(5, 40))
    cal = pass_timing.measure_calibration(target, prompt, draft, reps=2, warmup=0,
                                          warmup_seconds=0.0)
    timed = pass_timing.measure_loop(cal, target, prompt, draft, runs=1, warmup_seconds=0.0)
    assert timed.passes == cal.passes and timed.draft_step == cal.draft_step
    assert timed.plain_step.seconds > 0 and timed.draft_round_overhead.seconds > 0
    assert timed.mtp_round_overhead is None
    assert timed.verify_passes("draft")[0] == 1.0
    assert pass_timing.measure_loop(cal, target, prompt) is cal
    own = pass_timing.measure_calibration(mtp.model, prompt, None, mtp, reps=2, warmup=0,
                                          warmup_seconds=0.0)
    timed = pass_timing.measure_loop(own, mtp.model, prompt, None, mtp, runs=1,
                                     warmup_seconds=0.0)
    assert timed.mtp_round_overhead.seconds > 0 and timed.draft_round_overhead is None
    assert timed.round_overhead("ngram") == timed.mtp_round_overhead


def test_each_drafter_pays_its_own_round_work() -> None:
    """A draft model's round does 1 ms of the loop's work, an MTP head's 3 ms (it
    samples and joins its chained steps, the verify pass keeps its hidden states): with
    a plain step of 10 ms, k = 1 costs (2 + 15 + 1) / 10 by the draft and (3 + 15 + 3)
    / 10 by the head; prompt lookup's rounds are priced as a draft model's, or as the
    head's where the loop timed no draft model."""
    cal = replace(hand_made(), plain_step=Timing(STEP, 0.0),
                  draft_round_overhead=Timing(0.001, 0.0), mtp_round_overhead=Timing(0.003, 0.0))
    assert cal.round_cost("draft", 1) == pytest.approx(1.8)
    assert cal.round_cost("mtp", 1) == pytest.approx(2.1)
    assert cal.verify_passes("ngram")[1] == pytest.approx(1.6)
    assert cal.pass_steps()[1] == pytest.approx(1.5)
    assert replace(cal, draft_round_overhead=None).verify_passes("ngram")[1] == pytest.approx(1.8)
    assert Calibration.from_dict(orjson.loads(orjson.dumps(cal.to_dict()))) == cal
    assert Calibration.from_dict({**cal.to_dict(), "mtp_round_overhead": "3 ms"}) is None
    from specdeck.commands.calibrate import report

    assert "a round's own work 1.0 ms (draft), 3.0 ms (mtp)" in "\n".join(report(cal, 0.6))


def test_a_cached_calibration_reaches_auto(tiny_family, tmp_path: Path) -> None:
    """``specdeck calibrate``'s cache, found by the model folders: ``auto`` drafts from
    its first round (no plain step timed first) and still equals plain decoding; prompt
    lookup finds the target's own calibration when the pair has none."""
    from specdeck.engines.runs.compare import load_models
    from specdeck.engines.core.config import AUTO, DecodeSettings
    from specdeck.engines.core.events import Trace
    from specdeck.engines.models.loading import ModelStore
    from specdeck.engines.core.requests import CompareRequest
    from specdeck.engines.decode.run import run_strategy

    target, draft = tmp_path / "target", tmp_path / "draft"
    shutil.copytree(tiny_family["llama_target"], target)
    shutil.copytree(tiny_family["llama_draft"], draft)
    cheap = replace(hand_made(draft=STEP / 20), passes=tuple(
        Timing(STEP * (1 + 0.02 * (n - 1)), 0.0) for n in PASS_SIZES))
    save_calibration(cheap, target, draft)
    alone = replace(cheap, draft=None, draft_identity=None, draft_step=None)
    save_calibration(alone, target, None)
    settings = DecodeSettings(max_tokens=24, stop_at_eos=False, num_draft_tokens=AUTO,
                              ngram_k=AUTO)
    store = ModelStore()

    def loaded(strategies: list[str], with_draft: bool):
        return load_models(CompareRequest(
            target=str(target), strategies=strategies, prompt="def add(a, b):",
            settings=settings, draft=str(draft) if with_draft else None), store)

    models = loaded(["plain", "draft"], True)
    assert models.calibration == cheap
    prompt = models.target.tokenizer.encode("def add(a, b):\n    return a + b\n")
    plain = Trace("plain", list(run_strategy("plain", models, prompt, settings)))
    auto = Trace("draft", list(run_strategy("draft", models, prompt, settings)))
    assert auto.tokens == plain.tokens
    # No plain step timed first: the calibration prices the first round, the best k at
    # one draft in two kept, as the line before the run says.
    first = auto.rounds[0].length
    assert first.k > 0 and first.why == "best" and first.cost is not None
    speed = first.tokens / first.cost
    assert f"starts at k={first.k} (predicted {speed:.2f}x a plain step at 50% acceptance)" \
        in auto_estimate_line(cheap, "draft")
    assert loaded(["ngram"], False).calibration == alone
    # A broken file for the pair is passed over for the target's own.
    calibration_file(target, draft).write_text("{not json")
    assert loaded(["draft"], True).calibration == alone


def test_passes_timed_out_of_order_are_pooled() -> None:
    """A longer pass timed cheaper than a shorter one is noise: pooled with it into
    their mean (least squares), so no k looks better than its neighbours for it."""
    from specdeck.engines.measure.calibration import nondecreasing

    assert nondecreasing([1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0]
    assert nondecreasing([1.0, 3.0, 2.0, 4.0]) == [1.0, 2.5, 2.5, 4.0]
    assert nondecreasing([3.0, 2.0, 1.0]) == [2.0, 2.0, 2.0]
    assert nondecreasing([1.0, 4.0, 2.0, 2.0, 5.0]) == pytest.approx([1.0, 8 / 3, 8 / 3, 8 / 3,
                                                                      5.0])
    bumpy = replace(hand_made(), passes=(*hand_made().passes[:4], Timing(pass_seconds(3), 0.0),
                                         *hand_made().passes[5:]))
    costs = bumpy.verify_passes("draft")
    assert all(a <= b for a, b in zip(costs, costs[1:]))
    assert costs[3] == costs[4] == pytest.approx((pass_seconds(4) + pass_seconds(3)) / 2 / STEP)
