"""Prompt-lookup decoding (the ``ngram`` strategy): drafts copied from the text itself.

When the last ``n`` tokens occurred before (in the prompt or in what was generated), the
tokens that followed them then are likely to follow now: code being rewritten, a quoted
passage, a repeated structure. Those tokens are the drafts, up to ``k`` of them, as many
as the copies so far make likely to be kept (``PromptLookup``); the target verifies them
in one pass like any other drafts. No second model, nothing to
prefill, and a draft is a fixed token (a point mass), which the acceptance rule of
``sampling.py`` handles exactly, so the output stays the target's at any temperature.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Iterator, Mapping, Sequence, TYPE_CHECKING

import mlx.core as mx

from specdeck.engines.core.config import MAX_DRAFT_TOKENS, DecodeSettings
from specdeck.engines.decode.shared import Clock
from specdeck.engines.auto.length import draft_length
from specdeck.engines.core.events import Event
from specdeck.engines.decode.sampling import KeyStream, no_drafts
from specdeck.engines.decode.speculative import run_speculative

if TYPE_CHECKING:  # run.py imports this module when it runs a strategy
    from specdeck.engines.decode.run import Models


#: The longest suffix looked up. A longer match tells apart the occurrences of a short
#: one (vLLM's ``prompt_lookup_max``, llama.cpp's lookup n-gram sizes).
LONGEST = 8
#: Occurrences of the shortest n-gram compared, latest first: bounds a round's work on
#: text where it recurs thousands of times.
RECENT = 32
#: A copied token is drafted only while the chance that it and the copied tokens before
#: it are all kept is at least this. A paraphrase (a summary) copies a few words at a
#: time, so its drafts stay short and mostly kept; a verbatim copy earns long drafts.
SURE = 0.6
#: After this many copies in a row had a draft rejected, a copy needs a match longer than
#: ``n`` tokens until one is kept whole: a model that writes the text anew meets the
#: prompt's common phrases ("and I am") but goes its own way after them.
MISSES = 3
#: How a token's text ends when it ends a sentence (``sentence_ends``).
FULL_STOPS = (".", "!", "?", "\n", "\u3002", "\uff01", "\uff1f")


def sentence_ends(tokenizer: Any) -> Callable[[int], bool]:
    """Whether a token ends a sentence (its text ends with a full stop, a question or
    exclamation mark or a line break), each token decoded once."""
    @functools.cache
    def ends(token: int) -> bool:
        return tokenizer.decode([token]).rstrip(" ").endswith(FULL_STOPS)
    return ends


class PromptLookup:
    """Proposals copied from where the text last read as it reads now.

    The longest suffix of the text (``n`` to ``LONGEST`` tokens) that occurred before
    names the occurrences to copy from, the latest first. The copy stops where those
    occurrences disagree (common words met by chance, not a quotation) and, beyond its
    first token, where the chance that the next one is kept with those before it falls
    under ``SURE``: each copied token is taken to be kept with the chance that Laplace's
    rule of succession gives after the copied tokens kept since the last rejected one,
    (s + 1) / (s + 2). So drafts grow while copies keep being kept and fall back to one
    token after a miss. No copy starts right after the end of a sentence until a copied
    sentence end has been kept since the last miss: a rewrite or a summary keeps the
    prompt's phrases but chooses its own next sentence, a verbatim copy keeps whole
    sentences. After ``MISSES`` copies in a row had a draft rejected, only a match longer
    than ``n`` is copied until a copy is kept whole. An index from every n-gram to the
    positions right after its occurrences keeps each lookup short however long the text.
    """

    wants_hidden = False
    guesser = None

    def __init__(self, n: int, ends_sentence: Callable[[int], bool] = lambda token: False
                 ) -> None:
        self.n = n
        self.ends_sentence = ends_sentence
        self.history: list[int] = []
        self.follows: dict[tuple[int, ...], list[int]] = {}
        #: The first n - 1 tokens of every n-gram in ``follows`` (``may_draft``).
        self.heads: set[tuple[int, ...]] = set()
        #: Copied drafts kept since the last one rejected.
        self.streak = 0
        #: Whether a copied token that ended a sentence was kept since the last miss.
        self.copies_sentences = False
        #: Copies in a row that had a draft rejected.
        self.missed = 0
        #: How many drafts the last ``propose`` copied (a chain's model drafts others).
        self.copied = 0

    def drafter(self) -> str:
        return "ngram"

    def companions(self) -> list[tuple[Any, Sequence[Any]]]:
        return []

    @classmethod
    def for_run(cls, settings: DecodeSettings, tokenizer: Any) -> PromptLookup:
        """Prompt lookup as the ngram and chain strategies run it: ``settings``' match
        length, sentence ends read from ``tokenizer``."""
        return cls(settings.ngram_n, sentence_ends(tokenizer))

    def begin(self, prompt: list[int], rest: mx.array) -> None:
        self.history, self.follows, self.heads = [], {}, set()
        self.streak = self.copied = self.missed = 0
        self.copies_sentences = False
        self._extend(prompt)

    def _extend(self, tokens: list[int]) -> None:
        n, history = self.n, self.history
        for token in tokens:
            if len(history) >= n:
                gram = tuple(history[-n:])
                self.follows.setdefault(gram, []).append(len(history))
                self.heads.add(gram[:-1])
            history.append(token)

    def match(self) -> tuple[int, int] | None:
        """Where the copy starts and how many tokens its sources agree on (at least
        one), from the latest occurrences of the longest suffix seen before; None when
        the text offers no such match, when it ends a sentence and no copied sentence
        end was kept since the last miss, or when the match is ``n`` tokens long and the
        last ``MISSES`` copies each had a draft rejected."""
        history, n = self.history, self.n
        if len(history) < n or (self.ends_sentence(history[-1]) and not self.copies_sentences):
            return None
        starts = self.follows.get(tuple(history[-n:]), [])[-RECENT:]
        longest, best = 0, []
        for start in reversed(starts):
            length = n
            while (length < LONGEST and length < start
                   and history[start - length - 1] == history[-length - 1]):
                length += 1
            if length > longest:
                longest, best = length, [start]
            elif length == longest:
                best.append(start)
        if not best or (longest == n and self.missed >= MISSES):
            return None
        agreed = 0
        while agreed < MAX_DRAFT_TOKENS and all(
                s + agreed < len(history) and history[s + agreed] == history[best[0] + agreed]
                for s in best):
            agreed += 1
        return (best[0], agreed) if agreed else None

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
        found = self.match()
        drafts: list[int] = []
        if found is not None and count > 0:
            start, agreed = found
            rate = (self.streak + 1) / (self.streak + 2)
            length, sure = 1, rate
            while length < min(count, agreed) and sure * rate >= SURE:
                length, sure = length + 1, sure * rate
            drafts = self.history[start : start + length]
        self.copied = len(drafts)
        return (mx.array(drafts, mx.uint32) if drafts else no_drafts()), None, None

    def settle(
        self, drafts: list[int], accepted: int, token: int, hidden: mx.array | None
    ) -> None:
        if self.copied:
            whole = accepted == len(drafts)
            self.streak = self.streak + accepted if whole else 0
            self.missed = 0 if whole else self.missed + 1
            self.copies_sentences = whole and (
                self.copies_sentences or any(map(self.ends_sentence, drafts)))
            self.copied = 0
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
    lookup = PromptLookup.for_run(settings, models.target.tokenizer)
    return run_speculative(models.target, lookup, prompt, settings, lengths, keys, clock)
