"""What a speculative round costs, in plain decoding steps, and the speedup that predicts.

The model (DESIGN.md, "Predicting a speedup"): a round drafts ``k`` tokens and verifies
``k + 1`` in one target pass. It yields on average

    E(k) = 1 + s_1 + ... + s_k

tokens, where ``s_i`` (the *survival* at position i) is the share of rounds whose first
``i`` drafts were all accepted, and it costs

    C(k) = k * c_draft + c_verify(k + 1)

plain decoding steps, ``c_draft`` being one draft step and ``c_verify(k + 1)`` one verify
pass of ``k + 1`` tokens, both measured and divided by the time of one plain step. The
predicted speedup over plain decoding is ``E(k) / C(k)``. The *textbook* figure takes a
verify pass as one plain step (``c_verify = 1``), which a small model or a CPU does not
honour: there a pass of 17 tokens can cost three plain steps, and that gap is what makes
a large k lose.

A run measures ``c_verify`` at its own k only. For other k the model draws a straight
line through two points: a one-token pass costs one plain step, and the pass measured.
A calibration (``engines.calibration``) measures every pass of 1..17 tokens instead, and
its model reads them from ``verify_passes``.
Each draft position then costs the same, ``position_cost`` plain steps (a draft step plus
the line's slope), and a position is worth drafting while its survival earns more than
that cost at the speed the best k reaches: the survival curve crosses the cost line at
the best k.

Rounds that draft nothing (prompt lookup finding no match, MTP's first round) are
one-token passes: a token for ``c_idle`` plain steps. With a share ``f`` of them the
prediction is ``((1 - f) E(k) + f) / ((1 - f) C(k) + f c_idle)``.

Pure arithmetic on numbers already measured: no mlx, so the app, sessions, sweeps and a
future calibration share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from specdeck.engines.core.formatting import percent, times

#: Where the time of one plain step came from.
#: ``plain``: the plain run of the same comparison (or sweep);
#: ``one-token passes``: this run's own rounds that drafted nothing;
#: ``none``: no plain step was measured, so a verify pass is taken as one (as the textbook).
BASELINES = ("plain", "one-token passes", "none")

#: How the baselines read in a sentence ("costs in plain steps, timed from ...").
BASELINE_WORDS = {
    "plain": "the plain run of this comparison",
    "one-token passes": "this run's own one-token passes (no plain run to compare with)",
    "none": "nothing: no plain step was measured, so a verify pass counts as one",
}

#: A verify pass within this share of one plain step is "about one", as the textbook has it.
NEAR_ONE = 0.1


@dataclass(frozen=True, slots=True)
class CostModel:
    """One speculative run's rounds, priced in plain decoding steps."""

    #: ``s_i`` for i = 1..K: the share of drafting rounds whose first i drafts survived.
    survival: tuple[float, ...]
    #: Drafts per drafting round, as run (k; less on average when rounds drafted fewer).
    drafts: float
    #: ``c_draft``: one draft step, in plain steps.
    draft_step: float
    #: ``c_verify(k + 1)``: one verify pass of the run's rounds, in plain steps.
    verify_pass: float
    #: Where the plain step's time came from (one of ``BASELINES``).
    baseline: str = "plain"
    #: Accepted drafts per drafting round as run; None: ``sum(survival)``, which it equals
    #: when every round drafts k (prompt lookup drafts fewer when its match is short).
    accepted: float | None = None
    #: ``f``: the share of rounds that drafted nothing, and ``c_idle``: what one costs.
    idle_share: float = 0.0
    idle_pass: float = 1.0
    #: ``c_verify(n)`` for n = 1, 2, ... tokens, each measured (``engines.calibration``);
    #: None: only the run's own pass was, and other k lie on the line.
    verify_passes: tuple[float, ...] | None = None

    @classmethod
    def measured(cls, survival: Sequence[float], drafts: float, draft_step_seconds: float,
                 verify_pass_seconds: float, plain_step_seconds: float | None,
                 baseline: str, *, accepted: float | None = None, idle_share: float = 0.0,
                 idle_pass_seconds: float | None = None) -> CostModel:
        """From seconds: a draft step, a verify pass, a round that drafted nothing and a
        plain step (None: no plain step was measured; a verify pass then counts as one,
        and ``baseline`` is ``none``)."""
        if not plain_step_seconds or plain_step_seconds <= 0:
            plain_step_seconds, baseline = verify_pass_seconds, "none"
        idle = idle_pass_seconds / plain_step_seconds if idle_pass_seconds else 1.0
        return cls(tuple(survival), drafts, draft_step_seconds / plain_step_seconds,
                   verify_pass_seconds / plain_step_seconds, baseline, accepted,
                   idle_share, idle)

    @property
    def k(self) -> int:
        """The most drafts a round of the run proposed (positions with a survival)."""
        return len(self.survival)

    def expected_tokens(self, k: int | None = None) -> float:
        """``E(k)``: tokens per verify pass with ``k`` drafts (None: as run)."""
        if k is None and self.accepted is not None:
            return 1.0 + self.accepted
        return 1.0 + sum(self.survival[: self.k if k is None else k])

    @property
    def verify_slope(self) -> float:
        """Plain steps one more verified token adds to a pass (the line through a
        one-token pass at one step and the pass measured)."""
        return (self.verify_pass - 1.0) / self.drafts if self.drafts else 0.0

    def verify_cost(self, k: int | None = None) -> float:
        """``c_verify(k + 1)`` in plain steps: measured at the run's k (and at every k a
        calibration measured), on the line elsewhere."""
        if k is None:
            return self.verify_pass
        if self.verify_passes is not None and k < len(self.verify_passes):
            return self.verify_passes[k]
        return 1.0 + self.verify_slope * k

    def round_cost(self, k: int | None = None) -> float:
        """``C(k)``: a round's drafting and verifying, in plain steps."""
        return (self.drafts if k is None else k) * self.draft_step + self.verify_cost(k)

    def mean_tokens(self, k: int | None = None) -> float:
        """Tokens per round, the rounds that drafted nothing counted in."""
        f = self.idle_share
        return (1.0 - f) * self.expected_tokens(k) + f

    def mean_cost(self, k: int | None = None) -> float:
        """Plain steps per round, the rounds that drafted nothing counted in."""
        f = self.idle_share
        return (1.0 - f) * self.round_cost(k) + f * self.idle_pass

    def predicted(self, k: int | None = None) -> float:
        """The speedup over plain decoding ``E(k) / C(k)`` (None: at the run's own k),
        rounds that drafted nothing counted in."""
        return self.mean_tokens(k) / self.mean_cost(k)

    def textbook(self, k: int | None = None) -> float:
        """The textbook's speedup: the same tokens, a verify pass (and a round that
        drafts nothing) costing one plain step."""
        f, drafts = self.idle_share, self.drafts if k is None else k
        return self.mean_tokens(k) / ((1.0 - f) * (drafts * self.draft_step + 1.0) + f)

    @property
    def position_cost(self) -> float:
        """Plain steps one more draft position adds to a round: a draft step and one more
        verified token."""
        return self.draft_step + self.verify_slope

    def best_k(self) -> int:
        """The k (1..K) the model predicts fastest; the smaller one on a tie."""
        return max(range(1, self.k + 1), key=lambda k: (self.predicted(k), -k), default=1)

    def cost_line(self) -> float:
        """The survival a draft position needs to pay for itself at the best k's speed:
        ``position_cost`` plain steps there would have made ``best speedup`` times as many
        tokens. The survival curve crosses this line at the best k."""
        return max(0.0, self.position_cost * self.predicted(self.best_k()))

    @property
    def pass_tokens(self) -> str:
        """Tokens a verify pass checks, as a person reads it: ``17``, or ``16.4`` where the
        rounds drafted fewer on average (the last ones stop at max tokens)."""
        tokens = self.drafts + 1
        return f"{round(tokens)}" if abs(tokens - round(tokens)) < 0.05 else f"{tokens:.1f}"

    def gap_words(self) -> str:
        """Why the prediction and the textbook differ, in words."""
        passes = f"a verify pass of {self.pass_tokens} tokens"
        if self.baseline == "none":
            return (f"no plain step was timed, so {passes} counts as one plain step and "
                    "the prediction is the textbook's")
        cost = f"{self.verify_pass:.2f} plain steps"
        if abs(self.verify_pass - 1.0) <= NEAR_ONE:
            return f"{passes} costs about one plain step ({cost}), as the textbook assumes"
        direction = "less" if self.verify_pass < 1.0 else "more"
        return (f"the textbook's {times(self.textbook())} takes {passes} as one plain step; "
                f"here it costs {cost}, so each round costs {direction}")

    def why(self, measured: float | None = None, acceptance: float | None = None) -> str:
        """The model's account of a run in one line: the ``acceptance`` (when given) and
        the tokens per pass it gives, what a round costs, the prediction next to the
        speedup ``measured`` (when known) and why the textbook says otherwise."""
        accepted = "" if acceptance is None else f"{percent(acceptance)} accepted -> "
        parts = [f"{accepted}{self.expected_tokens():.2f} tokens per verify pass"]
        if self.idle_share:
            parts.append(f"{percent(self.idle_share)} of rounds drafted nothing (one token, "
                         f"{self.idle_pass:.2f} plain steps each)")
        parts += [
            f"a draft step costs {self.draft_step:.2f} plain steps",
            f"predicted {times(self.predicted())}"
            + (f", measured {times(measured)}" if measured is not None else ""),
            self.gap_words(),
        ]
        if self.baseline == "one-token passes":
            parts.append(f"plain steps timed from {BASELINE_WORDS[self.baseline]}")
        return "; ".join(parts)
