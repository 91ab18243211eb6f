"""Statistics derived from a run's events alone, so live panes, replays and sweeps agree.

Terms: a *round* is one draft-and-verify cycle; *proposed* counts drafted tokens,
*accepted* the drafted tokens the target kept. The textbook speculation model (Leviathan et
al., 2023): with acceptance rate ``a`` and ``k`` drafts a round yields ``(1 - a^(k+1)) / (1 - a)``
tokens on average and costs ``k * c + 1`` target passes, where ``c`` is the cost of
one draft step relative to one verify pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable

from specdeck.engines.events import Done, Event, Prefill, Round


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
    #: For draft position i: accepted at i / proposed at i.
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
    #: Speedup over plain decoding that the measured acceptance and cost ratio predict.
    predicted_speedup: float | None
    peak_memory_bytes: int | None
    finish_reason: str | None

    def to_dict(self) -> dict:
        return asdict(self)


def expected_tokens_per_round(acceptance: float, drafts: float) -> float:
    """Mean tokens per verify pass for i.i.d. acceptance ``a`` and ``k`` drafts."""
    if drafts <= 0:
        return 1.0
    if acceptance >= 1.0:
        return drafts + 1.0
    return (1.0 - acceptance ** (drafts + 1.0)) / (1.0 - acceptance)


def predicted_speedup(acceptance: float, drafts: float, cost_ratio: float) -> float:
    """Speedup over plain decoding: tokens per round over the round's cost in target passes."""
    return expected_tokens_per_round(acceptance, drafts) / (drafts * cost_ratio + 1.0)


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


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def compute_stats(events: Iterable[Event]) -> Stats:
    """Summarise one run from its events (a run still in progress works too)."""
    prefill: Prefill | None = None
    done: Done | None = None
    rounds: list[Round] = []
    for event in events:
        if isinstance(event, Round):
            rounds.append(event)
        elif isinstance(event, Prefill):
            prefill = event
        elif isinstance(event, Done):
            done = event

    drafting = [r for r in rounds if r.drafted]
    proposed = sum(len(r.drafted) for r in drafting)
    accepted = sum(r.accepted for r in drafting)
    generated = sum(len(r.tokens) for r in rounds)
    width = max((len(r.drafted) for r in drafting), default=0)
    by_position = []
    for i in range(width):
        tried = sum(1 for r in drafting if len(r.drafted) > i)
        kept = sum(1 for r in drafting if r.accepted > i)
        by_position.append(kept / tried)

    start = prefill.t if prefill else 0.0
    decode_seconds = (rounds[-1].t - start) if rounds else 0.0
    draft_seconds = sum(r.draft_seconds for r in rounds)
    verify_seconds = sum(r.verify_seconds for r in rounds)

    acceptance = _ratio(accepted, proposed)
    cost_ratio = None
    speedup = None
    if drafting and verify_seconds > 0:
        per_draft = draft_seconds / proposed
        per_verify = sum(r.verify_seconds for r in drafting) / len(drafting)
        cost_ratio = per_draft / per_verify if per_verify > 0 else None
        if cost_ratio is not None and acceptance is not None:
            speedup = predicted_speedup(acceptance, proposed / len(drafting), cost_ratio)

    return Stats(
        prompt_tokens=prefill.prompt_tokens if prefill else 0,
        generated_tokens=generated,
        rounds=len(rounds),
        drafting_rounds=len(drafting),
        proposed=proposed,
        accepted=accepted,
        acceptance_rate=acceptance,
        mean_accepted=_ratio(accepted, len(drafting)),
        tokens_per_round=_ratio(generated, len(rounds)),
        acceptance_by_position=by_position,
        prefill_seconds=prefill.seconds if prefill else 0.0,
        ttft_seconds=rounds[0].t if rounds else None,
        decode_seconds=decode_seconds,
        draft_seconds=draft_seconds,
        verify_seconds=verify_seconds,
        tokens_per_s=_ratio(generated, decode_seconds),
        cost_ratio=cost_ratio,
        predicted_speedup=speedup,
        peak_memory_bytes=done.peak_memory_bytes if done else None,
        finish_reason=done.reason if done else None,
    )
