"""Prompt-lookup decoding (the ``ngram`` strategy): drafts copied from the text itself.

When the last ``n`` tokens occurred before (in the prompt or in what was generated), the
tokens that followed them then are likely to follow now: code being rewritten, a quoted
passage, a repeated structure. Those tokens are the drafts, up to ``k`` of them; the
target verifies them in one pass like any other drafts. No second model, nothing to
prefill, and a draft is a fixed token (a point mass), which the acceptance rule of
``sampling.py`` handles exactly, so the output stays the target's at any temperature.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, Mapping, Sequence, TYPE_CHECKING

import mlx.core as mx

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.decode.shared import Clock
from specdeck.engines.auto.length import draft_length
from specdeck.engines.core.events import Event
from specdeck.engines.decode.sampling import KeyStream, no_drafts
from specdeck.engines.decode.speculative import run_speculative

if TYPE_CHECKING:  # run.py imports this module when it runs a strategy
    from specdeck.engines.decode.run import Models


class PromptLookup:
    """Proposals from the latest earlier occurrence of the last ``n`` tokens.

    An index from every n-gram seen so far to the position right after its latest
    occurrence keeps each lookup O(n), however long the text grows.
    """

    wants_hidden = False
    guesser = None

    def __init__(self, n: int) -> None:
        self.n = n
        self.history: list[int] = []
        self.follows: dict[tuple[int, ...], int] = {}
        #: The first n - 1 tokens of every n-gram in ``follows`` (``may_draft``).
        self.heads: set[tuple[int, ...]] = set()

    def drafter(self) -> str:
        return "ngram"

    def companions(self) -> list[tuple[Any, Sequence[Any]]]:
        return []

    def begin(self, prompt: list[int], rest: mx.array) -> None:
        self.history, self.follows, self.heads = [], {}, set()
        self._extend(prompt)

    def _extend(self, tokens: list[int]) -> None:
        n, history = self.n, self.history
        for token in tokens:
            if len(history) >= n:
                gram = tuple(history[-n:])
                self.follows[gram] = len(history)
                self.heads.add(gram[:-1])
            history.append(token)

    def match(self) -> int | None:
        """Where the tokens after the latest earlier occurrence of the last ``n`` start;
        None when the text offers no such match."""
        if len(self.history) < self.n:
            return None
        return self.follows.get(tuple(self.history[-self.n :]))

    def may_draft(self, counts: Mapping[str, int]) -> bool:
        """After one more token, the last ``n`` end with it: a match needs an n-gram
        seen before (or the one that token's arrival records) that starts with the last
        n - 1. On text that does not repeat, most rounds have none, and their plain
        step is queued ahead (without it, a run where lookup found nothing ran 1.17x
        plain decoding's time on the demo target)."""
        n, history = self.n, self.history
        if not counts[self.drafter()] or len(history) + 1 < n:
            return False
        head = tuple(history[len(history) - n + 1:])
        return head in self.heads or (len(history) >= n and tuple(history[-n:-1]) == head)

    def propose(self, count: int, p_min: float | None = None
                ) -> tuple[mx.array, mx.array | None, float | None]:
        """Up to ``count`` copied tokens: certain drafts, which ``p_min`` never stops."""
        start = self.match()
        drafts = [] if start is None else self.history[start : start + count]
        return (mx.array(drafts, mx.uint32) if drafts else no_drafts()), None, None

    def settle(
        self, drafts: list[int], accepted: int, token: int, hidden: mx.array | None
    ) -> None:
        self._extend(drafts[:accepted] + [token])


def run(
    models: Models,
    prompt: list[int],
    settings: DecodeSettings,
    clock: Clock = time.perf_counter,
) -> Iterator[Event]:
    """Prompt-lookup decoding: match length ``ngram_n``, at most ``ngram_k`` drafts (or
    ``auto``, starting from the machine's calibration when there is one)."""
    keys = KeyStream(settings.sampling.seed)
    lengths = {"ngram": draft_length(settings, "ngram", models.calibration)}
    return run_speculative(
        models.target, PromptLookup(settings.ngram_n), prompt, settings, lengths, keys, clock
    )
