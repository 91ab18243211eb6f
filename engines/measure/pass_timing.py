"""Timing a target's passes, a draft step and an MTP step, without generating an answer:
what ``specdeck calibrate`` measures (``engines.calibration`` says what it predicts).

After a short prompt is prefilled, each probe feeds its tokens to the warm cache, reads
the greedy choice back and puts the cache back where it was (outside the timing), so
every repetition sees the same context. Each is timed the way a decoding loop runs it:

- a target step: a few greedy steps chained as plain decoding chains them (the next
  step queued before the current token is read back), per step: that overlap makes a
  plain step cheaper than a pass of one token read back at once, and a calibration
  that missed it would price every verify pass too high;
- a verify pass of n = 2..17 tokens (k = n - 1 drafts), read back at once as a round
  must, through the same call a round makes (a hybrid target keeps each position's
  recurrent state, ``engines.capture``, and commits a prefix as after a rejection);
- a draft step and an MTP step: a few chained and read back together, as a round
  drafts, per step.

Repetitions take turns probe by probe (as a sweep's cells do), after untimed warm-up
rounds, so drift hits every probe alike; each keeps its median and robust spread. The
clock is injected (tests drive it): it is read exactly twice per probe, just before and
just after, and ``progress`` hears each probe's label before it runs; a chained probe's
time is divided by its ``CHAIN`` steps.

``measure_loop`` then times what the probes leave out: specdeck's loop itself, in a few
short greedy runs (a plain step as it decodes; what a round adds to its passes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Callable

import mlx.core as mx
from mlx_lm.generate import generation_stream
from mlx_lm.models.cache import make_prompt_cache

from specdeck.engines.measure.calibration import REPS, WARMUP, Calibration, Timing
from specdeck.engines.decode.capture import commit_prefix, forward_captured, supports_capture
from specdeck.engines.decode.shared import Clock, forward, forward_hidden, prefill
from specdeck.engines.proposers.draft_vocab import DraftVocabulary, WholeVocabulary
from specdeck.engines.distributed.costs import PASS_SIZES
from specdeck.engines.models.loading import LoadedModel
from specdeck.engines.measure.machine import machine_fingerprint
from specdeck.engines.measure.measured_cache import model_identity
from specdeck.engines.proposers.mtp import MtpModel
from specdeck.engines.decode.rollback import checkpoint, restore
from specdeck.engines.core.stats import median, robust_cv

#: The most prompt tokens prefilled before timing (a short context, as early in a run).
CONTEXT_TOKENS = 64
#: Steps a target-step, draft-step or MTP-step probe chains (its time is divided by it).
CHAIN = 4
#: ``measure_loop``: tokens each short run decodes, the drafts per round of its
#: speculative runs, and the timed runs of each.
LOOP_TOKENS, LOOP_K, LOOP_RUNS = 24, 2, 7
#: Seconds the probes run untimed first: measured here, the first two or three seconds
#: of a fresh process ran its passes about 25 % slower than the rest, whatever the
#: number of warm-up rounds.
WARMUP_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class CalibrationProgress:
    """``done`` of ``total`` probes run; ``label`` is the one about to run."""

    done: int
    total: int
    label: str


#: Runs once and says how many steps it timed (its time is divided by that).
Probe = Callable[[], int]


def _greedy(model, cache, tokens: mx.array, vocabulary: DraftVocabulary | None = None
            ) -> mx.array:
    """The greedy choice after the last of ``tokens``, queued (not yet computed): among
    the tokens ``vocabulary`` lists, when given, as a draft with one steps."""
    steps = vocabulary or WholeVocabulary(model)
    with mx.stream(generation_stream):
        choice = steps.pick(mx.argmax(steps.step(cache, tokens), axis=-1))
    mx.async_eval(choice)
    return choice


def _steps_probe(model, cache, first: int) -> Probe:
    """``CHAIN`` greedy steps as plain decoding takes them (the next step queued before
    the current token is read back, ``engines.plain``); the cache is put back after."""
    start = mx.array([first], mx.uint32)

    def run() -> int:
        point = checkpoint(cache, CHAIN)
        current = _greedy(model, cache, start)
        for _ in range(CHAIN - 1):
            upcoming = _greedy(model, cache, current)
            current.item()
            current = upcoming
        current.item()
        restore(cache, point, discard=CHAIN)
        return CHAIN

    return run


def _pass_probe(model, cache, tokens: list[int], n: int) -> Probe:
    """A verify pass of ``n`` tokens, its greedy choices read back, through the call a
    round makes; the cache is put back afterwards (a rejection's commit is timed, the
    rest is not)."""
    fed = mx.array(tokens[:n], mx.uint32)
    captures = supports_capture(model)

    def run() -> int:
        point = checkpoint(cache, n)
        with mx.stream(generation_stream):
            if captures:
                captured = forward_captured(model, cache, fed, False)
                logprobs = captured.logprobs
            else:
                logprobs = forward(model, cache, fed)
            choice = mx.argmax(logprobs, axis=-1)
        choice.tolist()
        if captures:
            commit_prefix(cache, captured, keep=1, fed=n)  # as after a rejection
            restore(cache, point, discard=1)
        else:
            restore(cache, point, discard=n)
        return 1

    return run


def _draft_probe(draft: LoadedModel, prompt: list[int]) -> Probe:
    """``CHAIN`` draft steps from the prefilled prompt, queued one on the other and read
    back together, as a round drafts (``engines.draft``: over the tokens the draft's
    folder lists, when it lists them)."""
    model = draft.model
    cache = make_prompt_cache(model)
    with mx.stream(generation_stream):
        rest = prefill(model, cache, mx.array(prompt, mx.uint32), 512)
    mx.eval([c.state for c in cache])

    def run() -> int:
        point = checkpoint(cache, CHAIN)
        y, drafts = rest, []
        for _ in range(CHAIN):
            y = _greedy(model, cache, y, draft.vocabulary)
            drafts.append(y)
        mx.concatenate(drafts).tolist()
        restore(cache, point, discard=CHAIN)
        return CHAIN

    return run


def _mtp_probe(mtp: MtpModel, cache, prompt: list[int]) -> Probe:
    """``CHAIN`` MTP head steps chained from the hidden state of the prompt's last
    position, as a round drafts (``engines.mtp``)."""
    model = mtp.model.model
    point = checkpoint(cache, 1)
    with mx.stream(generation_stream):
        _, hidden = forward_hidden(model, cache, mx.array(prompt[-1:], mx.uint32))
    mx.eval(hidden)
    restore(cache, point, discard=1)
    start_hidden = hidden[None, -1:]
    start_token = mx.array([[prompt[-1]]], mx.uint32)

    def run() -> int:
        hidden, token, drafts = start_hidden, start_token, []
        for _ in range(CHAIN):
            with mx.stream(generation_stream):
                hidden, logprobs = mtp.head(hidden, token)
                draft = mx.argmax(logprobs, axis=-1)
            mx.async_eval(draft)
            drafts.append(draft)
            token = draft[None]
        mx.concatenate(drafts).tolist()
        return CHAIN

    return run


def measure_calibration(
    target: LoadedModel,
    prompt: list[int],
    draft: LoadedModel | None = None,
    mtp: MtpModel | None = None,
    *,
    reps: int = REPS,
    warmup: int = WARMUP,
    clock: Clock = time.perf_counter,
    progress: Callable[[CalibrationProgress], None] = lambda p: None,
    warmup_seconds: float = WARMUP_SECONDS,
) -> Calibration:
    """Time ``target``'s step and verify passes of 2..17 tokens, a ``draft`` step and an
    ``mtp`` step (each when given) after prefilling ``prompt`` (its first
    ``CONTEXT_TOKENS``), once the probes have run untimed for ``warmup_seconds`` (by
    the wall clock) and ``warmup`` rounds."""
    if reps < 1 or warmup < 0:
        raise ValueError("reps must be at least 1 and warmup at least 0")
    prompt = prompt[:CONTEXT_TOKENS]
    if len(prompt) < 2:
        raise ValueError("calibrating needs a prompt of at least 2 tokens")
    model = target.model
    cache = make_prompt_cache(model)
    with mx.stream(generation_stream):
        rest = prefill(model, cache, mx.array(prompt, mx.uint32), 512)
    mx.eval([c.state for c in cache])
    feed = (rest.tolist() + prompt * PASS_SIZES[-1])[: PASS_SIZES[-1]]
    probes: dict[str, Probe] = {"target step": _steps_probe(model, cache, feed[0])}
    probes.update({f"pass of {n} tokens": _pass_probe(model, cache, feed, n)
                   for n in PASS_SIZES[1:]})
    if draft is not None:
        probes["draft step"] = _draft_probe(draft, prompt)
    if mtp is not None:
        probes["MTP step"] = _mtp_probe(mtp, cache, prompt)
    progress(CalibrationProgress(0, (warmup + reps) * len(probes), "warming up"))
    settle = time.monotonic() + warmup_seconds
    while time.monotonic() < settle:  # a fresh process runs its first seconds slower
        for probe in probes.values():
            probe()
    times: dict[str, list[float]] = {label: [] for label in probes}
    total, done = (warmup + reps) * len(probes), 0
    for rep in range(warmup + reps):
        for label, probe in probes.items():
            progress(CalibrationProgress(done, total, label))
            start = clock()
            steps = probe()
            seconds = (clock() - start) / steps
            if rep >= warmup:
                times[label].append(seconds)
            done += 1
    progress(CalibrationProgress(done, total, "done"))

    def timing(label: str) -> Timing | None:
        if label not in times:
            return None
        values = times[label]
        return Timing(max(median(values), 1e-9), robust_cv(values))

    return Calibration(
        machine=machine_fingerprint(), target=target.source,
        target_identity=model_identity(target.path),
        draft=draft.source if draft else None,
        draft_identity=model_identity(draft.path) if draft else None,
        passes=tuple(timing(label) for label in list(probes)[: len(PASS_SIZES)]),
        draft_step=timing("draft step"), mtp_step=timing("MTP step"), reps=reps,
        measured=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def measure_loop(
    calibration: Calibration,
    target: LoadedModel,
    prompt: list[int],
    draft: LoadedModel | None = None,
    mtp: MtpModel | None = None,
    *,
    runs: int = LOOP_RUNS,
    clock: Clock = time.perf_counter,
    warmup_seconds: float = WARMUP_SECONDS / 2,
) -> Calibration:
    """``calibration`` with specdeck's decoding loop timed: short greedy runs of plain
    decoding and of ``LOOP_K`` drafts per round by each drafter given (``draft``, and
    ``mtp``'s head), taking turns after untimed runs of each for ``warmup_seconds``. A
    plain step is the median over the plain runs of each one's median round; a round's
    own work, for each drafter, the same of what each of its rounds took beyond its
    draft steps and its verify pass as calibrated. A run's first round (cold) is left
    out. Unchanged when nobody drafts (prompt lookup alone)."""
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.core.events import Done, Round
    from specdeck.engines.decode.run import Models, run_strategy

    proposers = [name for name, model in (("draft", draft), ("mtp", mtp)) if model is not None]
    if not proposers:
        return calibration
    steps = {name: calibration.step_timing(name) for name in proposers}
    for name, step in steps.items():
        if step is None:
            raise ValueError(f"the calibration has no {name} step to time the loop with")
    settings = DecodeSettings(max_tokens=LOOP_TOKENS, stop_at_eos=False,
                              num_draft_tokens=LOOP_K, mtp_depth=LOOP_K)
    models = Models(target, draft, mtp)
    prompt = prompt[:CONTEXT_TOKENS]
    plain: list[float] = []
    extra: dict[str, list[float]] = {name: [] for name in proposers}

    def rounds(name: str) -> list[Round]:
        out = []
        for event in run_strategy(name, models, prompt, settings, clock):
            if isinstance(event, Round):
                out.append(event)
            elif isinstance(event, Done) and event.reason == "error":
                raise RuntimeError(f"timing the {name} loop failed: {event.error}")
        return out[1:]  # the first round runs cold

    settle = time.monotonic() + warmup_seconds
    while True:  # untimed, at least once each: the loop's first runs in a process are slow
        for name in ("plain", *proposers):
            rounds(name)
        if time.monotonic() >= settle:
            break
    for _ in range(runs):  # a run of each at a time: a slow spell spoils few of them
        times = [r.draft_seconds + r.verify_seconds for r in rounds("plain")]
        beyond = {name: [r.draft_seconds + r.verify_seconds
                         - len(r.drafted) * step.seconds
                         - calibration.passes[len(r.drafted)].seconds
                         for r in rounds(name) if r.drafted]
                  for name, step in steps.items()}
        if times and all(beyond.values()):
            plain.append(median(times))
            for name, seconds in beyond.items():
                extra[name].append(median(seconds))
    if not plain:
        return calibration
    overheads = {f"{name}_round_overhead": Timing(max(median(seconds), 1e-9), robust_cv(seconds))
                 for name, seconds in extra.items()}
    return replace(calibration, plain_step=Timing(max(median(plain), 1e-9), robust_cv(plain)),
                   **overheads)
