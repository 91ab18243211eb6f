"""Which output tokens the draft model guessed right, and what rounds of a fixed k would
have kept over them (``auto``'s expected tokens per round, at temperature 0).

At temperature 0 a round keeps the leading run of the draft's right greedy guesses from
where it starts, and starts where the round before it ended: replayed over a record of
right and wrong guesses, a fixed k's rounds keep exactly what they would have. That
includes what a product of per-position acceptances cannot see: where each k's rounds
start. A text that repeats with a period of six tokens, one guessed wrong, keeps 5 of
5 drafts every round at k = 5, but at k = 4 every other round starts on the wrong guess
(4 kept, then 0: the demo's picnic prompt, replayed, where auto stood at k = 4 at 0.91 of
k = 6); its positions' acceptance, pooled over both kinds of round, says 50 % at the
first.

The record comes from what ``auto`` already observes: a drafting round's kept drafts
and its first rejected one, the draft's guess past a round kept whole
(``observe_bonus``), and its guesses over plain steps' tokens (``observe_guesses``); a
token nothing judged is unknown, and a replayed round whose end falls on one is left
out.
"""

from __future__ import annotations

#: The latest output tokens replayed: about what auto's per-position counts fade over
#: while it drafts (32 rounds of two or three tokens), so both follow a text that
#: changes. Replayed against the tokens of the latest 32 rounds instead (fewer while it
#: stands at plain steps): within +-0.3 % on average on both families.
WINDOW = 96
#: A k's replay is used once it ran this many rounds per phase (``k + 1`` starting
#: points); before that, auto prices k from its per-position counts.
ROUNDS = 6


class RightGuesses:
    """Right (True), wrong (False) or unknown (None) per output token, in order (the
    latest few hundred)."""

    def __init__(self) -> None:
        self.bits: list[bool | None] = []
        #: The token after a round kept whole, waiting for ``bonus``; or that guess,
        #: judged before the round itself was recorded.
        self._bonus_at: int | None = None
        self._early: bool | None = None

    def round(self, drafted: int, accepted: int) -> None:
        """A drafting round: its kept drafts were right guesses; its last token is the
        first wrong one, or past a round kept whole, the guess ``bonus`` judges."""
        self.bits += [True] * accepted
        if accepted < drafted:
            self.bits.append(False)
        elif self._early is not None:
            self.bits.append(self._early)
        else:
            self._bonus_at = len(self.bits)
            self.bits.append(None)
        self._early = None
        self._trim()

    def plain_step(self) -> None:
        """A plain step's token: unknown until the guesses over it are judged."""
        self.bits.append(None)
        self._trim()

    def bonus(self, right: bool) -> None:
        """The draft's guess past the last round kept whole (the loop judges it in the
        next round, before that round is recorded; a replay before)."""
        if self._bonus_at is None:
            self._early = right
        else:
            self.bits[self._bonus_at] = right
            self._bonus_at = None

    def guesses(self, matches: list[bool]) -> None:
        """The guesses at the latest ``len(matches)`` tokens, which the draft had not fed."""
        start = len(self.bits) - len(matches)
        for i, right in zip(range(max(start, 0), len(self.bits)), matches[max(-start, 0):]):
            if self.bits[i] is None:
                self.bits[i] = right
        if self._bonus_at is not None and self._bonus_at >= start:
            self._bonus_at = None

    def _trim(self) -> None:
        if len(self.bits) > 3 * WINDOW:  # the guesses judge at most 33 past the window
            cut = len(self.bits) - 2 * WINDOW
            del self.bits[:cut]
            if self._bonus_at is not None:
                self._bonus_at = self._bonus_at - cut if self._bonus_at >= cut else None

    def tokens_per_round(self, most: int, window: int = WINDOW) -> dict[int, float]:
        """``E(k)`` for each k of 1..``most`` replayed over the latest ``window`` tokens
        from every starting point (a round brings its kept drafts and one more token),
        where it ran ``ROUNDS`` rounds per starting point."""
        bits = self.bits[-window:]
        n = len(bits)
        run = [0] * (n + 1)  # right guesses in a row from each token
        ends = [False] * (n + 1)  # whether that run ends on a known wrong guess
        for j in range(n - 1, -1, -1):
            if bits[j]:
                run[j], ends[j] = run[j + 1] + 1, ends[j + 1]
            else:
                ends[j] = bits[j] is not None
        replayed = {}
        longest = max(run, default=0)
        for k in range(1, most + 1):
            if k <= longest + 1:
                # The tokens and rounds of k's rounds from each token on, back to front:
                # a round from p keeps min(run, k), the next starts after its last token.
                # (Past the longest run plus one every k's rounds are the same.)
                tokens, rounds = [0] * (n + 2), [0] * (n + 2)
                for p in range(n - 1, -1, -1):
                    kept = run[p] if run[p] < k else k
                    after = p + kept + 1
                    if kept == run[p] < k and not ends[p]:  # its end unknown: left out
                        tokens[p], rounds[p] = tokens[after], rounds[after]
                    else:
                        tokens[p], rounds[p] = tokens[after] + kept + 1, rounds[after] + 1
            starts = range(min(k + 1, n))
            ran = sum(rounds[p] for p in starts)
            if ran >= ROUNDS * (k + 1):
                replayed[k] = sum(tokens[p] for p in starts) / ran
        return replayed
