"""The draft-and-verify loop shared by every speculative strategy.

A *proposer* (an external draft model, an MTP head, prompt lookup) suggests tokens; the
target checks them all in one forward pass; the acceptance rule of ``sampling.py``
decides; the target's cache is rewound exactly (``rollback.py``) and the proposer settles
its own state. Every step of that is recorded in the Round event, rejected drafts
included, which is what mlx-lm's ``speculative_generate_step`` cannot show.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping, Protocol, Sequence

import mlx.core as mx
from mlx_lm.generate import generation_stream
from mlx_lm.models.cache import make_prompt_cache

from specdeck.engines.decode.capture import CapturedPass, commit_prefix, forward_captured, supports_capture
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.decode.shared import (
    CLEAR_CACHE_EVERY, Clock, Output, Timer, forward, forward_hidden, prefill_event, wired_limit,
)
from specdeck.engines.auto.length import DraftLength, LearnsFromGuesses
from specdeck.engines.core.events import EndKind, Event, LengthChoice, Round
from specdeck.engines.models.loading import LoadedModel
from specdeck.engines.decode.rollback import Checkpoint, Rewind, checkpoint, rewind
from specdeck.engines.decode.sampling import (
    KeyStream, Verdict, judge_drafts, leading_run, sampling_logprobs, top_alternatives,
)


@dataclass(slots=True)
class _Pass:
    """A verify pass queued: the target's hidden states when the proposer wants them, the
    states it captured (hybrid targets), the cache's checkpoint before it (else), the
    verdict on the drafts and what the inspector shows."""

    hidden: mx.array | None
    captured: CapturedPass | None
    point: Checkpoint | None
    verdict: Verdict
    #: The target's top alternatives at each position (ids, probabilities), or ().
    top: tuple[mx.array, ...]

    def start(self) -> None:
        """Run a plain step now, its alternatives with its token (as plain decoding
        does: read later, they would wait for whatever is queued behind them)."""
        mx.async_eval(self.verdict.passed, self.verdict.fallback, *self.top)


class Proposer(Protocol):
    """Where drafts come from."""

    def drafter(self) -> str:
        """Who drafts the next round (``draft``, ``mtp``, ``ngram``): the key of its
        draft length policy and what the round records as its proposer."""
        ...

    #: Whether ``settle`` needs the target's final hidden states from the verify pass
    #: (an MTP head drafts from them); the verify pass then runs trunk and output layer
    #: as two halves of one forward pass.
    wants_hidden: bool

    #: The drafter whose greedy guesses ``guesses`` can judge (``draft``), or None.
    guesser: str | None

    def companions(self) -> list[tuple[Any, Sequence[Any]]]:
        """Models (with their caches) to prefill alongside the target."""
        ...

    def begin(self, prompt: list[int], rest: mx.array) -> None:
        """The prompt was prefilled; ``rest`` is the one prompt token not yet fed."""
        ...

    def may_draft(self, counts: Mapping[str, int]) -> bool:
        """Whether the round after one that drafted nothing could draft anything, each
        drafter asking for ``counts[drafter()]`` drafts, whatever token that round ends
        with. Asked before the token is read: where it cannot, the next plain step is
        queued first, as plain decoding queues its next step."""
        ...

    def propose(self, count: int, p_min: float | None = None
                ) -> tuple[mx.array, mx.array | None, float | None]:
        """Up to ``count`` draft ids (lazy, 1-D), the sampling log-probs (n, V) they
        were drawn from (None when the proposer is deterministic) and, with ``p_min``
        (the ``pmin`` policy), the draft's top probability at the position where it
        stopped short of ``count`` because that probability was under ``p_min`` (else
        None)."""
        ...

    def guesses(self, at_least: int) -> list[bool] | None:
        """``guesser``'s greedy guess at each token it has not seen yet (verified rounds
        it did not draft), judged against that token; None while fewer than
        ``at_least`` are pending. Asked only at temperature 0, of a ``guesser``."""
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
    lengths: Mapping[str, DraftLength],
    keys: KeyStream,
    clock: Clock = time.perf_counter,
) -> Iterator[Event]:
    """Draft, verify, rewind and record, round after round; ``lengths`` says how many
    drafts each drafter the proposer uses asks for (a fixed k, or ``auto``).

    Only the verdict is read back before the next round's drafts are queued. What the
    round records besides (probabilities, uniform draws, the target's alternatives) is
    computed ahead of those drafts, and the round is written down (text, event) while
    the next round's verify pass runs, as mlx-lm overlaps Python work with the next
    step; that pass is built while the drafts compute, as mlx-lm builds it. A round's
    ``draft_seconds`` therefore runs from the end of the previous round's verify pass
    to the moment its drafts are known, and includes building its verify pass where
    that outlasts the drafting; ``verify_seconds`` runs from there to the end of the
    verdict and rewind, and includes the recording of the previous round where that
    outlasts the verify pass. A round that
    drafts nothing (``auto`` chose a plain step, lookup found no match, MTP's first) is
    queued as soon as it can be: after a round that drafted nothing, before that round's
    token is read where no token could let it draft (``Proposer.may_draft``), as plain
    decoding queues its next step; else once the token is read. All its time counts as
    verify. Rounds tile the decode time.
    """
    model = target.model
    cache = make_prompt_cache(model, max_kv_size=settings.max_kv_size)
    sampling = settings.sampling
    output = Output(target.tokenizer, settings)

    # At temperature 0 ``auto`` learns from the draft model's guesses over the plain
    # steps' tokens what drafting rounds there would have kept, for a fraction of a step.
    guessing = lengths.get(proposer.guesser or "") if sampling.greedy else None
    if not isinstance(guessing, LearnsFromGuesses):
        guessing = None
    else:
        guessing.expect_guesses()
    # Each drafter's choice for its next round, made from the rounds before the last
    # while the last one's verify pass runs (``engines.auto``).
    choices = {name: policy.choose() for name, policy in lengths.items()}

    def propose() -> tuple[mx.array, mx.array | None, str, LengthChoice]:
        drafter = proposer.drafter()
        choice = choices[drafter]
        with mx.stream(generation_stream):
            drafts, lp, stopped = proposer.propose(min(choice.k, output.remaining),
                                                   choice.p_min)
        # Queued as they are, waiting for the drafts costs no trip through mlx's stream
        # (a task of its own, and waking the stream's thread once the drafts are done).
        mx.async_eval(drafts)
        if stopped is not None:
            choice = replace(choice, stopped=stopped)
        return drafts, lp, drafter, choice

    with wired_limit():
        timer = Timer(clock)
        pre, pending = prefill_event(
            model, cache, prompt, settings, timer, *proposer.companions()
        )
        proposer.begin(prompt, pending)
        yield pre

        # Hybrid targets keep each position's recurrent state in the verify pass, so a
        # rejection never needs a second pass (``engines.capture``).
        captures = supports_capture(model)

        def verify(pending: mx.array, drafts: mx.array, draft_lp: mx.array | None) -> _Pass:
            """Queue the target's pass over ``pending`` and the drafts, and the verdict.
            A pass with no drafts has nothing to rewind: a plain step."""
            k = drafts.size
            with mx.stream(generation_stream):
                verified = mx.concatenate([pending, drafts]) if k else pending
                captured: CapturedPass | None = None
                point = None
                if captures and k:
                    captured = forward_captured(model, cache, verified, proposer.wants_hidden)
                    logprobs, hidden = captured.logprobs, captured.hidden
                else:
                    point = checkpoint(cache, 1 + k) if k else None
                    if proposer.wants_hidden:
                        logprobs, hidden = forward_hidden(model, cache, verified)
                    else:
                        logprobs, hidden = forward(model, cache, verified), None
                lp = sampling_logprobs(logprobs, sampling)
                verdict = judge_drafts(drafts, lp, draft_lp, sampling, keys)
                top = top_alternatives(lp, settings.alternatives) if settings.alternatives else ()
            return _Pass(hidden, captured, point, verdict, top)

        def write(event: Round, drafter: str, choice: LengthChoice,
                  probs: list[mx.array], top: tuple[mx.array, ...]) -> Round:
            """What ``event`` records beyond its tokens (text, probabilities, alternatives,
            the length policy's choice), and what its policy learns from it."""
            k = len(event.drafted)
            event.pieces = output.pieces(event.tokens)
            if event.accepted < k:
                event.rejected_pieces = output.draft_pieces(event.rejected)
            if k:
                event.draft_probs, event.target_probs = probs[0].tolist(), probs[1].tolist()
                event.exact_match_accepted = leading_run(probs[2].tolist())
                if len(probs) > 3:
                    event.uniforms = probs[3].tolist()
            if top:
                event.alternatives = [
                    [[i, p] for i, p in zip(row_ids, row_p)]
                    for row_ids, row_p in zip(top[0].tolist(), top[1].tolist())
                ]
            if choice.policy != "fixed":
                event.length = choice
            lengths[drafter].observe(event)
            if guessing is not None and not output.finished and (
                    wait := guessing.guess_after()) is not None:
                with mx.stream(generation_stream):
                    judged = proposer.guesses(wait)
                if judged:
                    guessing.observe_guesses(judged)
                    if event.length is not None:
                        event.length = replace(event.length, guesses=judged)
            choices[drafter] = lengths[drafter].choose()
            return event

        last = pre.t
        index = cleared = 0
        drafts, draft_lp, drafter, choice = propose()
        queued: _Pass | None = None
        # The last round, to be written down while the next one's verify pass runs.
        unwritten: tuple[Round, str, LengthChoice, list[mx.array], tuple[mx.array, ...]] | None
        unwritten = None
        while True:
            k = drafts.size
            checked, queued = queued or verify(pending, drafts, draft_lp), None
            if k:
                mx.eval(drafts)
            after_draft = timer.now()
            hidden, captured, verdict = checked.hidden, checked.captured, checked.verdict
            # What the round records besides its tokens is computed with its verdict,
            # ahead of the next drafts.
            probs = [verdict.draft_probs, verdict.target_probs, verdict.exact_match]
            if verdict.uniforms is not None:
                probs.append(verdict.uniforms)
            mx.async_eval(verdict.passed, verdict.fallback, *probs, *checked.top)
            if unwritten is not None:
                yield write(*unwritten)
            if not k and not proposer.may_draft({n: c.k for n, c in choices.items()}):
                # A plain step, and the next round drafts nothing either (none asked
                # for, or none to be had: prompt lookup with no match possible): queue
                # its step on this one's token before reading it, as plain decoding does.
                queued = verify(verdict.fallback, drafts, None)
                queued.start()
            mx.eval(verdict.passed, verdict.fallback)
            drafted = drafts.tolist()
            accepted = leading_run(verdict.passed.tolist())
            token = verdict.fallback.tolist()[accepted]

            replayed = 0
            if captured is not None:
                action = Rewind.NONE if accepted == k else Rewind.CAPTURED
                if action is Rewind.CAPTURED:
                    commit_prefix(cache, captured, keep=1 + accepted, fed=1 + k)
            elif checked.point is not None:
                action = rewind(cache, checked.point, keep=1 + accepted)
            else:
                action = Rewind.NONE
            if action is Rewind.REPLAY:
                replayed = 1 + accepted
                with mx.stream(generation_stream):
                    model(mx.concatenate([pending, drafts[:accepted]])[None], cache=cache)
                mx.eval([c.state for c in cache])
            proposer.settle(drafted, accepted, token, hidden)
            pending = mx.array([token], mx.uint32)
            now = timer.now()

            # The tokens this round adds: the accepted drafts, then the target's token,
            # unless the run stops inside the accepted drafts.
            candidates = drafted[:accepted] + [token]
            tokens = candidates[: output.extend(candidates)]
            end: EndKind | None = None
            if len(tokens) > accepted:
                end = "bonus" if accepted == k and k else ("correction" if k else "target")
            event = Round(
                index=index,
                drafted=drafted,
                accepted=accepted,
                tokens=tokens,
                end=end,
                pieces=[],
                rejected_pieces=[],
                # A round that drafted nothing is a plain step, queued as the last
                # round ended: all of it is the target's, as in plain decoding.
                draft_seconds=after_draft - last if k else 0.0,
                verify_seconds=now - after_draft if k else now - last,
                t=now,
                rollback=action.value,
                replayed=replayed,
                proposer=drafter if k else None,
            )
            unwritten = (event, drafter, choice, probs, checked.top)
            if output.finished:
                yield write(*unwritten)
                break
            drafts, draft_lp, drafter, choice = propose()
            if queued is None and not drafts.size:  # the target's step runs right away
                queued = verify(pending, drafts, draft_lp)
                queued.start()
            last = now
            index += 1
            if len(output.tokens) - cleared >= CLEAR_CACHE_EVERY:
                mx.clear_cache()
                cleared = len(output.tokens)
        yield timer.done(output)
