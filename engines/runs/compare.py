"""Run several strategies on one prompt, one after another, each warmed up first.

Strategies that run at the same moment share the hardware and slow each other down, so a
comparison measures them in turn: a short warm-up run (compiles kernels, touches the
weights), then the measured run, streamed live through ``on_event``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from specdeck.engines.core.config import AUTO, DecodeSettings, policy_name
from specdeck.engines.core.errors import ModelError, SettingsError
from specdeck.engines.decode.shared import Clock
from specdeck.engines.auto.explain import auto_estimate_line
from specdeck.engines.core.events import Event, Trace
from specdeck.engines.measure.blas_threads import fit_blas_threads_to
from specdeck.engines.measure.calibration import Calibration, estimate_line, load_calibration
from specdeck.engines.models.catalog import ModelInfo, describe_dir, missing_mtp_head
from specdeck.engines.models.chat_template import render_chat
from specdeck.engines.models.loading import ModelStore, check_pair
from specdeck.engines.measure.memory import (
    MemoryEstimate, Split, check_headroom, cpu_backend, estimate_comparison, weight_bytes,
)
from specdeck.engines.proposers.mtp import load_mtp
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.core.strategies import strategy_of, uses_draft, uses_mtp
from specdeck.engines.core.stats import compute_stats
from specdeck.engines.decode.run import Models, run_strategy


def encode_prompt(tokenizer: Any, text: str, chat: bool | None = None) -> list[int]:
    """Token ids of ``text``, wrapped in the chat template when asked (or available)."""
    has_template = getattr(tokenizer, "chat_template", None) is not None
    if chat is None:
        chat = has_template
    if chat:
        if not has_template:
            raise SettingsError("this tokenizer has no chat template; run without --chat")
        # The template is the model folder's code: rendered bounded, never in-process.
        text = render_chat(tokenizer, [{"role": "user", "content": text}])
        ids = list(tokenizer.encode(text, add_special_tokens=False))
    else:
        ids = list(tokenizer.encode(text))
    if not ids:
        raise SettingsError("the prompt encodes to no tokens")
    return ids


def upcast(request: CompareRequest) -> bool:
    """Whether the request's half-precision weights run as float32 (``fast`` on the CPU)."""
    return request.dtype == "fast" and cpu_backend()


#: The target, draft and MTP model a request uses, described from their files.
Described = tuple[ModelInfo, ModelInfo | None, ModelInfo | None]


@dataclass
class Prepared:
    """What a request needs before any weights load, each found or read once: its models
    described from their folders, the prompt's tokens, the memory estimates and this
    machine's calibration of the models."""

    models: Described
    prompt: list[int]
    #: Each strategy's estimated peak memory; None while a model's weights are not on disk.
    estimates: dict[str, MemoryEstimate] | None
    #: ``machine_calibration`` of the target and the draft; None: never calibrated here.
    calibration: Calibration | None = None


def describe_models(request: CompareRequest, store: ModelStore) -> Described:
    """The target, draft and MTP model the request uses, from their files."""
    target = describe_dir(store.resolve(request.target, request.revision), name=request.target)
    draft = mtp = None
    if request.draft and uses_draft(request.strategies, True):
        draft = describe_dir(store.resolve(request.draft), name=request.draft)
    if uses_mtp(request.strategies, bool(request.draft)):
        mtp = describe_dir(store.resolve(request.mtp_model), name=request.mtp_model) \
            if request.mtp_model else target
    return target, draft, mtp


def cannot_run(request: CompareRequest, described: Described) -> dict[str, str]:
    """The request's strategies that cannot run with these models, and why, read from
    their folders before any weights load: those that draft with an MTP head the model
    lacks."""
    mtp = described[2]
    who = "the MTP model" if request.mtp_model else "the target"
    why = missing_mtp_head(mtp, who) if mtp is not None else ""
    draft_named = bool(request.draft)
    return {name: why for name in request.strategies
            if why and strategy_of(name).uses_mtp(draft_named)}


def estimate_memory(
    request: CompareRequest, prompt_tokens: int, described: Described,
) -> dict[str, MemoryEstimate] | None:
    """Each strategy's peak memory, from the model files alone (per rank when the target
    is split over a group); None while a model's weights are not on disk (a hub id
    fetched only for its config and tokenizer)."""
    target, draft, mtp = described
    if not all(m.weights_present for m in described if m is not None):
        return None
    return estimate_comparison(
        request.strategies, target, request.settings, prompt_tokens,
        draft=draft, mtp=mtp, upcast=upcast(request), split=target_split(request, target),
    )


def target_split(request: CompareRequest, target: ModelInfo) -> Split | None:
    """How the request splits its target over a group (None: it does not)."""
    group = request.group
    return Split(target.path, group.ranks, group.shard) if group and group.ranks > 1 else None


def prepare(
    request: CompareRequest, store: ModelStore,
    progress: Callable[[str], None] = lambda _: None,
    described: Described | None = None,
) -> Prepared:
    """Everything before loading: refuse a draft or MTP model whose tokenizer differs
    from the target's, tokenize the prompt and check it against the target's context
    (``check_context``), estimate memory and warn through ``progress`` when it does not
    fit (refuse, ModelError, under ``strict_memory``, or beyond the machine's whole
    memory unless ``force``). ``described``: the request's models, when already read."""
    target, draft, mtp = described = described or describe_models(request, store)
    tokenizer = store.tokenizer(target.path, request.revision)
    for role, source, info in (("draft", request.draft, draft), ("MTP", request.mtp_model, mtp)):
        if source and info is not None:
            progress(f"checking that {source} shares {request.target}'s tokenizer")
            check_pair(request.target, source, tokenizer, store.tokenizer(info.path), role)
    prompt = encode_prompt(tokenizer, request.prompt, request.chat)
    warning = check_context(described[0], len(prompt), request.settings)
    if warning:
        progress(f"warning: {warning}")
    estimates = estimate_memory(request, len(prompt), described)
    if estimates is None:
        progress("memory not estimated: a model's weights are not downloaded yet")
    else:
        upcasts, split = upcast(request), target_split(request, target)
        resident = sum(
            split.weight_bytes(m, upcasts) if split and split.path == m.path
            else weight_bytes(m, upcasts)
            for m in {m.path: m for m in described if m}.values()
            if store.holds(m.path, request.revision if m.name == request.target else None,
                           request.dtype)
        )
        warning = check_headroom(list(estimates.values()), resident, request.strict_memory,
                                 force=request.force)
        if warning:
            progress(f"warning: {warning}")
    calibration = machine_calibration(target.path, draft.path if draft else None, progress)
    for line in time_estimates(request, calibration):
        progress(line)
    return Prepared(described, prompt, estimates, calibration)


def time_estimates(request: CompareRequest, calibration: Calibration | None) -> list[str]:
    """What this machine's calibration of the pair (``specdeck calibrate``, cached)
    says of each speculative strategy before it runs: what a round costs and the
    acceptance it needs to beat plain decoding. Empty when the pair was never
    calibrated here."""
    if calibration is None:
        return []
    lines = []
    for name in request.strategies:
        kind, settings = strategy_of(name).name, request.settings.for_pane(name)
        if kind not in calibration.proposers or not settings.max_drafts(kind):
            continue
        count = settings.draft_count(kind)
        if count == AUTO:
            lines.append(f"{name}: {auto_estimate_line(calibration, kind)}")
        elif policy_name(count) is None:  # grow and pmin follow rules no calibration changes
            lines.append(f"{name}: {estimate_line(calibration, kind, count)}")
    return lines


def check_context(target: ModelInfo, prompt_tokens: int, settings: DecodeSettings) -> str | None:
    """Refuse a prompt longer than the target's context window (``max_position_embeddings``);
    a warning when the prompt and ``max_tokens`` together run past it."""
    window = target.text_config.get("max_position_embeddings")
    if not isinstance(window, int) or window <= 0:
        return None
    if prompt_tokens > window:
        raise SettingsError(
            f"the prompt is {prompt_tokens:,} tokens and {target.name} reads at most "
            f"{window:,} (max_position_embeddings): shorten the prompt"
        )
    if prompt_tokens + settings.max_tokens > window:
        return (f"the prompt ({prompt_tokens:,} tokens) and --max-tokens "
                f"({settings.max_tokens:,}) run past {target.name}'s {window:,}-token "
                "context: the output may degrade after it")
    return None


def load_models(
    request: CompareRequest,
    store: ModelStore,
    progress: Callable[[str], None] = lambda _: None,
    prepared: Prepared | None = None,
) -> Models:
    """Load what the request needs, each model once, after ``prepare`` (its checks run
    before any weights are read; done here unless given)."""
    if prepared is None:
        prepared = prepare(request, store, progress)
    progress(f"loading {request.target}")
    target = store.get(request.target, request.revision, request.dtype)
    fit_blas_threads_to(target)
    mtp = None
    if uses_mtp(request.strategies, bool(request.draft)):
        if request.mtp_model:
            progress(f"loading {request.mtp_model}")
            mtp_source = store.get(request.mtp_model, dtype=request.dtype)
        else:
            mtp_source = target
        progress(f"loading the MTP head of {mtp_source.name}")
        mtp = load_mtp(mtp_source)
    draft = None
    if request.draft and uses_draft(request.strategies, True):
        progress(f"loading {request.draft}")
        draft = store.get(request.draft, dtype=request.dtype)
    return Models(target=target, draft=draft, mtp=mtp, calibration=prepared.calibration)


def machine_calibration(target: Path, draft: Path | None,
                        on_problem: Callable[[str], None] = lambda _: None
                        ) -> Calibration | None:
    """This machine's cached calibration (``specdeck calibrate``) of the model folder
    ``target`` with ``draft`` or, failing that, of ``target`` alone (what prompt lookup
    and MTP need); None when neither was measured here."""
    for pair_draft in ([draft, None] if draft else [None]):
        calibration = load_calibration(target, pair_draft, on_problem)
        if calibration is not None:
            return calibration
    return None


@dataclass
class CompareResult:
    request: CompareRequest
    prompt_tokens: list[int]
    models: Models
    #: Each strategy's kept run: its median repetition (the first and only one by default),
    #: added when its first measured run starts (events arrive live).
    traces: dict[str, Trace]
    #: Each strategy's estimated peak memory (None when it could not be estimated).
    memory_estimates: dict[str, MemoryEstimate] | None = None
    #: The group the target was split over (``engines.distributed``); None: one process.
    group: dict | None = None
    #: Decode tokens/s of every timed run of each strategy, in the order they ran (plain
    #: timed again after the others last, when each strategy ran once).
    measured: dict[str, list[float]] = field(default_factory=dict)
    #: Strategies asked for that could not run, and why (``request`` lists the others).
    not_run: dict[str, str] = field(default_factory=dict)


def start_compare(
    request: CompareRequest,
    store: ModelStore,
    progress: Callable[[str], None] = lambda _: None,
    on_estimates: Callable[[dict[str, MemoryEstimate] | None], None] = lambda estimates: None,
    on_not_run: Callable[[dict[str, str]], None] = lambda reasons: None,
) -> CompareResult:
    """Check, estimate and load what ``request`` needs: a result with no traces yet.
    A strategy its models cannot run (``cannot_run``) is left out, the others run;
    ``on_not_run`` hears which and why, before any weights load (ModelError when none
    can run). ``on_estimates`` hears the memory estimates before any weights load."""
    request.validate()
    described = describe_models(request, store)
    not_run = cannot_run(request, described)
    if not_run:
        runnable = [name for name in request.strategies if name not in not_run]
        if not runnable:
            name, why = next(iter(not_run.items()))
            raise ModelError(f"{why}: {strategy_of(name).needs} (--mtp-model PATH names one)")
        on_not_run(not_run)
        request = replace(request, strategies=runnable)
        described = (*described[:2], None)  # no strategy left drafts with an MTP head
    prepared = prepare(request, store, progress, described)
    on_estimates(prepared.estimates)  # the app shows them beside the measured peaks
    models = load_models(request, store, progress, prepared)
    return CompareResult(request, prepared.prompt, models, {}, prepared.estimates,
                         not_run=not_run)


def measure_strategies(
    result: CompareResult,
    on_event: Callable[[str, Event], None] = lambda name, event: None,
    progress: Callable[[str], None] = lambda _: None,
    cancelled: Callable[[], bool] = lambda: False,
    clock: Clock = time.perf_counter,
) -> CompareResult:
    """Warm up and measure each strategy of a started comparison in turn, into
    ``result.traces``; stop early (keeping what ran) when ``cancelled`` turns true.

    ``on_event`` hears the first repetition of each strategy as it runs; with
    ``request.repeats`` > 1 the strategies take turns again (drift hits them alike) and
    each keeps its median run. With one repetition, plain is timed once more after the
    others: how far two runs of the same thing differ is the noise a speedup must beat.
    """
    request, models, prompt = result.request, result.models, result.prompt_tokens

    def measure(name: str, trace: Trace, stream: bool) -> Trace:
        for event in run_strategy(name, models, prompt, request.settings, clock, cancelled):
            trace.events.append(event)
            if stream:
                on_event(name, event)
        return trace

    runs: dict[str, list[Trace]] = {}
    for rep in range(request.repeats):
        for name in request.strategies:
            if cancelled():
                break
            if rep == 0 and request.warmup_tokens:
                progress(f"warming up {name}")
                # Never longer than the run itself, which the context and memory checks
                # were made for.
                warm = replace(request.settings, max_tokens=min(
                    request.warmup_tokens, request.settings.max_tokens))
                for _ in run_strategy(name, models, prompt, warm, clock, cancelled):
                    pass
                if cancelled():  # stopped during the warm-up: nothing of this one was measured
                    break
            of = f" ({rep + 1} of {request.repeats})" if request.repeats > 1 else ""
            progress(f"running {name}{of}")
            trace = Trace(name)
            if rep == 0:  # kept from its start: a run cut short keeps what it streamed
                result.traces[name] = trace
            measure(name, trace, stream=rep == 0)
            if rep and not _finished(trace):
                break  # cancelled mid-repetition: not a measurement
            runs.setdefault(name, []).append(trace)
    measured = {name: [_speed(t) for t in ts] for name, ts in runs.items()}
    if request.repeats == 1 and len(runs) > 1 and "plain" in runs and not cancelled():
        progress("timing plain again: how far the machine's speed drifts")
        check = measure("plain", Trace("plain"), stream=False)
        if _finished(check):
            measured["plain"].append(_speed(check))
    result.traces.update({name: _median_run(ts) for name, ts in runs.items()})
    result.measured = {name: [v for v in speeds if v] for name, speeds in measured.items()}
    return result


def run_compare(
    request: CompareRequest,
    store: ModelStore | None = None,
    on_event: Callable[[str, Event], None] = lambda name, event: None,
    progress: Callable[[str], None] = lambda _: None,
    cancelled: Callable[[], bool] = lambda: False,
    clock: Clock = time.perf_counter,
    on_estimates: Callable[[dict[str, MemoryEstimate] | None], None] = lambda estimates: None,
    on_loaded: Callable[[Models], None] = lambda models: None,
    on_not_run: Callable[[dict[str, str]], None] = lambda reasons: None,
) -> CompareResult:
    """Warm up and measure each strategy in turn; stop early (keeping what ran) when
    ``cancelled`` turns true (``measure_strategies`` says how repetitions are kept).
    ``on_estimates`` hears the memory estimates before any weights load, ``on_not_run``
    the strategies left out and why (``start_compare``), ``on_loaded`` the models once
    they have."""
    result = start_compare(request, store or ModelStore(), progress, on_estimates,
                           on_not_run)
    on_loaded(result.models)
    return measure_strategies(result, on_event, progress, cancelled, clock)


def _finished(trace: Trace) -> bool:
    done = trace.done
    return done is not None and done.reason in ("length", "stop")


def _speed(trace: Trace) -> float | None:
    return compute_stats(trace.events).tokens_per_s


def _median_run(runs: list[Trace]) -> Trace:
    """The repetition of median speed (the slower middle one of an even count)."""
    ranked = sorted(runs, key=lambda t: _speed(t) or 0.0)
    return ranked[(len(ranked) - 1) // 2]
