"""Pieces every strategy shares: the model call, prompt prefill, output bookkeeping, timing.

Keeping them in one place is what makes strategies comparable: the same prefill, the same
stop rules, the same clock and the same text pieces for every pane.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator, Sequence

import mlx.core as mx
from mlx_lm.generate import generation_stream

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.events import Done, FinishReason, Prefill

Clock = Callable[[], float]

#: Free mlx's buffer cache every this many generated tokens, as mlx-lm's loops do: a
#: long run (or an engine process that runs for hours) otherwise keeps every buffer
#: size it ever used.
CLEAR_CACHE_EVERY = 256


def log_probs(logits: mx.array) -> mx.array:
    """Normalise logits over the vocabulary (the last axis)."""
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


def forward(model: Any, cache: Sequence[Any], tokens: mx.array) -> mx.array:
    """Log-probabilities (S, V) after each of ``tokens`` (1-D), advancing ``cache``."""
    return log_probs(model(tokens[None], cache=cache).squeeze(0))


def output_layer(model: Any) -> Any:
    """The layer that maps a causal LM's final hidden states to logits: ``lm_head``, or
    the embedding when the two are tied."""
    text = getattr(model, "language_model", model)
    return text.lm_head if "lm_head" in text else text.model.embed_tokens


def split_at_output(model: Any) -> tuple[Any, Callable[[mx.array], mx.array]]:
    """A causal LM cut where its output layer begins: (trunk, output layer).

    The trunk maps ids to the final, normed hidden states; the output layer maps those to
    logits (``lm_head``, or the embedding matrix when tied). Valid for the families whose
    logits are exactly that (Llama, Qwen3, Qwen3.5/3.6), which is what MTP heads need:
    they draft from the trunk's hidden state through the trunk's own output layer. On a
    target split by tensor (``engines.distributed``) the output layer gathers every
    rank's slice of the vocabulary, as the model's own call does.
    """
    text = getattr(model, "language_model", model)
    layer = output_layer(model)
    output = layer if "lm_head" in text else layer.as_linear
    group = getattr(text, "sharding_group", None)
    if group is not None:  # a tensor-split output layer holds a slice of the vocabulary
        from mlx_lm.models.base import gather_last_axis

        sliced = output
        output = lambda hidden: gather_last_axis(sliced(hidden), group)  # noqa: E731
    return text.model, output


def forward_hidden(
    model: Any, cache: Sequence[Any], tokens: mx.array
) -> tuple[mx.array, mx.array]:
    """``forward``, also returning the final hidden states (S, H) behind each row, from
    the same single pass (see ``split_at_output``)."""
    trunk, output = split_at_output(model)
    hidden = trunk(tokens[None], cache=cache).squeeze(0)
    return log_probs(output(hidden)), hidden


def prefill(model: Any, cache: Sequence[Any], prompt: mx.array, step: int) -> mx.array:
    """Feed all but the last prompt token in chunks; return what is left to feed.

    Every strategy leaves exactly one token, so the first decode step of each sees the
    same cache and the same input: plain and speculative runs start identical.
    """
    while prompt.size > 1:
        n = min(step, prompt.size - 1)
        model(prompt[:n][None], cache=cache)
        mx.eval([c.state for c in cache])
        prompt = prompt[n:]
        if prompt.size > 1:
            mx.clear_cache()  # a long prompt: free this chunk's activations (as mlx-lm does)
    return prompt


class _Wired:
    """The runs under way with the wired limit raised, and the limit to put back."""

    lock = threading.Lock()
    runs = 0
    before = 0


@contextlib.contextmanager
def wired_limit() -> Iterator[None]:
    """Keep the GPU's memory wired for the duration of a run on Metal (as mlx-lm's
    ``generate`` does), so the weights are not paged out between steps; no-op on the CPU
    and CUDA backends. Runs may overlap (threads): the first to start raises the limit
    and the last to end puts the old one back, once nothing is in flight."""
    limit = mx.device_info().get("max_recommended_working_set_size")
    if not (mx.metal.is_available() and limit):
        yield
        return
    with _Wired.lock:
        if _Wired.runs == 0:
            _Wired.before = mx.set_wired_limit(limit)
        _Wired.runs += 1
    try:
        yield
    finally:
        mx.synchronize(generation_stream)  # the limit must not change under an async eval
        with _Wired.lock:
            _Wired.runs -= 1
            if _Wired.runs == 0:
                mx.set_wired_limit(_Wired.before)


class Output:
    """The tokens a run has produced, their text, and when it must stop."""

    def __init__(self, tokenizer: Any, settings: DecodeSettings) -> None:
        self._tokenizer = tokenizer
        self._detokenizer = tokenizer.detokenizer
        self._eos = set(tokenizer.eos_token_ids) if settings.stop_at_eos else set()
        self.max_tokens = settings.max_tokens
        self.tokens: list[int] = []
        self.reason: FinishReason | None = None

    @property
    def remaining(self) -> int:
        return self.max_tokens - len(self.tokens)

    @property
    def finished(self) -> bool:
        return self.reason is not None

    def extend(self, tokens: Sequence[int]) -> int:
        """Append ``tokens`` in order until the run must stop (end of sequence, max
        tokens); return how many were kept. Cheap: the text comes from ``pieces``, which
        the loops call once the next forward pass is queued."""
        for kept, token in enumerate(tokens, 1):
            self.tokens.append(token)
            if token in self._eos:
                self.reason = "stop"
                return kept
            if len(self.tokens) >= self.max_tokens:
                self.reason = "length"
                return kept
        return len(tokens)

    def pieces(self, tokens: Sequence[int]) -> list[str]:
        """The text each of ``tokens`` (the ones ``extend`` just kept) adds, from the
        streaming detokenizer; end of sequence adds none."""
        detokenizer, pieces = self._detokenizer, []
        for token in tokens:
            if token in self._eos:
                pieces.append("")
            else:
                detokenizer.add_token(token)
                pieces.append(detokenizer.last_segment)
        return pieces

    def tail(self) -> str:
        """Flush what the detokenizer still holds at the end of the run."""
        self._detokenizer.finalize()
        return self._detokenizer.last_segment

    def draft_pieces(self, ids: list[int]) -> list[str]:
        """Text of each of a run of proposed tokens, decoded together so that multi-byte
        characters split across them come out whole."""
        pieces, before = [], ""
        for i in range(len(ids)):
            text = self._tokenizer.decode(ids[: i + 1])
            pieces.append(text[len(before) :] if text.startswith(before) else text)
            before = text
        return pieces


class Timer:
    """Run-relative time from one clock, and peak memory since the run began."""

    def __init__(self, clock: Clock = time.perf_counter) -> None:
        self.clock = clock
        mx.synchronize()
        mx.reset_peak_memory()
        self.start = clock()

    def now(self) -> float:
        return self.clock() - self.start

    def done(self, output: Output) -> Done:
        reason = output.reason or "length"
        return Done(
            reason=reason,
            generated_tokens=len(output.tokens),
            seconds=self.now(),
            peak_memory_bytes=int(mx.get_peak_memory()),
            tail=output.tail(),
        )


def prefill_event(
    model: Any, cache: Sequence[Any], prompt: list[int], settings: DecodeSettings, timer: Timer,
    *extra: tuple[Any, Sequence[Any]],
) -> tuple[Prefill, mx.array]:
    """Prefill the target (and any extra model/cache pairs); time it as one phase."""
    tokens = mx.array(prompt, mx.uint32)
    with mx.stream(generation_stream):
        for other, other_cache in extra:
            prefill(other, other_cache, tokens, settings.prefill_step_size)
        rest = prefill(model, cache, tokens, settings.prefill_step_size)
    t = timer.now()
    return Prefill(prompt_tokens=len(prompt), seconds=t, t=t), rest
