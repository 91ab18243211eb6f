"""Statistics derived from a run's events alone, so live panes, replays and sweeps agree.

Terms: a *round* is one draft-and-verify cycle; *proposed* counts drafted tokens,
*accepted* the drafted tokens the target kept that are part of the answer (where it ends
inside a round's kept drafts, those after its end count as drafted, not kept). The
speedup a run's rounds predict is ``engines.cost_model``'s: tokens per verify pass from
the survival at each draft position, over what a round costs in plain decoding steps
(``priced``); the measured speedup is ``speedup``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Iterable, Literal, Mapping, Sequence

from specdeck.engines.core.cost_model import CostModel
from specdeck.engines.core.events import Done, Event, Prefill, Round


@dataclass(slots=True)
class Stats:
    """What a pane, a session and a sweep cell show about one run."""

    prompt_tokens: int
    generated_tokens: int
    rounds: int
    #: Rounds that proposed at least one draft.
    drafting_rounds: int
    proposed: int
    accepted: int
    #: accepted / proposed; None when nothing was drafted.
    acceptance_rate: float | None
    #: Accepted drafts per drafting round.
    mean_accepted: float | None
    #: Tokens added per round (accepted drafts plus the target's token).
    tokens_per_round: float | None
    #: For draft position i: accepted at i / proposed at i. Position i is accepted only
    #: when every draft before it was, so this is the *survival* at i (the share of rounds
    #: drafting that far whose first i drafts all lived), not the conditional rate.
    acceptance_by_position: list[float]
    prefill_seconds: float
    #: Time to first token: from the start of the run to the end of the first round.
    ttft_seconds: float | None
    #: From the end of the prefill to the end of the last round.
    decode_seconds: float
    draft_seconds: float
    verify_seconds: float
    #: Generated tokens per second of decoding (the prefill excluded).
    tokens_per_s: float | None
    #: One draft step's time over one verify pass's time.
    cost_ratio: float | None
    #: Speedup over plain decoding that the survival by position and the measured costs
    #: predict (``engines.cost_model``: E(k) / (k c_draft + c_verify(k + 1))).
    predicted_speedup: float | None
    peak_memory_bytes: int | None
    finish_reason: str | None
    #: Mean seconds of one draft step, of one verify pass (drafting rounds), and of a
    #: round that drafted nothing (a one-token pass: every round of plain decoding).
    draft_step_seconds: float | None = None
    verify_pass_seconds: float | None = None
    single_pass_seconds: float | None = None
    #: A draft step and a verify pass in plain decoding steps, and where the plain
    #: step's time came from (``engines.cost_model.BASELINES``).
    draft_step_cost: float | None = None
    verify_pass_cost: float | None = None
    cost_baseline: str | None = None
    #: The textbook's prediction: the same tokens per pass, a verify pass as one plain step.
    textbook_speedup: float | None = None
    #: What mlx-lm's exact-match rule would have kept of the same drafts, over the drafts
    #: of the rounds that record it (``Round.exact_match_accepted``); None where none do
    #: (plain decoding, files from before it was recorded). Equals ``acceptance_rate`` at
    #: temperature 0.
    exact_match_acceptance_rate: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def median(values: list[float]) -> float:
    """The middle value (mean of the two middle ones for an even count)."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def robust_cv(values: list[float]) -> float:
    """Coefficient of variation from the median absolute deviation.

    ``1.4826 * MAD / median``: equals the usual CV for normal data, but one slow outlier
    among five repetitions (a background task) barely moves it.
    """
    centre = median(values)
    if centre == 0:
        return 0.0
    return 1.4826 * median([abs(v - centre) for v in values]) / abs(centre)


def spread(values: list[float]) -> float | None:
    """How far apart repeated measurements are: (largest - smallest) / median; None
    for fewer than two."""
    if len(values) < 2:
        return None
    centre = median(values)
    return (max(values) - min(values)) / centre if centre else None


def speedup_noise(strategy: list[float], plain: list[float]) -> float | None:
    """How much a measured speedup may be noise: the larger relative spread of plain's
    timed runs and the strategy's own (None while neither was timed twice). A speedup
    within ``1 ± noise`` cannot be told from plain decoding."""
    spreads = [s for s in (spread(plain), spread(strategy)) if s is not None]
    return max(spreads) if spreads else None


def within_noise(speedup_: float | None, noise: float | None) -> bool:
    """Whether a speedup is no farther from 1.00x than the noise."""
    return speedup_ is not None and noise is not None and abs(speedup_ - 1.0) <= noise


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def speedup(tokens_per_s: float | None, baseline_tokens_per_s: float | None) -> float | None:
    """A run's speed over plain decoding's (the baseline); None until both are known."""
    if not baseline_tokens_per_s or not tokens_per_s:
        return None
    return tokens_per_s / baseline_tokens_per_s


@dataclass(frozen=True, slots=True)
class Verdict:
    """How one strategy fared against plain decoding in one comparison: what the status
    line's sentence says at the end of a race."""

    strategy: str
    #: Faster than plain beyond the noise, slower beyond it, or within it.
    outcome: Literal["won", "lost", "tied"]
    speedup: float
    #: Its drafts' acceptance rate; None where it drafted nothing.
    acceptance: float | None


def verdicts(stats: Mapping[str, Stats], runs: Mapping[str, Sequence[float]]
             ) -> list[Verdict]:
    """Each strategy in ``stats`` but plain against plain's speed, fastest first; within
    the noise (``speedup_noise`` of the tok/s of each one's timed ``runs``) it tied.
    Empty without a plain run to compare with."""
    plain = stats.get("plain")
    found = []
    for name, s in stats.items():
        ratio = speedup(s.tokens_per_s, plain.tokens_per_s if plain else None)
        if name == "plain" or ratio is None:
            continue
        noise = speedup_noise(list(runs.get(name, ())), list(runs.get("plain", ())))
        outcome = "tied" if within_noise(ratio, noise) else "won" if ratio > 1 else "lost"
        found.append(Verdict(name, outcome, ratio, s.acceptance_rate))
    return sorted(found, key=lambda v: -v.speedup)


def plain_step_seconds(plain_tokens_per_s: float | None) -> float | None:
    """The time of one plain decoding step (one token per step)."""
    return 1.0 / plain_tokens_per_s if plain_tokens_per_s else None


def cost_model(stats: Stats, plain_step: float | None = None) -> CostModel | None:
    """``stats``' rounds priced in plain steps of ``plain_step`` seconds (the plain run of
    the same comparison); without one, in the run's own one-token passes, else with a
    verify pass as one step. None when nothing was drafted."""
    if not stats.drafting_rounds or stats.draft_step_seconds is None or not (
        stats.verify_pass_seconds
    ):
        return None
    baseline = "plain"
    if not plain_step:
        plain_step, baseline = stats.single_pass_seconds, "one-token passes"
    return CostModel.measured(
        stats.acceptance_by_position, stats.proposed / stats.drafting_rounds,
        stats.draft_step_seconds, stats.verify_pass_seconds, plain_step, baseline,
        accepted=stats.mean_accepted, idle_share=1.0 - stats.drafting_rounds / stats.rounds,
        idle_pass_seconds=stats.single_pass_seconds,
    )


def priced(stats: Stats, plain_step: float | None = None) -> Stats:
    """``stats`` with its costs and predictions in plain steps of ``plain_step`` seconds
    (``cost_model``): the one place a run's predicted speedup is computed."""
    model = cost_model(stats, plain_step)
    if model is None:
        return replace(stats, draft_step_cost=None, verify_pass_cost=None, cost_baseline=None,
                       predicted_speedup=None, textbook_speedup=None)
    return replace(stats, draft_step_cost=model.draft_step, verify_pass_cost=model.verify_pass,
                   cost_baseline=model.baseline, predicted_speedup=model.predicted(),
                   textbook_speedup=model.textbook())


@dataclass(frozen=True, slots=True)
class DraftCounts:
    """What a run's rounds drafted and kept: the counts every convention's speculation
    statistics come from (``engines.conventions``)."""

    drafting_rounds: int
    #: Drafting rounds that kept at least one draft.
    rounds_kept_some: int
    proposed: int
    accepted: int
    #: Per position i (0-based): drafting rounds that proposed more than i drafts, and
    #: those whose first i + 1 drafts were all kept.
    tried: tuple[int, ...]
    kept: tuple[int, ...]

    @classmethod
    def of(cls, events: Iterable[Event]) -> DraftCounts:
        return StatsAccumulator().extend(events).draft_counts


class StatsAccumulator:
    """A run's statistics, folded one event at a time.

    ``add`` costs what the event holds (its drafts), ``stats`` what the longest round
    drafted, so a live pane or a race frame costs the same at token 20,000 as at token
    20. ``compute_stats`` is this folded over a list.
    """

    __slots__ = ("_prefill", "_done", "_rounds", "_drafting", "_proposed", "_accepted",
                 "_generated", "_tried", "_kept", "_kept_some", "_first_t", "_last_t",
                 "_draft_seconds", "_verify_seconds", "_drafting_verify_seconds",
                 "_single_seconds", "_exact_kept", "_exact_tried")

    def __init__(self) -> None:
        self._prefill: Prefill | None = None
        self._done: Done | None = None
        self._rounds = self._drafting = self._proposed = self._accepted = self._generated = 0
        #: Per draft position i: drafting rounds that proposed more than i drafts, and
        #: those that kept more than i.
        self._tried: list[int] = []
        self._kept: list[int] = []
        #: Drafting rounds that kept at least one draft.
        self._kept_some = 0
        self._first_t: float | None = None
        self._last_t: float | None = None
        self._draft_seconds = self._verify_seconds = self._drafting_verify_seconds = 0.0
        #: Seconds of the rounds that drafted nothing (one-token passes).
        self._single_seconds = 0.0
        #: Drafts the exact-match rule would have kept, of the drafts of rounds recording it.
        self._exact_kept = self._exact_tried = 0

    def add(self, event: Event) -> None:
        if isinstance(event, Round):
            self._add_round(event)
        elif isinstance(event, Prefill):
            self._prefill = event
        elif isinstance(event, Done):
            self._done = event

    def extend(self, events: Iterable[Event]) -> StatsAccumulator:
        for event in events:
            self.add(event)
        return self

    def _add_round(self, r: Round) -> None:
        self._rounds += 1
        self._generated += len(r.tokens)
        self._draft_seconds += r.draft_seconds
        self._verify_seconds += r.verify_seconds
        if self._first_t is None:
            self._first_t = r.t
        self._last_t = r.t
        drafted = len(r.drafted)
        if not drafted:
            self._single_seconds += r.draft_seconds + r.verify_seconds
            return
        accepted = min(r.accepted, len(r.tokens))
        self._drafting += 1
        self._proposed += drafted
        self._accepted += accepted
        self._kept_some += accepted > 0
        self._drafting_verify_seconds += r.verify_seconds
        if r.exact_match_accepted is not None:
            self._exact_kept += min(r.exact_match_accepted, len(r.tokens))
            self._exact_tried += drafted
        tried, kept = self._tried, self._kept
        if drafted > len(tried):
            tried.extend([0] * (drafted - len(tried)))
            kept.extend([0] * (drafted - len(kept)))
        for i in range(drafted):
            tried[i] += 1
        for i in range(accepted):
            kept[i] += 1

    @property
    def draft_counts(self) -> DraftCounts:
        """What the rounds added so far drafted and kept (``engines.conventions`` names
        them as other engines do)."""
        return DraftCounts(self._drafting, self._kept_some, self._proposed, self._accepted,
                           tuple(self._tried), tuple(self._kept))

    @property
    def stats(self) -> Stats:
        """The statistics of the events added so far."""
        prefill, done = self._prefill, self._done
        proposed, accepted, drafting = self._proposed, self._accepted, self._drafting
        start = prefill.t if prefill else 0.0
        decode_seconds = (self._last_t - start) if self._last_t is not None else 0.0
        acceptance = _ratio(accepted, proposed)
        per_draft = _ratio(self._draft_seconds, proposed)
        per_verify = _ratio(self._drafting_verify_seconds, drafting)
        cost_ratio = per_draft / per_verify if per_draft is not None and per_verify else None
        stats = Stats(
            prompt_tokens=prefill.prompt_tokens if prefill else 0,
            generated_tokens=self._generated,
            rounds=self._rounds,
            drafting_rounds=drafting,
            proposed=proposed,
            accepted=accepted,
            acceptance_rate=acceptance,
            mean_accepted=_ratio(accepted, drafting),
            tokens_per_round=_ratio(self._generated, self._rounds),
            acceptance_by_position=[k / n for k, n in zip(self._kept, self._tried)],
            prefill_seconds=prefill.seconds if prefill else 0.0,
            ttft_seconds=self._first_t,
            decode_seconds=decode_seconds,
            draft_seconds=self._draft_seconds,
            verify_seconds=self._verify_seconds,
            tokens_per_s=_ratio(self._generated, decode_seconds),
            cost_ratio=cost_ratio,
            predicted_speedup=None,
            peak_memory_bytes=done.peak_memory_bytes if done else None,
            finish_reason=done.reason if done else None,
            draft_step_seconds=per_draft,
            verify_pass_seconds=per_verify,
            single_pass_seconds=_ratio(self._single_seconds, self._rounds - drafting),
            exact_match_acceptance_rate=_ratio(self._exact_kept, self._exact_tried),
        )
        return priced(stats)


def compute_stats(events: Iterable[Event]) -> Stats:
    """Summarise one run from its events (a run still in progress works too)."""
    return StatsAccumulator().extend(events).stats
