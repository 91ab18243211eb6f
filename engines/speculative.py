"""The draft-and-verify loop shared by every speculative strategy.

A *proposer* (an external draft model, an MTP head, prompt lookup) suggests tokens; the
target checks them all in one forward pass; the acceptance rule of ``sampling.py``
decides; the target's cache is rewound exactly (``rollback.py``) and the proposer settles
its own state. Every step of that is recorded in the Round event, rejected drafts
included, which is what mlx-lm's ``speculative_generate_step`` cannot show.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, Protocol, Sequence

import mlx.core as mx
from mlx_lm.generate import generation_stream
from mlx_lm.models.cache import make_prompt_cache

from specdeck.engines.capture import CapturedPass, commit_prefix, forward_captured, supports_capture
from specdeck.engines.config import DecodeSettings
from specdeck.engines.decoding import Clock, Output, Timer, forward, forward_hidden, prefill_event
from specdeck.engines.events import EndKind, Event, Round
from specdeck.engines.loading import LoadedModel
from specdeck.engines.rollback import Rewind, checkpoint, rewind
from specdeck.engines.sampling import KeyStream, judge_drafts, sampling_logprobs, top_alternatives


class Proposer(Protocol):
    """Where drafts come from."""

    #: Whether ``settle`` needs the target's final hidden states from the verify pass
    #: (an MTP head drafts from them); the verify pass then runs trunk and output layer
    #: as two halves of one forward pass.
    wants_hidden: bool

    def companions(self) -> list[tuple[Any, Sequence[Any]]]:
        """Models (with their caches) to prefill alongside the target."""
        ...

    def begin(self, prompt: list[int], rest: mx.array) -> None:
        """The prompt was prefilled; ``rest`` is the one prompt token not yet fed."""
        ...

    def propose(self, count: int) -> tuple[mx.array, mx.array | None]:
        """Up to ``count`` draft ids (lazy, 1-D) and the sampling log-probs (n, V) they
        were drawn from, or None when the proposer is deterministic."""
        ...

    def settle(
        self, drafts: list[int], accepted: int, token: int, hidden: mx.array | None
    ) -> None:
        """The target kept ``drafts[:accepted]`` and then ``token``: catch up.

        ``hidden`` (when ``wants_hidden``): the target's final hidden states (1 + k, H)
        of the verify pass; row ``accepted`` is the one ``token`` was chosen from.
        """
        ...


def run_speculative(
    target: LoadedModel,
    proposer: Proposer,
    prompt: list[int],
    settings: DecodeSettings,
    max_drafts: int,
    keys: KeyStream,
    clock: Clock = time.perf_counter,
) -> Iterator[Event]:
    model = target.model
    cache = make_prompt_cache(model, max_kv_size=settings.max_kv_size)
    sampling = settings.sampling
    output = Output(target.tokenizer, settings)
    timer = Timer(clock)

    pre, pending = prefill_event(
        model, cache, prompt, settings, timer, *proposer.companions()
    )
    proposer.begin(prompt, pending)
    yield pre

    # Hybrid targets keep each position's recurrent state in the verify pass, so a
    # rejection never needs a second pass (``engines.capture``).
    captures = supports_capture(model)
    last = pre.t
    index = 0
    while not output.finished:
        with mx.stream(generation_stream):
            drafts, draft_lp = proposer.propose(min(max_drafts, output.remaining))
        mx.eval(drafts)
        drafted = drafts.tolist()
        k = len(drafted)
        after_draft = timer.now()

        with mx.stream(generation_stream):
            verified = mx.concatenate([pending, drafts])
            captured: CapturedPass | None = None
            if captures:
                captured = forward_captured(model, cache, verified, proposer.wants_hidden)
                logprobs, hidden = captured.logprobs, captured.hidden
            else:
                point = checkpoint(cache, 1 + k)
                if proposer.wants_hidden:
                    logprobs, hidden = forward_hidden(model, cache, verified)
                else:
                    logprobs, hidden = forward(model, cache, verified), None
            lp = sampling_logprobs(logprobs, sampling)
            verdict = judge_drafts(drafts, lp, draft_lp, sampling, keys)
            wanted = [verdict.passed, verdict.fallback, verdict.target_probs, verdict.draft_probs]
            if verdict.uniforms is not None:
                wanted.append(verdict.uniforms)
            if settings.alternatives:
                wanted.extend(top_alternatives(lp, settings.alternatives))
        mx.eval(wanted)
        passed = verdict.passed.tolist()
        accepted = next((i for i, ok in enumerate(passed) if not ok), k)
        token = verdict.fallback[accepted].item()

        replayed = 0
        if captured is not None:
            action = Rewind.NONE if accepted == k else Rewind.CAPTURED
            if action is Rewind.CAPTURED:
                commit_prefix(cache, captured, keep=1 + accepted, fed=1 + k)
        else:
            action = rewind(cache, point, keep=1 + accepted)
        if action is Rewind.REPLAY:
            replayed = 1 + accepted
            with mx.stream(generation_stream):
                model(mx.concatenate([pending, drafts[:accepted]])[None], cache=cache)
            mx.eval([c.state for c in cache])
        proposer.settle(drafted, accepted, token, hidden)
        pending = mx.array([token], mx.uint32)
        now = timer.now()

        tokens: list[int] = []
        pieces: list[str] = []
        for t in drafted[:accepted]:
            tokens.append(t)
            pieces.append(output.add(t))
            if output.finished:
                break
        end: EndKind | None = None
        if not output.finished:
            tokens.append(token)
            pieces.append(output.add(token))
            end = "bonus" if accepted == k and k else ("correction" if k else "target")
        alternatives = None
        if settings.alternatives:
            ids, probs = wanted[-2], wanted[-1]
            alternatives = [
                [[i, p] for i, p in zip(row_ids, row_p)]
                for row_ids, row_p in zip(ids.tolist(), probs.tolist())
            ]
        yield Round(
            index=index,
            drafted=drafted,
            accepted=accepted,
            tokens=tokens,
            end=end,
            pieces=pieces,
            rejected_pieces=output.draft_pieces(drafted[accepted:]) if accepted < k else [],
            draft_seconds=after_draft - last,
            verify_seconds=now - after_draft,
            t=now,
            draft_probs=verdict.draft_probs.tolist() if k else None,
            target_probs=verdict.target_probs.tolist() if k else None,
            uniforms=verdict.uniforms.tolist() if verdict.uniforms is not None else None,
            alternatives=alternatives,
            rollback=action.value,
            replayed=replayed,
        )
        last = now
        index += 1
    yield timer.done(output)
