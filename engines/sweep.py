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

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from specdeck.engines.compare import CompareRequest, encode_prompt, load_models
from specdeck.engines.config import DecodeSettings, Sampling
from specdeck.engines.errors import SettingsError
from specdeck.engines.events import Trace
from specdeck.engines.files import UnreadableFile, read_text
from specdeck.engines.loading import ModelStore
from specdeck.engines.stats import Stats, compute_stats, expected_tokens_per_round, median, robust_cv
from specdeck.engines.strategies import run_strategy

SPECULATIVE = ("draft", "mtp", "ngram")


@dataclass(frozen=True, slots=True)
class SweepPrompt:
    """One prompt of a sweep; ``kind`` groups prompts in the summary (code, prose...)."""

    name: str
    text: str
    kind: str = ""


@dataclass(frozen=True, slots=True)
class CellSpec:
    """One point of the grid."""

    prompt: str
    strategy: str
    temperature: float
    k: int | None = None
    depth: int | None = None
    n: int | None = None

    @property
    def label(self) -> str:
        if self.strategy == "draft":
            return f"draft k={self.k}"
        if self.strategy == "mtp":
            return f"mtp depth={self.depth}"
        if self.strategy == "ngram":
            return f"ngram n={self.n} k={self.k}"
        return self.strategy

    @property
    def drafts(self) -> int | None:
        """The x axis of the sweep chart: drafts per round."""
        return self.depth if self.strategy == "mtp" else self.k

    def settings(self, base: DecodeSettings, seed: int) -> DecodeSettings:
        changes: dict = {"sampling": replace(base.sampling, temperature=self.temperature, seed=seed)}
        if self.strategy == "draft":
            changes["num_draft_tokens"] = self.k
        elif self.strategy == "mtp":
            changes["mtp_depth"] = self.depth
        elif self.strategy == "ngram":
            changes["ngram_n"], changes["ngram_k"] = self.n, self.k
        return replace(base, **changes)


@dataclass
class SweepRequest:
    target: str
    prompts: list[SweepPrompt]
    strategies: list[str] = field(default_factory=lambda: ["draft"])
    draft: str | None = None
    mtp_model: str | None = None
    ks: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    depths: list[int] = field(default_factory=lambda: [1, 2, 3])
    ngram_ns: list[int] = field(default_factory=lambda: [3])
    temperatures: list[float] = field(default_factory=lambda: [0.0])
    reps: int = 5
    warmup: int = 1
    max_tokens: int = 128
    seed: int = 0
    #: Cells whose robust CV is above this are flagged as noisy.
    noisy_cv: float = 0.05
    sampling: Sampling = field(default_factory=Sampling)
    #: Refuse to load when the memory estimate does not fit in free memory (else warn).
    strict_memory: bool = False
    #: Run even when the estimate is beyond the machine's whole memory (else refused).
    force: bool = False

    def cells(self) -> list[CellSpec]:
        cells = []
        for prompt in self.prompts:
            for temp in self.temperatures:
                cells.append(CellSpec(prompt.name, "plain", temp))
                if "draft" in self.strategies:
                    cells += [CellSpec(prompt.name, "draft", temp, k=k) for k in self.ks]
                if "mtp" in self.strategies:
                    cells += [CellSpec(prompt.name, "mtp", temp, depth=d) for d in self.depths]
                if "ngram" in self.strategies:
                    cells += [
                        CellSpec(prompt.name, "ngram", temp, k=k, n=n)
                        for n in self.ngram_ns for k in self.ks
                    ]
        return cells

    def validate(self) -> None:
        if not self.prompts:
            raise SettingsError("the sweep has no prompts")
        unknown = [s for s in self.strategies if s not in SPECULATIVE]
        if unknown:
            raise SettingsError(
                f"cannot sweep {unknown[0]!r} (choose from {', '.join(SPECULATIVE)})"
            )
        if self.reps < 1 or self.warmup < 0:
            raise SettingsError("--reps must be >= 1 and --warmup >= 0")
        if not 0.0 <= self.noisy_cv < float("inf"):
            raise SettingsError(f"--noisy-cv must be a number >= 0 (got {self.noisy_cv})")
        names = [p.name for p in self.prompts]
        if len(set(names)) != len(names):
            raise SettingsError("two prompts of the sweep have the same name")
        base = DecodeSettings(max_tokens=self.max_tokens, sampling=self.sampling)
        for cell in self.cells():  # rep r runs with seed + r: both ends must be seeds
            cell.settings(base, self.seed).validate()
            cell.settings(base, self.seed + self.reps - 1).validate()


@dataclass
class Cell:
    """A measured cell, as saved in the sweep's JSON."""

    prompt: str
    kind: str
    strategy: str
    label: str
    temperature: float
    k: int | None
    depth: int | None
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
    expected_tokens_per_round: float | None
    cost_ratio: float | None
    #: A verify pass (rewind and replay included) in plain decoding steps: the model
    #: behind ``predicted_speedup`` takes it as 1.
    verify_cost_vs_plain: float | None
    predicted_speedup: float | None
    peak_memory_bytes: int | None
    memory_over_plain_bytes: int | None
    #: Temperature 0: whether the output equals plain decoding. None at temperature > 0.
    correct: bool | None
    why: str


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
    per_round = proposed / drafting_rounds if drafting_rounds else None
    costs = [s.cost_ratio for s in runs if s.cost_ratio is not None]
    cost = median(costs) if costs else None
    expected = expected_tokens_per_round(rate, per_round) if rate is not None else None
    predicted = expected / (per_round * cost + 1) if expected and cost is not None else None
    width = max((len(s.acceptance_by_position) for s in runs), default=0)
    by_position = [
        median([s.acceptance_by_position[i] for s in runs if len(s.acceptance_by_position) > i])
        for i in range(width)
    ]
    peaks = [s.peak_memory_bytes for s in runs if s.peak_memory_bytes is not None]
    peak = max(peaks) if peaks else None
    speedup = None
    if spec.strategy == "plain":
        speedup = 1.0 if med else None
    elif plain and plain.median_tokens_per_s and med:
        speedup = med / plain.median_tokens_per_s
    verify_cost = None
    if plain and plain.median_tokens_per_s and rounds:
        per_verify = median([s.verify_seconds / s.rounds for s in runs if s.rounds])
        verify_cost = per_verify * plain.median_tokens_per_s
    over_plain = None
    if plain and plain.peak_memory_bytes is not None and peak is not None:
        over_plain = peak - plain.peak_memory_bytes
    cell = Cell(
        prompt=spec.prompt, kind=kind, strategy=spec.strategy, label=spec.label,
        temperature=spec.temperature, k=spec.k, depth=spec.depth, n=spec.n,
        reps=len(runs), tokens_per_s=speeds, median_tokens_per_s=med, speedup=speedup,
        cv=cv, noisy=cv is not None and cv > noisy_cv,
        acceptance_rate=rate,
        mean_accepted=accepted / drafting_rounds if drafting_rounds else None,
        tokens_per_round=sum(s.generated_tokens for s in runs) / rounds if rounds else None,
        acceptance_by_position=by_position,
        expected_tokens_per_round=expected, cost_ratio=cost,
        verify_cost_vs_plain=verify_cost, predicted_speedup=predicted,
        peak_memory_bytes=peak, memory_over_plain_bytes=over_plain, correct=correct, why="",
    )
    cell.why = why_line(cell)
    return cell


def why_line(cell: Cell) -> str:
    """The speculation model's account of a cell, next to what was measured."""
    if cell.correct is False:
        return "output differs from plain decoding: a correctness failure, not a speed"
    if cell.strategy == "plain":
        return "baseline"
    if cell.acceptance_rate is None or cell.expected_tokens_per_round is None:
        return "nothing was drafted"
    parts = [
        f"{cell.acceptance_rate:.0%} accepted -> {cell.expected_tokens_per_round:.2f} "
        "tokens per verify pass"
    ]
    if cell.cost_ratio is not None:
        parts.append(f"a draft step costs {cell.cost_ratio:.2f} of a verify pass")
    if cell.verify_cost_vs_plain is not None:
        parts.append(f"a verify pass costs {cell.verify_cost_vs_plain:.2f} plain steps")
    if cell.predicted_speedup is not None and cell.speedup is not None:
        parts.append(f"predicted {cell.predicted_speedup:.2f}x, measured {cell.speedup:.2f}x")
    return "; ".join(parts)


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
            lines.append(f"{kind} @ temp {temp:g}: best {best.label}, {best.speedup:.2f}x plain{note}")
        else:
            lines.append(
                f"{kind} @ temp {temp:g}: speculation never beat plain decoding here "
                f"(best {best.label}, {best.speedup:.2f}x): use plain"
            )
    return lines


@dataclass
class SweepProgress:
    done: int
    total: int
    label: str
    eta_seconds: float | None


def run_sweep(
    request: SweepRequest,
    store: ModelStore | None = None,
    progress: Callable[[SweepProgress], None] = lambda p: None,
    on_message: Callable[[str], None] = lambda m: None,
    cancelled: Callable[[], bool] = lambda: False,
) -> tuple[list[Cell], bool]:
    """Measure every cell; returns the cells finished and whether the sweep was complete.

    ``cancelled`` (or Ctrl+C) stops between runs and keeps every finished prompt group.
    """
    request.validate()
    # The memory check sizes the largest cell: the longest prompt, the most drafts.
    models = load_models(
        CompareRequest(
            target=request.target, strategies=["plain", *request.strategies],
            prompt=max((p.text for p in request.prompts), key=len),
            draft=request.draft, mtp_model=request.mtp_model,
            settings=DecodeSettings(
                max_tokens=request.max_tokens, num_draft_tokens=max(request.ks, default=1),
                mtp_depth=max(request.depths, default=1), ngram_k=max(request.ks, default=1),
            ),
            strict_memory=request.strict_memory, force=request.force,
        ),
        store or ModelStore(),
        on_message,
    )
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
        settings = spec.settings(base, request.seed + rep)
        if warm:
            settings = replace(settings, max_tokens=min(16, request.max_tokens))
        trace = Trace(spec.label, list(run_strategy(spec.strategy, models, ids, settings)))
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


def _read_prompt_file(path: Path) -> str:
    try:
        return read_text(path)
    except (OSError, UnicodeDecodeError, UnreadableFile) as exc:
        raise SettingsError(f"cannot read the prompt file {path}: {exc}") from None


def read_prompt_set(value: str) -> list[SweepPrompt]:
    """Prompts from a prompt file of ``prompts/``'s format, a plain text file, a folder of
    prompt files, a JSONL file (one ``{"prompt": ..., "name"?: ..., "kind"?: ...}`` per
    line) or, failing all those, the text itself."""
    from specdeck.prompts import parse_prompt, text_of

    path = Path(value).expanduser()
    if path.is_dir():
        files = sorted(path.glob("*.txt"))
        if not files:
            raise SettingsError(f"{value} holds no prompt files (*.txt)")
        out = []
        for f in files:
            try:
                p = parse_prompt(f.stem, _read_prompt_file(f))
            except ValueError as exc:  # not in the format of prompts/
                raise SettingsError(f"{f}: {exc}") from None
            out.append(SweepPrompt(p.key, p.text, p.key))
        return out
    if path.is_file():
        content = _read_prompt_file(path)
        if path.suffix == ".jsonl":
            out = []
            for number, line in enumerate(content.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    text = row["prompt"] if isinstance(row, dict) else None
                except (json.JSONDecodeError, KeyError):
                    text = None
                if not isinstance(text, str) or not text:
                    raise SettingsError(
                        f"{value} line {number}: expected {{\"prompt\": \"...\"}}"
                    )
                out.append(SweepPrompt(row.get("name") or f"p{number}", text, row.get("kind", "")))
            return out
        return [SweepPrompt(path.stem, text_of(path.stem, content), path.stem)]
    return [SweepPrompt("prompt", value, "prompt")]


def sweep_document(request: SweepRequest, cells: list[Cell], complete: bool, machine: dict) -> dict:
    """The sweep as a session-like JSON document."""
    from datetime import datetime, timezone

    config = asdict(request)
    config["prompts"] = [asdict(p) for p in request.prompts]
    return {
        "schema_version": 1,
        "kind": "sweep",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "partial": not complete,
        "config": config,
        "machine": machine,
        "cells": [asdict(c) for c in cells],
        "recommendations": recommendations(cells),
    }

