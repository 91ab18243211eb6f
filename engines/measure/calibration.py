""""Will speculation help on my machine?": a target pass of every length a round can
verify, a draft step and an MTP step, timed on this machine, and what they predict.

``specdeck calibrate`` times them (``engines.pass_timing``) without generating an answer:
a target step (a pass of one token), verify passes of 2..17 tokens (k = 1..16), one step
of the draft model and one of the target's MTP head, each the median of several
repetitions with a robust spread; then a few short runs of specdeck's own loop time a
plain step as it decodes and what a speculative round adds to its passes (the verdict,
the rewind, the recording: ``pass_timing.measure_loop``). Priced in plain steps they
feed the one cost model
(``engines.cost_model.CostModel``, every verify pass measured rather than on its line),
which turns an acceptance into a speedup for each k: the acceptance at which each k
breaks even with plain decoding, and the best k for a given acceptance.

*Acceptance* here is the chance that a draft is kept given that the ones before it were
(the conditional rate, the same at every position), so the survival at position i is
``acceptance ** i``. A run's measured survival by position can be given instead
(``cost_model(survival=...)``).

A calibration also judges how far each drafter's drafts run on ordinary text (a few of
the built-in prompts): the draft model's greedy guesses and the MTP head's chained
drafts (``engines.measure.guess_probe``): what a typical round keeps, and the best k
that predicts on such text.

The result is cached per machine and model pair (``engines.measured_cache``) for the
adaptive draft length (``drafting_costs``: ``auto`` drafts from its first round, priced
by these costs until its run has timed its own), the estimate shown before a run and
``calibrate --cached``.
No mlx here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from specdeck.engines.core.config import MAX_DRAFT_TOKENS
from specdeck.engines.core.cost_model import CostModel
from specdeck.engines.distributed.costs import PASS_SIZES
from specdeck.engines.measure.measured_cache import cache_file, read_cached, write_cached

#: The cache's folder, and the version of the files this module writes.
KIND = "calibration"
VERSION = 3
#: Who drafts: an external draft model, or the target's own MTP head.
PROPOSERS = ("draft", "mtp")
#: Timed repetitions of every probe, and untimed rounds before them (``pass_timing``).
REPS, WARMUP = 15, 2
#: Acceptances of the table ``calibrate`` prints.
TABLE_ACCEPTANCES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: The built-in prompts the draft's guesses are judged on (``engines.measure.guess_probe``),
#: answers written, not copied: a copied stretch (summarise, repeat_input) makes any
#: draft look deep, and ``auto`` sees such stretches in its own run anyway; and the
#: output tokens judged on each.
GUESS_PROMPTS, GUESS_TOKENS = ("code", "prose"), 128


@dataclass(frozen=True, slots=True)
class Timing:
    """One probe's time: the median of its repetitions, in seconds, and their robust
    spread (``stats.robust_cv``: 0.05 means the repetitions spread about 5 %)."""

    seconds: float
    spread: float

    def to_dict(self) -> dict:
        return {"seconds": self.seconds, "spread": self.spread}

    @classmethod
    def from_dict(cls, data: Any) -> Timing | None:
        if type(data) is not dict:
            return None
        seconds, spread = data.get("seconds"), data.get("spread")
        if not all(type(v) in (int, float) and math.isfinite(v) for v in (seconds, spread)):
            return None
        if seconds <= 0 or spread < 0:
            return None
        return cls(float(seconds), float(spread))


def nondecreasing(values: Sequence[float]) -> list[float]:
    """The nondecreasing sequence nearest ``values`` (least squares: adjacent values
    out of order are pooled into their mean). A pass of more tokens does more work; one
    timed cheaper than a shorter one is noise, and taken as it was timed it would make
    its k look better than its neighbours (seen here: 5 tokens 1.37x against 1.15x and
    1.23x either side)."""
    blocks: list[list[float]] = []  # [mean, count]
    for value in values:
        blocks.append([value, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (mean_a, n_a), (mean_b, n_b) = blocks[-2], blocks.pop()
            blocks[-1] = [(mean_a * n_a + mean_b * n_b) / (n_a + n_b), n_a + n_b]
    return [mean for mean, count in blocks for _ in range(int(count))]


def survival_of(acceptance: float, k: int = MAX_DRAFT_TOKENS) -> tuple[float, ...]:
    """The survival at positions 1..k when every draft is kept with chance ``acceptance``
    given the ones before it: ``acceptance ** i``."""
    return tuple(acceptance ** i for i in range(1, k + 1))


@dataclass(frozen=True, slots=True)
class Calibration:
    """A target's passes of ``PASS_SIZES`` tokens, a draft step and an MTP step, as
    timed on one machine (``machine``) for one model pair (identities from
    ``engines.measured_cache.model_identity``)."""

    machine: str
    target: str
    target_identity: str
    draft: str | None
    draft_identity: str | None
    #: A target pass of 1, 2, ..., 17 tokens: ``passes[0]`` is one target step.
    passes: tuple[Timing, ...]
    draft_step: Timing | None
    mtp_step: Timing | None
    reps: int
    #: When it was measured (ISO 8601, UTC).
    measured: str
    #: A step of plain decoding as specdeck's loop runs it (detokenizing, events), and
    #: what a speculative round's own work (verdict, rewind, recording) adds to its
    #: passes, for the draft model's rounds and for the MTP head's; None when the loop
    #: was not timed (``pass_timing.measure_loop``). Without them a round looks cheaper
    #: than it is, the more so the fewer tokens it verifies, and the best k predicted
    #: comes out too small. Each drafter's own: an MTP round does more (its chained
    #: head steps sampled and joined, the verify pass's hidden states kept), and priced
    #: by the draft model's work the demo's head ran rounds of one and two drafts
    #: 0.2-0.5 plain steps dearer than calibrated.
    plain_step: Timing | None = None
    draft_round_overhead: Timing | None = None
    mtp_round_overhead: Timing | None = None
    #: The draft model's greedy guesses on ordinary text (``engines.measure.guess_probe``):
    #: ``s_i``, the share of output tokens from which its next i guesses were all
    #: right, i = 1..16; None when they were not judged (no draft model).
    guess_survival: tuple[float, ...] | None = None
    #: The MTP head's greedy drafts on the same text (``engines.measure.guess_probe.mtp_runs``):
    #: ``s_i``, the share of output tokens from which a round of the head keeps i or
    #: more drafts, i = 1..``MAX_MTP_DEPTH``; None when not judged (no MTP head).
    mtp_survival: tuple[float, ...] | None = None

    @property
    def target_step(self) -> Timing:
        return self.passes[0]

    @property
    def unit(self) -> float:
        """The seconds every cost is priced in: a step of plain decoding in the loop
        where it was timed, else a target pass of one token."""
        return (self.plain_step or self.target_step).seconds

    @property
    def proposers(self) -> tuple[str, ...]:
        """Who can draft with what was measured (``PROPOSERS``)."""
        return tuple(p for p, t in zip(PROPOSERS, (self.draft_step, self.mtp_step)) if t)

    def steps(self, seconds: float) -> float:
        """``seconds`` in plain steps (``unit``)."""
        return seconds / self.unit

    def step_timing(self, proposer: str) -> Timing | None:
        """One draft step of ``proposer`` (``PROPOSERS``) as timed; None when it was
        not."""
        return {"draft": self.draft_step, "mtp": self.mtp_step}.get(proposer)

    def proposer_step(self, proposer: str) -> float:
        """One draft step of ``proposer`` in plain steps; ValueError when it was not
        measured."""
        timing = self.step_timing(proposer)
        if timing is None:
            raise ValueError(f"no {proposer} step was measured")
        return self.steps(timing.seconds)

    def round_overhead(self, drafter: str) -> Timing | None:
        """What a round of ``drafter`` does in the loop besides its draft steps and its
        verify pass (prompt lookup's: as a draft model's round, else an MTP head's);
        None when the loop was not timed."""
        if drafter == "mtp":
            return self.mtp_round_overhead
        return self.draft_round_overhead or self.mtp_round_overhead

    def verify_passes(self, drafter: str) -> tuple[float, ...]:
        """What a round of ``drafter`` verifying 0, 1, ..., 16 drafts costs besides its
        drafting, in plain steps: the target's pass of 1, 2, ..., 17 tokens
        (``pass_steps``) and the round's own work (``round_overhead``); the first, no
        drafts, is a plain step (1 when the loop was timed)."""
        timing = self.round_overhead(drafter)
        overhead = self.steps(timing.seconds) if timing else 0.0
        first, *passes = self.pass_steps()
        return (first, *(steps + overhead for steps in passes))

    def pass_steps(self) -> tuple[float, ...]:
        """The target's pass of 1, 2, ..., 17 tokens in plain steps (``nondecreasing``);
        the first is a plain step (1 when the loop was timed)."""
        passes = nondecreasing([t.seconds for t in self.passes])
        return (self.steps(passes[0]) if self.plain_step is None else 1.0,
                *(self.steps(seconds) for seconds in passes[1:]))

    def drafting_costs(self, drafter: str) -> tuple[float, tuple[float, ...]] | None:
        """What ``auto`` prices ``drafter``'s rounds from before its run has measured
        them: one draft step and ``verify_passes``, in plain steps. Prompt lookup
        (``ngram``) drafts for free; None for a proposer that was not measured."""
        if drafter == "ngram":
            return 0.0, self.verify_passes(drafter)
        if drafter not in self.proposers:
            return None
        return self.proposer_step(drafter), self.verify_passes(drafter)

    def cost_model(self, proposer: str, acceptance: float | None = None,
                   survival: Sequence[float] | None = None) -> CostModel:
        """The cost model of ``proposer`` drafting up to 16 tokens, every verify pass
        as measured, with the survival ``acceptance`` gives (``survival_of``) or the
        ``survival`` by position given (a run's, measured)."""
        if survival is None:
            if acceptance is None:
                raise ValueError("give an acceptance or a survival")
            survival = survival_of(acceptance)
        verify = self.verify_passes(proposer)
        k = len(survival)
        return CostModel(tuple(survival), float(k), self.proposer_step(proposer),
                         verify[min(k, len(verify) - 1)], "plain", verify_passes=verify)

    def round_cost(self, proposer: str, k: int) -> float:
        """``C(k)``: k draft steps and a verify pass of k + 1 tokens, in plain steps."""
        return self.cost_model(proposer, 0.0).round_cost(k)

    def speedup(self, proposer: str, k: int, acceptance: float) -> float:
        """The predicted speedup over plain decoding of k drafts at ``acceptance``."""
        return self.cost_model(proposer, acceptance).predicted(k)

    def break_even(self, proposer: str, k: int) -> float | None:
        """The acceptance at which k drafts per round are as fast as plain decoding:
        below it they are slower. None when even acceptance 1 loses (a round of k + 1
        tokens costs more than k + 1 plain steps); 0 when any acceptance wins."""
        if self.speedup(proposer, k, 1.0) < 1.0:
            return None
        low, high = 0.0, 1.0
        if self.speedup(proposer, k, low) >= 1.0:
            return 0.0
        for _ in range(50):  # the speedup grows with the acceptance: bisect
            middle = (low + high) / 2
            low, high = (middle, high) if self.speedup(proposer, k, middle) < 1.0 \
                else (low, middle)
        return high

    def best_k(self, proposer: str, acceptance: float) -> tuple[int, float]:
        """The k (1..16) predicted fastest at ``acceptance`` and its speedup; k = 0 (plain
        decoding, 1.00x) when no k beats plain."""
        return fastest_or_plain(self.cost_model(proposer, acceptance))

    def typical_survival(self, drafter: str) -> tuple[float, ...] | None:
        """How far ``drafter``'s drafts run on ordinary text: ``guess_survival`` for the
        draft model, ``mtp_survival`` for the MTP head; None where not judged (prompt
        lookup's depends on the text alone)."""
        return {"draft": self.guess_survival, "mtp": self.mtp_survival}.get(drafter)

    def typical_best_k(self, drafter: str) -> tuple[int, float] | None:
        """``drafter``'s best k on ordinary text (``typical_survival``) and its
        predicted speedup; k = 0 (1.00x) when no k beats plain decoding there; None
        when its drafts were not judged."""
        survival = self.typical_survival(drafter)
        if not survival or drafter not in self.proposers:
            return None
        return fastest_or_plain(self.cost_model(drafter, survival=survival))

    def target_alone(self) -> Calibration:
        """This calibration without the draft model: what a run with the target alone
        (its MTP head, prompt lookup) is priced by."""
        return replace(self, draft=None, draft_identity=None, draft_step=None,
                       draft_round_overhead=None, guess_survival=None)

    def to_dict(self) -> dict:
        return {
            "kind": KIND, "version": VERSION, "machine": self.machine,
            "target": self.target, "target_identity": self.target_identity,
            "draft": self.draft, "draft_identity": self.draft_identity,
            "passes": [t.to_dict() for t in self.passes],
            "draft_step": self.draft_step.to_dict() if self.draft_step else None,
            "mtp_step": self.mtp_step.to_dict() if self.mtp_step else None,
            "reps": self.reps, "measured": self.measured,
            "plain_step": self.plain_step.to_dict() if self.plain_step else None,
            "draft_round_overhead": (self.draft_round_overhead.to_dict()
                                     if self.draft_round_overhead else None),
            "mtp_round_overhead": (self.mtp_round_overhead.to_dict()
                                   if self.mtp_round_overhead else None),
            "guess_survival": list(self.guess_survival) if self.guess_survival else None,
            "mtp_survival": list(self.mtp_survival) if self.mtp_survival else None,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Calibration | None:
        """As ``to_dict`` wrote it; None when ``data`` is not such a record (a file
        from elsewhere, or one an older version wrote)."""
        if type(data) is not dict or data.get("kind") != KIND or data.get("version") != VERSION:
            return None
        texts = ("machine", "target", "target_identity", "measured")
        if not all(type(data.get(key)) is str and len(data[key]) < 4096 for key in texts):
            return None
        optional = ("draft", "draft_identity")
        if not all(data.get(key) is None or type(data.get(key)) is str for key in optional):
            return None
        passes = data.get("passes")
        if type(passes) is not list or len(passes) != len(PASS_SIZES):
            return None
        timings = [Timing.from_dict(p) for p in passes]
        optional_timings = ("draft_step", "mtp_step", "plain_step", "draft_round_overhead",
                            "mtp_round_overhead")
        steps = {key: Timing.from_dict(data.get(key)) if data.get(key) is not None else None
                 for key in optional_timings}
        if None in timings or any(data.get(key) is not None and step is None
                                  for key, step in steps.items()):
            return None
        reps = data.get("reps")
        if type(reps) is not int or reps < 1:
            return None
        survivals = {key: data.get(key) for key in ("guess_survival", "mtp_survival")}
        if any(v is not None and not is_survival(v) for v in survivals.values()):
            return None
        return cls(data["machine"], data["target"], data["target_identity"], data["draft"],
                   data["draft_identity"], tuple(timings), reps=reps,
                   measured=data["measured"], **steps,
                   **{key: tuple(float(x) for x in v) if v else None
                      for key, v in survivals.items()})


def fastest_or_plain(model: CostModel) -> tuple[int, float]:
    """``model``'s best k and its predicted speedup; k = 0 (1.00x) when none beats plain."""
    k = model.best_k()
    speed = model.predicted(k)
    return (k, speed) if speed > 1.0 else (0, 1.0)


def is_survival(values: Any) -> bool:
    """Whether ``values`` (from a file) is a survival by position: 1 to
    ``MAX_DRAFT_TOKENS`` shares in [0, 1], none above the one before."""
    if type(values) is not list or not 0 < len(values) <= MAX_DRAFT_TOKENS:
        return False
    if not all(type(v) in (int, float) and 0.0 <= v <= 1.0 for v in values):
        return False
    return all(b <= a for a, b in zip(values, values[1:]))


def calibration_file(target: Path | str, draft: Path | str | None) -> Path:
    """Where the calibration of ``target`` with ``draft`` (None: the target alone, its
    MTP head if it has one) on this machine is cached."""
    return cache_file(KIND, target, draft)


def load_calibration(target: Path | str, draft: Path | str | None = None,
                     on_problem: Callable[[str], None] = lambda line: None
                     ) -> Calibration | None:
    """The cached calibration of the model folders ``target`` and ``draft`` on this
    machine, or None (never measured here, or the models changed since). A broken
    cache file is ignored, said once through ``on_problem``."""
    return read_cached(calibration_file(target, draft), Calibration.from_dict, on_problem)


def save_calibration(calibration: Calibration, target: Path | str,
                     draft: Path | str | None) -> Path:
    """Cache ``calibration`` for ``target`` and ``draft``; the file it went to (OSError
    when it cannot be written)."""
    path = calibration_file(target, draft)
    write_cached(path, calibration.to_dict())
    return path


def estimate_line(calibration: Calibration, proposer: str, k: int) -> str:
    """What the calibration says of a run before it starts: what a round of k costs
    and the acceptance it needs to pay (the estimate beside the memory estimate)."""
    cost = calibration.round_cost(proposer, k)
    needed = calibration.break_even(proposer, k)
    pays = ("it never beats plain on this machine" if needed is None
            else f"it beats plain above {needed:.0%} acceptance")
    return (f"calibrated on this machine, a round of k={k} costs {cost:.2f} plain steps "
            f"for up to {k + 1} tokens; {pays}")
