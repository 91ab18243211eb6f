"""Plain autoregressive decoding: the baseline every other strategy is measured against.

The loop is mlx-lm's ``generate_step``: the next step's graph is queued before the
current token is read back, and the token's text and Round are made while that step
runs, so the device never waits for Python. Each token is a Round with no drafts.
"""

from __future__ import annotations

import time
from typing import Iterator, TYPE_CHECKING

import mlx.core as mx
from mlx_lm.generate import generation_stream
from mlx_lm.models.cache import make_prompt_cache

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.decode.shared import (
    CLEAR_CACHE_EVERY, Clock, Output, Timer, forward, prefill_event, wired_limit,
)
from specdeck.engines.core.events import Event, Round
from specdeck.engines.decode.sampling import KeyStream, choose, sampling_logprobs, top_alternatives

if TYPE_CHECKING:  # run.py imports this module when it runs a strategy
    from specdeck.engines.decode.run import Models


def run(
    models: Models,
    prompt: list[int],
    settings: DecodeSettings,
    clock: Clock = time.perf_counter,
) -> Iterator[Event]:
    target = models.target
    model = target.model
    cache = make_prompt_cache(model, max_kv_size=settings.max_kv_size)
    sampling = settings.sampling
    keys = KeyStream(sampling.seed)
    output = Output(target.tokenizer, settings)

    def step(tokens: mx.array) -> tuple[mx.array, ...]:
        with mx.stream(generation_stream):
            lp = sampling_logprobs(forward(model, cache, tokens)[-1:], sampling)  # (1, V)
            token = choose(lp, sampling, keys)
            if settings.alternatives:
                ids, probs = top_alternatives(lp, settings.alternatives)
                extra = (ids, probs)
            else:
                extra = ()
        mx.async_eval(token, *extra)
        return (token, *extra)

    with wired_limit():
        timer = Timer(clock)
        pre, y = prefill_event(model, cache, prompt, settings, timer)
        yield pre

        current = step(y)
        last = pre.t
        index = 0
        while True:
            upcoming = step(current[0]) if output.remaining > 1 else None
            token = current[0].item()
            now = timer.now()
            output.extend([token])
            alternatives = None
            if settings.alternatives:
                alternatives = [
                    [[i, p] for i, p in zip(row_ids, row_p)]
                    for row_ids, row_p in zip(current[1].tolist(), current[2].tolist())
                ]
            yield Round(
                index=index,
                drafted=[],
                accepted=0,
                tokens=[token],
                end="target",
                pieces=output.pieces([token]),
                rejected_pieces=[],
                draft_seconds=0.0,
                verify_seconds=now - last,
                t=now,
                alternatives=alternatives,
            )
            if output.finished or upcoming is None:
                break
            current, last, index = upcoming, now, index + 1
            if index % CLEAR_CACHE_EVERY == 0:
                mx.clear_cache()
        yield timer.done(output)
