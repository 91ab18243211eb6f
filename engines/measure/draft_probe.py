"""The short probe behind ``specdeck models --rank-drafts``: each candidate draft runs
the draft strategy on a few prompts for a few tokens (temperature 0, after a short
warm-up), right after plain decoding of the same prompts, and its rounds are priced with
the one cost model (``engines.stats.cost_model``: the survival by position it reached,
its draft step and verify pass in the target's plain steps). Times are medians over the
rounds, and each candidate is priced against the plain steps timed just before it, so a
burst of other work on the machine moves one round, not a ranking.
``engines.draft_ranking`` holds and caches the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Callable

from specdeck.engines.models.catalog import ModelInfo
from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.decode.shared import Clock
from specdeck.engines.measure.draft_ranking import DraftRanking, RankedDraft, rank
from specdeck.engines.core.errors import ModelError
from specdeck.engines.core.events import Done, Event, Round
from specdeck.engines.models.loading import LoadedModel, ModelStore, vocabulary_mismatch
from specdeck.engines.measure.machine import machine_fingerprint
from specdeck.engines.measure.measured_cache import model_identity
from specdeck.engines.core.stats import Stats, compute_stats, cost_model, median
from specdeck.engines.decode.run import Models, run_strategy

#: Tokens per prompt, drafts per round, and the warm-up's tokens.
PROBE_TOKENS, PROBE_K, WARMUP_TOKENS = 24, 4, 4


@dataclass(frozen=True, slots=True)
class ProbeProgress:
    """``done`` of ``total`` runs; ``label`` names the one about to run."""

    done: int
    total: int
    label: str


def _rounds(models: Models, strategy: str, prompts: list[list[int]],
            settings: DecodeSettings, clock: Clock) -> list[Round]:
    """The rounds of ``strategy`` on every prompt, after an untimed warm-up; a failed
    run raises ModelError."""
    warm = replace(settings, max_tokens=WARMUP_TOKENS)
    for _ in run_strategy(strategy, models, prompts[0], warm, clock):
        pass
    rounds: list[Round] = []
    for ids in prompts:
        events: list[Event] = list(run_strategy(strategy, models, ids, settings, clock))
        done = events[-1] if events and isinstance(events[-1], Done) else None
        if done is not None and done.reason == "error":
            raise ModelError(f"the probe failed: {done.error}")
        rounds += [e for e in events if isinstance(e, Round)]
    return rounds


def _typical(rounds: list[Round]) -> Stats:
    """The statistics of ``rounds`` with a draft step and a verify pass each the median
    over the rounds that drafted (not the mean: one round slowed by other work would
    move it)."""
    stats = compute_stats(rounds)
    drafting = [r for r in rounds if r.drafted]
    if not drafting:
        return stats
    return replace(stats,
                   draft_step_seconds=median([r.draft_seconds / len(r.drafted) for r in drafting]),
                   verify_pass_seconds=median([r.verify_seconds for r in drafting]))


def probe_drafts(
    target: LoadedModel,
    candidates: list[ModelInfo],
    prompts: list[list[int]],
    *,
    tokens: int = PROBE_TOKENS,
    k: int = PROBE_K,
    progress: Callable[[ProbeProgress], None] = lambda p: None,
    on_skip: Callable[[str], None] = lambda line: None,
    clock: Clock = time.perf_counter,
) -> DraftRanking:
    """Probe each of ``candidates`` as a draft for ``target`` on ``prompts`` (token ids)
    and rank them; a candidate that cannot draft for it (another tokenizer, a model that
    does not load) is left out, said through ``on_skip``. ``clock`` times the runs
    (tests inject one)."""
    settings = DecodeSettings(max_tokens=tokens, num_draft_tokens=k, stop_at_eos=False,
                              sampling=Sampling(temperature=0.0))
    total = len(candidates)
    ranked: list[RankedDraft] = []
    for done, info in enumerate(candidates):
        progress(ProbeProgress(done, total, info.name))
        try:
            draft = ModelStore().get(str(info.path))  # its own store: freed after its probe
            reason = vocabulary_mismatch(target.tokenizer, draft.tokenizer)
            if reason:
                raise ModelError(f"another tokenizer ({reason})")
            plain = _rounds(Models(target), "plain", prompts, settings, clock)
            rounds = _rounds(Models(target, draft), "draft", prompts, settings, clock)
        except ModelError as exc:
            on_skip(f"{info.name}: left out: {exc}")
            continue
        stats = _typical(rounds)
        model = cost_model(stats, median([r.verify_seconds for r in plain]))
        if model is None:
            on_skip(f"{info.name}: left out: it drafted nothing")
            continue
        best = model.best_k()
        speed = model.predicted(best)
        ranked.append(RankedDraft(
            name=info.name, path=str(info.path.resolve()), identity=model_identity(info.path),
            acceptance=stats.acceptance_rate or 0.0, survival=tuple(model.survival),
            draft_step=model.draft_step, verify_pass=model.verify_pass,
            best_k=best if speed > 1.0 else 0, speedup=speed,
        ))
    progress(ProbeProgress(total, total, "done"))
    return DraftRanking(
        machine=machine_fingerprint(), target=target.source,
        target_identity=model_identity(target.path),
        measured=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        probe=f"{len(prompts)} prompts x {tokens} tokens, k={k}, temperature 0",
        drafts=rank(ranked),
    )

