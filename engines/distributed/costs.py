"""What a forward pass of a sharded target costs, and what crossing the network does to it.

Every forward pass of a target split over several machines waits for the network (two
collectives per layer under tensor parallelism, one hop per stage in a pipeline), and
that wait barely grows with the number of tokens in the pass. So a verify pass of
k + 1 tokens costs few more target steps on a group than on one machine, and
speculation, which trades k + 1 steps for one pass, buys more. ``PassCosts`` holds the
measured times of a pass of 1..17 tokens (a target step, and the verify pass of every
k a run allows) on the group and, where the whole target fit on one machine, on one
rank; its ``line`` says it in words for the why-lines. No mlx here: sessions carry it
to machines without it.

``describe_group`` says what a session records about its group, read back untrusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specdeck.engines.core.config import MAX_DRAFT_TOKENS
from specdeck.engines.core.formatting import duration

#: Tokens per measured pass: a target step, then verify passes of k + 1 for k = 1..16.
PASS_SIZES = tuple(range(1, MAX_DRAFT_TOKENS + 2))


def _seconds(values: Any) -> tuple[float, ...] | None:
    """A recorded list of pass times, or None when it is not one (untrusted files)."""
    if type(values) is not list or len(values) != len(PASS_SIZES):
        return None
    if not all(type(v) in (int, float) and math.isfinite(v) and v > 0 for v in values):
        return None
    return tuple(float(v) for v in values)


@dataclass(frozen=True, slots=True)
class PassCosts:
    """Seconds of one target pass of ``PASS_SIZES`` tokens (median of a few), on a
    group of ``ranks`` processes and, when it was measured, on one rank alone."""

    ranks: int
    group: tuple[float, ...]
    one_rank: tuple[float, ...] | None = None

    def to_dict(self) -> dict:
        return {"ranks": self.ranks, "group": list(self.group),
                "one_rank": list(self.one_rank) if self.one_rank else None}

    @classmethod
    def from_dict(cls, data: Any) -> PassCosts | None:
        """As ``to_dict`` records it; None when ``data`` is not such a record."""
        if type(data) is not dict or type(data.get("ranks")) is not int or data["ranks"] < 1:
            return None
        group = _seconds(data.get("group"))
        one = data.get("one_rank")
        one_rank = None if one is None else _seconds(one)
        if group is None or (one is not None and one_rank is None):
            return None
        return cls(data["ranks"], group, one_rank)

    @staticmethod
    def in_steps(seconds: tuple[float, ...], tokens: int) -> float:
        """A pass of ``tokens`` tokens in target steps (a pass of one token)."""
        return seconds[tokens - 1] / seconds[0]

    def line(self, drafts: int) -> str:
        """The cost of a target step and of the verify pass of ``drafts`` drafts, on the
        group and on one rank: what the network adds, and why speculation buys more."""
        tokens = min(drafts + 1, len(PASS_SIZES))
        g = self.group
        where = f"on {self.ranks} ranks" if self.ranks > 1 else "on one rank"
        one = self.one_rank if self.ranks > 1 else None
        step = f"a target step takes {duration(g[0])} {where}"
        if one is not None:
            step += f" ({duration(one[0])} on one)"
        if tokens < 2:
            return step
        verify = f"a verify pass of {tokens} tokens {duration(g[tokens - 1])}"
        if one is not None:
            verify += f" ({duration(one[tokens - 1])})"
        text = f"{step}, {verify}: {self.in_steps(g, tokens):.2f} target steps"
        if one is not None:
            text += f" against {self.in_steps(one, tokens):.2f} on one rank"
        return text


def describe_group(group: Any) -> str | None:
    """A session's ``config.group`` in words: ``the target split by tensor over 2 ranks
    (ring; hosts 10.0.0.1, 10.0.0.2)``; None when the run had no group (or the record is
    not one). Read from a file: only its expected fields, control characters hidden."""
    if type(group) is not dict or type(group.get("size")) is not int:
        return None

    def shown(value: Any) -> str:
        return "".join(c if c.isprintable() else "?" for c in str(value))[:80]

    where = [shown(group.get("backend", "?"))]
    hosts = group.get("hosts")
    if type(hosts) is list and hosts:
        where.append("hosts " + ", ".join(shown(h) for h in hosts[:8]))
    text = (f"the target split by {shown(group.get('shard', '?'))} over {group['size']} "
            f"rank{'s' if group['size'] != 1 else ''} ({'; '.join(where)})")
    lost = group.get("lost")
    return text + (f"; ended early: {shown(lost)}" if type(lost) is str else "")
