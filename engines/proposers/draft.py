"""Speculative decoding with an external draft model (the ``draft`` strategy)."""

from __future__ import annotations

import time
from typing import Any, Iterator, Mapping, Sequence, TYPE_CHECKING

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.decode.shared import Clock, prefill
from specdeck.engines.proposers.draft_vocab import WholeVocabulary
from specdeck.engines.auto.length import draft_length
from specdeck.engines.core.events import Event
from specdeck.engines.models.loading import LoadedModel
from specdeck.engines.decode.rollback import Checkpoint, checkpoint, restore
from specdeck.engines.decode.sampling import KeyStream, choose, no_drafts, sampling_logprobs
from specdeck.engines.decode.speculative import run_speculative

if TYPE_CHECKING:  # run.py imports this module when it runs a strategy
    from specdeck.engines.decode.run import Models


class DraftModel:
    """Proposals from an external draft model sharing the target's tokenizer.

    The draft is checkpointed before each of its steps, so after a rejection its cache
    goes straight back to the last accepted token: trimmed where it can be, the recurrent
    state of a hybrid draft restored from the checkpoint, never replayed. A round it did
    not draft (``auto`` chose a plain step, or another drafter of a ``chain`` drafted)
    leaves the round's tokens pending: its next draft step catches up on them as a
    prefill does, for their cache entries only, so the output layer runs on the last one
    alone (on a 49k vocabulary it is most of the cost: 32 skipped tokens took 34 ms
    through the whole model and 13 ms this way on the CPU). A draft whose folder lists
    the tokens it drafts from steps over those alone (``engines.draft_vocab``).
    """

    wants_hidden = False
    guesser = "draft"

    def __init__(self, draft: LoadedModel, settings: DecodeSettings, keys: KeyStream) -> None:
        self.model = draft.model
        self.cache = make_prompt_cache(self.model, max_kv_size=settings.max_kv_size)
        self.sampling = settings.sampling
        self.prefill_step_size = settings.prefill_step_size
        self.vocabulary = draft.vocabulary or WholeVocabulary(self.model)
        self.keys = keys
        self.pending: mx.array | None = None
        self.points: list[Checkpoint] = []

    def drafter(self) -> str:
        return "draft"

    def companions(self) -> list[tuple[Any, Sequence[Any]]]:
        return [(self.model, self.cache)]

    def begin(self, prompt: list[int], rest: mx.array) -> None:
        self.pending = rest

    def may_draft(self, counts: Mapping[str, int]) -> bool:
        return counts[self.drafter()] > 0

    def propose(self, count: int, p_min: float | None = None
                ) -> tuple[mx.array, mx.array | None, float | None]:
        y = self.pending
        self.points = []
        if not count:
            return no_drafts(), None, None
        if y.size > 2:
            # Rounds it skipped. (The two tokens after a round it drafted in full go in
            # together, as mlx-lm feeds them.)
            y = self.pending = prefill(self.model, self.cache, y, self.prefill_step_size)
        drafts, lps = [], []
        for _ in range(count):
            self.points.append(checkpoint(self.cache, y.size))
            # (1, V) and (1,): no reshaping between steps (on the CPU backend every
            # operation costs dispatch time, and this loop is most of a round).
            lp = sampling_logprobs(self.vocabulary.step(self.cache, y), self.sampling)
            if p_min is not None and (top := mx.exp(lp.max()).item()) < p_min:
                # ``pmin``: no draft here; the step that read y is undone, so y is
                # still to be fed, as after a round that drafted nothing.
                restore(self.cache, self.points.pop(), discard=y.size)
                if not drafts:
                    return no_drafts(), None, top
                return mx.concatenate(drafts), mx.concatenate(lps), top
            y = self.vocabulary.pick(choose(lp, self.sampling, self.keys))
            mx.async_eval(y)
            drafts.append(y)
            lps.append(self.vocabulary.widen(lp))
        return mx.concatenate(drafts), mx.concatenate(lps), None

    def guesses(self, at_least: int) -> list[bool] | None:
        """Catch up on the tokens it skipped with its output layer on every one: its
        greedy guess at each next token, judged against the token the target chose
        (equal: a draft there would have been kept). None while fewer than
        ``at_least`` are pending or a round it drafted is in flight."""
        y = self.pending
        if self.points or y.size <= at_least:
            return None
        guessed = self.vocabulary.guesses(self.cache, y[:-1])
        self.pending = y[-1:]
        return (guessed == y[1:]).tolist()

    def settle(
        self, drafts: list[int], accepted: int, token: int, hidden: mx.array | None
    ) -> None:
        k, points = len(drafts), self.points
        self.points = []
        if not points:  # someone else drafted, or nobody: catch up next time
            kept = mx.array(drafts[:accepted] + [token], mx.uint32)
            self.pending = mx.concatenate([self.pending, kept])
        elif accepted == k:
            # The last draft was proposed but never fed to the draft model.
            self.pending = mx.array([drafts[-1], token], mx.uint32)
        else:
            if accepted + 1 < k:
                restore(self.cache, points[accepted + 1], discard=k - 1 - accepted)
            self.pending = mx.array([token], mx.uint32)


def run(
    models: Models,
    prompt: list[int],
    settings: DecodeSettings,
    clock: Clock = time.perf_counter,
) -> Iterator[Event]:
    """Speculative decoding with an external draft model, k = ``num_draft_tokens``
    (or ``auto``, starting from the machine's calibration when there is one)."""
    keys = KeyStream(settings.sampling.seed)
    proposer = DraftModel(models.draft, settings, keys)
    lengths = {"draft": draft_length(settings, "draft", models.calibration)}
    return run_speculative(models.target, proposer, prompt, settings, lengths, keys, clock)
