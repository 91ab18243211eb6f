"""A run's speculation statistics as llama.cpp and vLLM name and compute them, beside
specdeck's own, so a number from one tool can be checked against another's.

The three agree on the counts and on the overall acceptance; they differ where a reader
comparing numbers trips:

- *Mean acceptance length.* specdeck's ``mean_accepted`` counts accepted drafts per
  drafting round and leaves out the target's own token that ends every round (the
  correction or bonus). llama.cpp (``#mean acc len``) and vLLM
  (``mean_acceptance_length``) both add that token: theirs is ours + 1.
- *Acceptance per position.* All three give the survival at position i (the share of
  rounds whose first i drafts were all kept), never the conditional rate "kept given the
  ones before it were" (survival(i) / survival(i - 1)). They differ in the rounds they
  divide by: specdeck divides by the rounds that drafted at least i tokens; llama.cpp
  and vLLM by every round that drafted. The two agree while every round drafts k; where
  rounds draft fewer (prompt lookup with a short match, the last round of a run), the
  others' later positions come out lower.
- *Shares* are given from 0 to 1 here; both tools print them as percentages.

Checked against the tools' sources:

- llama.cpp ``examples/speculative/speculative.cpp``: ``n_drafted`` (draft tokens),
  ``n_accept`` (accepted draft tokens), ``accept`` = n_accept / n_drafted.
- llama.cpp ``common/speculative.cpp``, ``common_speculative_print_stats``: ``#gen
  drafts`` (rounds that drafted), ``#acc drafts`` (rounds that kept at least one draft),
  ``#mean acc len`` = 1 + accepted tokens / rounds that drafted, ``#acc rate/pos`` =
  accepted at position i / rounds that drafted (``n_acc_tokens_per_pos`` counts every
  position up to the number accepted, as ``common_speculative_accept`` does).
- vLLM ``vllm/v1/spec_decode/metrics.py`` (``SpecDecodingStats``, ``SpecDecodingLogging``):
  ``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``,
  ``draft_acceptance_rate`` = accepted / draft tokens, ``mean_acceptance_length`` = 1 +
  accepted / drafts ("conventionally including the bonus token"), per-position
  acceptance rate = ``num_accepted_tokens_per_pos[i]`` / drafts.

Pure: rounds in, numbers out (no mlx).
"""

from __future__ import annotations

from typing import Any, Iterable

from specdeck.engines.core.events import Round
from specdeck.engines.core.stats import DraftCounts

#: The conventions a statistic can be named and computed in.
CONVENTIONS = ("specdeck", "llama.cpp", "vllm")

#: specdeck's own speculation statistics (fields of ``engines.stats.Stats``), which a
#: convention's replace in place.
SPECDECK_NAMES = ("drafting_rounds", "proposed", "accepted", "acceptance_rate",
                  "mean_accepted", "acceptance_by_position")

#: Each convention's names, in the order shown, with what each means (help, glossary).
MEANINGS: dict[str, dict[str, str]] = {
    "specdeck": {
        "drafting_rounds": "rounds that proposed at least one draft",
        "proposed": "draft tokens proposed",
        "accepted": "draft tokens the target kept",
        "acceptance_rate": "accepted / proposed",
        "mean_accepted": "accepted drafts per drafting round, WITHOUT the target's own "
                         "token that ends the round",
        "acceptance_by_position": "survival at position i: rounds whose first i drafts "
                                  "all lived / rounds that drafted at least i",
    },
    "llama.cpp": {
        "n_gen_drafts": "rounds that drafted (#gen drafts)",
        "n_acc_drafts": "rounds that kept at least one draft (#acc drafts)",
        "n_drafted": "draft tokens proposed",
        "n_accept": "draft tokens accepted",
        "accept": "n_accept / n_drafted",
        "mean_acc_len": "1 + n_accept / n_gen_drafts: tokens per round WITH the target's "
                        "own token (#mean acc len)",
        "acc_rate_pos": "survival at position i: rounds whose first i drafts all lived / "
                        "every round that drafted (#acc rate/pos)",
    },
    "vllm": {
        "num_drafts": "rounds that drafted",
        "num_draft_tokens": "draft tokens proposed",
        "num_accepted_tokens": "draft tokens accepted",
        "draft_acceptance_rate": "num_accepted_tokens / num_draft_tokens",
        "mean_acceptance_length": "1 + num_accepted_tokens / num_drafts: tokens per round "
                                  "WITH the bonus token",
        "per_position_acceptance_rate": "survival at position i: rounds whose first i "
                                        "drafts all lived / every round that drafted",
    },
}


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def speculation_stats(counts: DraftCounts, convention: str) -> dict[str, Any]:
    """The speculation statistics of ``counts`` under ``convention``'s names
    (``MEANINGS``), computed its way."""
    n, drafts, kept = counts.drafting_rounds, counts.proposed, counts.accepted
    over_all = [k / n for k in counts.kept] if n else []
    if convention == "specdeck":
        return {
            "drafting_rounds": n, "proposed": drafts, "accepted": kept,
            "acceptance_rate": _share(kept, drafts), "mean_accepted": _share(kept, n),
            "acceptance_by_position": [k / t for k, t in zip(counts.kept, counts.tried)],
        }
    length = 1.0 + kept / n if n else None
    if convention == "llama.cpp":
        return {
            "n_gen_drafts": n, "n_acc_drafts": counts.rounds_kept_some, "n_drafted": drafts,
            "n_accept": kept, "accept": _share(kept, drafts), "mean_acc_len": length,
            "acc_rate_pos": over_all,
        }
    if convention == "vllm":
        return {
            "num_drafts": n, "num_draft_tokens": drafts, "num_accepted_tokens": kept,
            "draft_acceptance_rate": _share(kept, drafts), "mean_acceptance_length": length,
            "per_position_acceptance_rate": over_all,
        }
    raise ValueError(f"unknown convention {convention!r} (choose from {', '.join(CONVENTIONS)})")


def in_convention(stats: dict[str, Any], rounds: Iterable[Round], convention: str
                  ) -> dict[str, Any]:
    """A run's statistics (``engines.stats.Stats`` as a dict) with specdeck's speculation
    statistics replaced, where they stood, by ``convention``'s; the others (speed, time,
    memory, predictions) unchanged."""
    if convention == "specdeck":
        return dict(stats)
    out: dict[str, Any] = {}
    for name, value in stats.items():
        if name == SPECDECK_NAMES[0]:
            out.update(speculation_stats(DraftCounts.of(rounds), convention))
        elif name not in SPECDECK_NAMES:
            out[name] = value
    return out


def help_text() -> str:
    """What each convention's names mean, for ``--help``."""
    return "; ".join(
        f"{convention}: " + ", ".join(f"{name} = {meaning}" for name, meaning in names.items())
        for convention, names in MEANINGS.items()
    )
