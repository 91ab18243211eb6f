"""Sweeps: where speculation wins and where it falls off the cliff.

A sweep runs a grid of cells (k for ``draft``, depth for ``mtp``, n and k for ``ngram``,
each temperature, each prompt) against the plain baseline measured in the same sweep.
Each cell is warmed up, then timed ``reps`` times; within one prompt and temperature the
cells take turns rep by rep, so drift (thermal, other load) hits them all alike. Speed is
the median decode tokens/s; its spread is the robust (MAD-based) coefficient of variation.
At temperature 0 every cell's output must equal plain decoding: a mismatch is reported
as a correctness failure, not as a speed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

from specdeck.engines.runs.compare import encode_prompt, load_models
from specdeck.engines.core.config import DecodeSettings, DraftCount
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.core.events import Trace
from specdeck.engines.core.formatting import times
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.core.requests import CellSpec, CompareRequest, SweepRequest
from specdeck.engines.core.cost_model import CostModel
from specdeck.engines.core.stats import (
    Stats, compute_stats, median, plain_step_seconds, robust_cv, speedup,
)
from specdeck.engines.decode.run import Models, run_strategy


@dataclass
class Cell:
    """A measured cell, as saved in the sweep's JSON."""

    prompt: str
    kind: str
    strategy: str
    label: str
    temperature: float
    k: DraftCount | None
    depth: DraftCount | None
    n: int | None
    reps: int
    tokens_per_s: list[float]
    median_tokens_per_s: float | None
    speedup: float | None
    cv: float | None
    noisy: bool
    acceptance_rate: float | None
    mean_accepted: float | None
    tokens_per_round: float | None
    acceptance_by_position: list[float]
    #: Tokens per verify pass from the survival by position: 1 + s_1 + ... + s_k.
    expected_tokens_per_round: float | None
    cost_ratio: float | None
    #: A verify pass (rewind and replay included) in plain decoding steps: the textbook
    #: takes it as 1.
    verify_cost_vs_plain: float | None
    #: The speedup ``engines.cost_model`` predicts from the survival and measured costs.
    predicted_speedup: float | None
    peak_memory_bytes: int | None
    memory_over_plain_bytes: int | None
    #: Temperature 0: whether the output equals plain decoding. None at temperature > 0.
    correct: bool | None
    why: str
    #: A draft step in plain decoding steps.
    draft_cost_vs_plain: float | None = None
    #: The textbook's prediction: the same tokens per pass, a verify pass as one plain step.
    textbook_speedup: float | None = None


def summarise_cell(
    spec: CellSpec,
    kind: str,
    runs: list[Stats],
    plain: Cell | None,
    correct: bool | None,
    noisy_cv: float,
) -> Cell:
    """Fold a cell's repetitions into one row (pure: testable on synthetic runs)."""
    speeds = [s.tokens_per_s for s in runs if s.tokens_per_s]
    med = median(speeds) if speeds else None
    cv = robust_cv(speeds) if speeds else None
    proposed = sum(s.proposed for s in runs)
    accepted = sum(s.accepted for s in runs)
    drafting_rounds = sum(s.drafting_rounds for s in runs)
    rounds = sum(s.rounds for s in runs)
    rate = accepted / proposed if proposed else None
    costs = [s.cost_ratio for s in runs if s.cost_ratio is not None]
    cost = median(costs) if costs else None
    width = max((len(s.acceptance_by_position) for s in runs), default=0)
    by_position = [
        median([s.acceptance_by_position[i] for s in runs if len(s.acceptance_by_position) > i])
        for i in range(width)
    ]
    model = _cost_model(runs, by_position, plain)
    peaks = [s.peak_memory_bytes for s in runs if s.peak_memory_bytes is not None]
    peak = max(peaks) if peaks else None
    if spec.strategy == "plain":
        over_plain_speed = 1.0 if med else None
    else:
        over_plain_speed = speedup(med, plain.median_tokens_per_s if plain else None)
    over_plain = None
    if plain and plain.peak_memory_bytes is not None and peak is not None:
        over_plain = peak - plain.peak_memory_bytes
    cell = Cell(
        prompt=spec.prompt, kind=kind, strategy=spec.strategy, label=spec.label,
        temperature=spec.temperature, k=spec.k, depth=spec.depth, n=spec.n,
        reps=len(runs), tokens_per_s=speeds, median_tokens_per_s=med, speedup=over_plain_speed,
        cv=cv, noisy=cv is not None and cv > noisy_cv,
        acceptance_rate=rate,
        mean_accepted=accepted / drafting_rounds if drafting_rounds else None,
        tokens_per_round=sum(s.generated_tokens for s in runs) / rounds if rounds else None,
        acceptance_by_position=by_position,
        expected_tokens_per_round=model.expected_tokens() if model else None, cost_ratio=cost,
        verify_cost_vs_plain=model.verify_pass if model and model.baseline == "plain" else None,
        predicted_speedup=model.predicted() if model else None,
        peak_memory_bytes=peak, memory_over_plain_bytes=over_plain, correct=correct, why="",
        draft_cost_vs_plain=model.draft_step if model and model.baseline == "plain" else None,
        textbook_speedup=model.textbook() if model else None,
    )
    cell.why = why_line(cell, model)
    return cell


def _cost_model(runs: list[Stats], survival: list[float], plain: Cell | None
                ) -> CostModel | None:
    """The cell's rounds priced in plain steps (``engines.cost_model``): the median draft
    step and verify pass over its repetitions, against the median plain step of the same
    prompt; None when nothing was drafted."""
    drafting = [s for s in runs if s.drafting_rounds and s.verify_pass_seconds]
    if not drafting:
        return None
    step = plain_step_seconds(plain.median_tokens_per_s) if plain else None
    singles = [s.single_pass_seconds for s in drafting if s.single_pass_seconds]
    single = median(singles) if singles else None
    rounds = sum(s.drafting_rounds for s in drafting)
    return CostModel.measured(
        survival,
        sum(s.proposed for s in drafting) / rounds,
        median([s.draft_step_seconds for s in drafting]),
        median([s.verify_pass_seconds for s in drafting]),
        step or single,
        "plain" if step else "one-token passes",
        accepted=sum(s.accepted for s in drafting) / rounds,
        idle_share=1.0 - rounds / sum(s.rounds for s in drafting),
        idle_pass_seconds=single,
    )


def why_line(cell: Cell, model: CostModel | None) -> str:
    """The cost model's account of a cell, next to what was measured."""
    if cell.correct is False:
        return "output differs from plain decoding: a correctness failure, not a speed"
    if cell.strategy == "plain":
        return "baseline"
    if cell.acceptance_rate is None or model is None:
        return "nothing was drafted"
    return model.why(cell.speedup, cell.acceptance_rate)


def recommendations(cells: list[Cell]) -> list[str]:
    """The best setting per prompt kind and temperature, and where speculation never wins."""
    lines = []
    groups: dict[tuple[str, float], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.kind or cell.prompt, cell.temperature), []).append(cell)
    for (kind, temp), group in groups.items():
        failures = [c.label for c in group if c.correct is False]
        if failures:
            lines.append(f"{kind} @ temp {temp:g}: output differs from plain for {', '.join(failures)}")
        candidates = [
            c for c in group
            if c.strategy != "plain" and c.speedup is not None and c.correct is not False
        ]
        if not candidates:
            continue
        best = max(candidates, key=lambda c: c.speedup)
        if best.speedup > 1.0:
            note = " (noisy: rerun with more --reps)" if best.noisy else ""
            lines.append(f"{kind} @ temp {temp:g}: best {best.label}, {times(best.speedup)} plain{note}")
        else:
            lines.append(
                f"{kind} @ temp {temp:g}: speculation never beat plain decoding here "
                f"(best {best.label}, {times(best.speedup)}): use plain"
            )
    return lines


def _most(counts: list[DraftCount]) -> DraftCount:
    """The setting that drafts the most of ``counts`` (a policy may draft up to the
    limit), for the memory estimate."""
    policy = next((c for c in counts if isinstance(c, str)), None)
    return max(counts, default=1) if policy is None else policy


@dataclass
class SweepProgress:
    done: int
    total: int
    label: str
    eta_seconds: float | None


def sweep_models(request: SweepRequest, store: ModelStore,
                 on_message: Callable[[str], None] = lambda m: None) -> Models:
    """Check and load the models a sweep uses, after a memory check sized for its
    largest cell (the longest prompt, the most drafts)."""
    request.validate()
    return load_models(
        CompareRequest(
            target=request.target, strategies=["plain", *request.strategies],
            prompt=max((p.text for p in request.prompts), key=len),
            draft=request.draft, mtp_model=request.mtp_model,
            settings=DecodeSettings(
                max_tokens=request.max_tokens, num_draft_tokens=_most(request.ks),
                mtp_depth=_most(request.depths), ngram_k=_most(request.ks),
            ),
            strict_memory=request.strict_memory, force=request.force, group=request.group,
            dtype=request.dtype,
        ),
        store,
        on_message,
    )


def run_sweep(
    request: SweepRequest,
    store: ModelStore | None = None,
    progress: Callable[[SweepProgress], None] = lambda p: None,
    on_message: Callable[[str], None] = lambda m: None,
    cancelled: Callable[[], bool] = lambda: False,
    models: Models | None = None,
) -> tuple[list[Cell], bool]:
    """Measure every cell; returns the cells finished and whether the sweep was complete.

    ``cancelled`` (or Ctrl+C), asked after every event, stops the sweep and keeps every
    finished prompt group.
    ``models``: already loaded by ``sweep_models`` (else loaded here).
    """
    request.validate()
    if models is None:
        models = sweep_models(request, store or ModelStore(), on_message)
    base = DecodeSettings(max_tokens=request.max_tokens, sampling=request.sampling,
                          stop_at_eos=False)
    specs = request.cells()
    groups: dict[tuple[str, float], list[CellSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.prompt, spec.temperature), []).append(spec)
    total = len(specs) * (request.reps + request.warmup)
    finished = 0
    started = time.perf_counter()
    cells: list[Cell] = []
    kinds = {p.name: p.kind for p in request.prompts}
    texts = {p.name: p.text for p in request.prompts}

    def measure(spec: CellSpec, rep: int, ids: list[int], warm: bool) -> Trace:
        nonlocal finished
        settings = spec.settings(base, request.sampling.seed + rep)
        if warm:
            settings = replace(settings, max_tokens=min(16, request.max_tokens))
        trace = Trace(spec.label, list(run_strategy(spec.strategy, models, ids, settings,
                                                    cancelled=cancelled)))
        done = trace.done
        if done is not None and done.reason == "error":
            raise SettingsError(f"{spec.label} on {spec.prompt} failed: {done.error}")
        finished += 1
        elapsed = time.perf_counter() - started
        progress(SweepProgress(finished, total, f"{spec.prompt}: {spec.label}",
                               elapsed / finished * (total - finished)))
        return trace

    try:
        for (prompt, temp), group in groups.items():
            ids = encode_prompt(models.target.tokenizer, texts[prompt])
            for spec in group:
                for rep in range(request.warmup):
                    measure(spec, rep, ids, warm=True)
                    if cancelled():
                        raise KeyboardInterrupt
            runs: dict[CellSpec, list[Trace]] = {spec: [] for spec in group}
            for rep in range(request.reps):
                for spec in group:
                    runs[spec].append(measure(spec, rep, ids, warm=False))
                    if cancelled():
                        raise KeyboardInterrupt
            plain_tokens = [t.tokens for t in runs[group[0]]]
            plain = None
            for spec in group:
                correct = None
                if temp == 0.0:
                    correct = all(t.tokens == p for t, p in zip(runs[spec], plain_tokens))
                stats = [compute_stats(t.events) for t in runs[spec]]
                cell = summarise_cell(spec, kinds[prompt], stats, plain, correct, request.noisy_cv)
                if spec.strategy == "plain":
                    plain = cell
                cells.append(cell)
    except KeyboardInterrupt:
        return cells, False
    return cells, True
