""""Which draft?": the drafts that share a target's tokenizer, ranked by the speedup a
short probe on this machine predicts for each, instead of "compatible".

``specdeck models --rank-drafts TARGET`` probes each candidate (``engines.draft_probe``:
a few prompts, a few tokens each, temperature 0), measures its acceptance by position and
its costs against the target's plain steps, and prices them with the one cost model
(``engines.cost_model``): each draft's best k and the speedup predicted there. The result
is cached per machine and target (``engines.measured_cache``), so the settings' model
picker shows the ranking without computing a token. No mlx here: the app reads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from specdeck.engines.core.formatting import percent, times
from specdeck.engines.measure.measured_cache import cache_file, model_identity, read_cached, write_cached

#: The cache's folder, and the version of the files this module writes.
KIND = "draft-ranking"
VERSION = 1
#: A ranking holds at most this many drafts (a cache with more is not one we wrote).
MAX_DRAFTS = 256


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _text(value: Any) -> bool:
    return type(value) is str and len(value) < 4096


@dataclass(frozen=True, slots=True)
class RankedDraft:
    """One candidate's probe: its acceptance, survival by position and costs, and the
    best k and speedup they predict."""

    name: str
    #: The folder probed (resolved), and its identity then: a draft rewritten since is
    #: no longer matched by the picker.
    path: str
    identity: str
    #: Accepted / proposed over the probe's rounds, and the survival at positions 1..k.
    acceptance: float
    survival: tuple[float, ...]
    #: A draft step and the verify pass of the probe's k, in target steps.
    draft_step: float
    verify_pass: float
    #: The k predicted fastest and its predicted speedup; k = 0 when even that is
    #: slower than plain decoding (the speedup then says by how much).
    best_k: int
    speedup: float

    def summary(self) -> str:
        """``1.21x at k=3 (62% accepted)``, or that plain decoding wins."""
        where = f"at k={self.best_k}" if self.best_k else "(plain wins)"
        return f"{times(self.speedup)} {where}, {percent(self.acceptance)} accepted"

    def to_dict(self) -> dict:
        return {"name": self.name, "path": self.path, "identity": self.identity,
                "acceptance": self.acceptance, "survival": list(self.survival),
                "draft_step": self.draft_step, "verify_pass": self.verify_pass,
                "best_k": self.best_k, "speedup": self.speedup}

    @classmethod
    def from_dict(cls, data: Any) -> RankedDraft | None:
        if type(data) is not dict or not all(_text(data.get(k)) for k in ("name", "path", "identity")):
            return None
        numbers = ("acceptance", "draft_step", "verify_pass", "speedup")
        if not all(_number(data.get(k)) and data[k] >= 0 for k in numbers):
            return None
        survival = data.get("survival")
        if type(survival) is not list or len(survival) > 64 or not all(
                _number(s) and 0 <= s <= 1 for s in survival):
            return None
        if type(data.get("best_k")) is not int or not 0 <= data["best_k"] <= 64:
            return None
        return cls(data["name"], data["path"], data["identity"], float(data["acceptance"]),
                   tuple(float(s) for s in survival), float(data["draft_step"]),
                   float(data["verify_pass"]), data["best_k"], float(data["speedup"]))


@dataclass(frozen=True, slots=True)
class DraftRanking:
    """A target's candidate drafts, best predicted speedup first, probed on ``machine``."""

    machine: str
    target: str
    target_identity: str
    #: When it was measured (ISO 8601, UTC), and what the probe ran.
    measured: str
    probe: str
    drafts: tuple[RankedDraft, ...]

    def find(self, path: Path | str) -> tuple[int, RankedDraft] | None:
        """(place from 1, entry) of the draft in folder ``path`` as probed (same files),
        else None."""
        resolved = str(Path(path).expanduser().resolve())
        for place, draft in enumerate(self.drafts, 1):
            if draft.path == resolved and draft.identity == model_identity(resolved):
                return place, draft
        return None

    def to_dict(self) -> dict:
        return {"kind": KIND, "version": VERSION, "machine": self.machine,
                "target": self.target, "target_identity": self.target_identity,
                "measured": self.measured, "probe": self.probe,
                "drafts": [d.to_dict() for d in self.drafts]}

    @classmethod
    def from_dict(cls, data: Any) -> DraftRanking | None:
        """As ``to_dict`` wrote it; None when ``data`` is not such a record."""
        if type(data) is not dict or data.get("kind") != KIND or data.get("version") != VERSION:
            return None
        keys = ("machine", "target", "target_identity", "measured", "probe")
        if not all(_text(data.get(k)) for k in keys):
            return None
        drafts = data.get("drafts")
        if type(drafts) is not list or len(drafts) > MAX_DRAFTS:
            return None
        ranked = [RankedDraft.from_dict(d) for d in drafts]
        if None in ranked:
            return None
        return cls(*(data[k] for k in keys), tuple(ranked))


def rank(drafts: list[RankedDraft]) -> tuple[RankedDraft, ...]:
    """Best predicted speedup first (the higher acceptance on a tie)."""
    return tuple(sorted(drafts, key=lambda d: (-d.speedup, -d.acceptance, d.name)))


def ranking_file(target: Path | str) -> Path:
    """Where the ranking of ``target``'s drafts on this machine is cached."""
    return cache_file(KIND, target)


def load_ranking(target: Path | str, on_problem: Callable[[str], None] = lambda line: None
                 ) -> DraftRanking | None:
    """The cached ranking of the drafts for the model folder ``target`` on this machine,
    or None (never ranked here, or the target changed since); a broken cache file is
    ignored, said once through ``on_problem``."""
    return read_cached(ranking_file(target), DraftRanking.from_dict, on_problem)


def save_ranking(ranking: DraftRanking, target: Path | str) -> Path:
    """Cache ``ranking`` for ``target``; the file it went to (OSError when it cannot)."""
    path = ranking_file(target)
    write_cached(path, ranking.to_dict())
    return path
