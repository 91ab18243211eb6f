"""Hand-built traces that read like real output, for the app's tests, its snapshots and
the README's screenshot.

The tiny random models emit odd bytes; these traces show what a user sees. Times and
peak memory are fixed numbers: nothing is measured, so snapshots are deterministic.
"""

from __future__ import annotations

from specdeck.engines.core.events import Done, Prefill, Round, Trace

TEXT = (
    "def add(a: float, b: float) -> float:\n"
    "    \"\"\"Return the sum of a and b.\"\"\"\n"
    "    return a + b\n\n"
    "def mean(values: list[float]) -> float:\n"
    "    \"\"\"Return the arithmetic mean, or 0.0 when empty.\"\"\"\n"
    "    if not values:\n"
    "        return 0.0\n"
    "    return sum(values) / len(values)\n"
)

#: Draft strategy: how many of k=3 drafts each round accepts (cycled).
ACCEPT_PATTERN = (3, 1, 2, 0, 3, 2)
#: What a rejected draft proposed instead (cycled).
WRONG = (" the", " x", "(", " int", ":", " self")


def words(text: str = TEXT) -> list[str]:
    """Split into word-sized pieces (a space or newline starts a new piece)."""
    pieces, current = [], ""
    for ch in text:
        if ch in " \n(" and current.strip():
            pieces.append(current)
            current = ""
        current += ch
    if current:
        pieces.append(current)
    return pieces


def _alternatives(token: int, p: float) -> list[list[float]]:
    return [[token, p], [900 + token % 7, round((1 - p) * 0.6, 3)],
            [950 + token % 5, round((1 - p) * 0.3, 3)]]


def plain_trace(step: float = 0.010, peak: int = 180 * 2**20) -> Trace:
    """One token per round, ``step`` seconds apart."""
    pieces = words()
    events = [Prefill(prompt_tokens=42, seconds=0.05, t=0.05)]
    t = 0.05
    for i, piece in enumerate(pieces):
        t += step
        events.append(Round(
            index=i, drafted=[], accepted=0, tokens=[i], end="target", pieces=[piece],
            rejected_pieces=[], draft_seconds=0.0, verify_seconds=step, t=round(t, 6),
            alternatives=[_alternatives(i, 0.8)],
        ))
    events.append(Done("length", len(pieces), round(t + 0.001, 6), peak))
    return Trace("plain", events)


def draft_trace(k: int = 3, draft_step: float = 0.002, verify: float = 0.012,
                peak: int = 212 * 2**20) -> Trace:
    """k drafts per round, accepting by ``ACCEPT_PATTERN``; rejections trim the cache."""
    pieces = words()
    events = [Prefill(prompt_tokens=42, seconds=0.06, t=0.06)]
    t, pos, index = 0.06, 0, 0
    while pos < len(pieces):
        accepted = min(ACCEPT_PATTERN[index % len(ACCEPT_PATTERN)], k, len(pieces) - pos - 1)
        accepted = max(accepted, 0)
        take = pieces[pos : pos + accepted + 1]
        ids = list(range(pos, pos + len(take)))
        rejected_n = k - accepted
        wrong = [WRONG[(index + j) % len(WRONG)] for j in range(rejected_n)]
        drafted = ids[:accepted] + [1000 + index * 10 + j for j in range(rejected_n)]
        end = "bonus" if rejected_n == 0 else "correction"
        t += k * draft_step + verify
        events.append(Round(
            index=index, drafted=drafted, accepted=accepted, tokens=ids, end=end,
            pieces=take, rejected_pieces=wrong, draft_seconds=k * draft_step,
            verify_seconds=verify, t=round(t, 6),
            draft_probs=[0.9 - 0.1 * j for j in range(k)],
            target_probs=[0.85 if j < accepted else 0.04 for j in range(k)],
            alternatives=[_alternatives(tok, 0.85) for tok in ids],
            rollback="trim" if rejected_n else "none",
        ))
        pos += len(take)
        index += 1
    events.append(Done("length", len(pieces), round(t + 0.001, 6), peak))
    return Trace("draft", events)


def demo_traces() -> dict[str, Trace]:
    return {"plain": plain_trace(), "draft": draft_trace()}
