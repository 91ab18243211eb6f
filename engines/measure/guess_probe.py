"""How far a draft model's greedy guesses, and an MTP head's drafts, run on ordinary
text: part of ``specdeck calibrate``.

The target decodes a few of specdeck's built-in prompts greedily (``GUESS_PROMPTS``,
``GUESS_TOKENS`` each, as a run encodes them: in the chat template where the tokenizer
has one); the draft then reads each prompt and that output in one pass, and its greedy
guess at every output token is right or not. From every output token, a round drafting
there at temperature 0 would keep the run of right guesses that starts there, so the
share of tokens whose run reaches i is the survival at position i of a typical round
(``Calibration.guess_survival``): ``calibrate`` prints it, and the best k it predicts on
such text.

An MTP head's drafts past the first are chained on its own hidden states, not on the
target's, so a run of right guesses at consecutive tokens is not what its round keeps:
``mtp_runs`` chains the head from every output token as a round would
(``Calibration.mtp_survival``).
"""

from __future__ import annotations

from typing import Sequence

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from specdeck.engines.measure.calibration import GUESS_TOKENS
from specdeck.engines.core.config import MAX_DRAFT_TOKENS, MAX_MTP_DEPTH, DecodeSettings
from specdeck.engines.decode.shared import forward_hidden
from specdeck.engines.proposers.draft_vocab import WholeVocabulary
from specdeck.engines.core.events import Round
from specdeck.engines.models.loading import LoadedModel
from specdeck.engines.proposers.mtp import MtpModel
from specdeck.engines.decode.run import Models, run_strategy


def greedy_output(target: LoadedModel, prompt: list[int], tokens: int = GUESS_TOKENS
                  ) -> list[int]:
    """The target's greedy output to ``prompt``, ``tokens`` long (its end token aside)."""
    settings = DecodeSettings(max_tokens=tokens, num_draft_tokens=0, stop_at_eos=False)
    return [t for event in run_strategy("plain", Models(target), prompt, settings)
            if isinstance(event, Round) for t in event.tokens]


def guesses_right(draft: LoadedModel, prompt: list[int], output: list[int]) -> list[bool]:
    """Whether the draft's greedy guess at each token of ``output``, the target's greedy
    output to ``prompt`` (``greedy_output``), is that token."""
    if not output:
        return []
    vocabulary = draft.vocabulary or WholeVocabulary(draft.model)
    read = prompt + output[:-1]
    guessed = vocabulary.guesses(make_prompt_cache(draft.model), mx.array(read, mx.uint32))
    return (guessed[len(prompt) - 1:] == mx.array(output, mx.uint32)).tolist()


def runs_of(matches: Sequence[bool]) -> list[int]:
    """From each token, how many guesses in a row are right (a run cut by the text's end
    counts as far as it went): what a greedy round of a draft model drafting there
    keeps, as deep as it drafts."""
    runs, run = [], 0
    for right in reversed(matches):
        run = run + 1 if right else 0
        runs.append(run)
    return runs[::-1]


def mtp_runs(mtp: MtpModel, prompt: list[int], output: list[int],
             depth: int = MAX_MTP_DEPTH) -> list[int]:
    """From each token of ``output``, the greedy output of the head's model to ``prompt``
    (``greedy_output``), how many drafts a
    greedy round of the MTP head drafting there keeps, up to ``depth``: its first draft
    from the target's hidden state behind the token before and that token, each next
    one chained on the head's own hidden state and the token before, as ``MtpDrafter``
    drafts (the first token has none: the head drafts from a verified position). Every
    position at once: the trunk reads the prompt and the output in one pass, and the
    head, whose every position attends only to itself, runs ``depth`` passes over all
    of them."""
    if len(output) < 2:
        return [0] * len(output)
    sequence = mx.array(prompt + output, mx.uint32)
    start, n = len(prompt), len(output)
    model = mtp.model.model
    _, hidden = forward_hidden(model, make_prompt_cache(model), sequence[:-1])
    # Row p - 1 drafts from output token p (p = 1 .. n - 1): the hidden state behind
    # token p - 1 and token p - 1 itself; its j-th draft is right when it is token
    # p + j - 1.
    state = hidden[start - 1:start + n - 2][:, None, :]
    rows = mx.arange(1, n)
    alive = mx.ones((n - 1,), mx.bool_)
    runs = mx.zeros((n - 1,), mx.int32)
    for j in range(1, depth + 1):
        # Past the output's end a row is no longer alive: its indices are held inside
        # (mlx does not check them).
        fed = sequence[start + mx.minimum(rows + j - 2, n - 1)]
        state, logprobs = mtp.head(state, fed[:, None])
        at = rows + j - 1  # the output token this draft guesses
        right = (mx.argmax(logprobs, axis=-1) == sequence[start + mx.minimum(at, n - 1)]) \
            & (at < n)
        alive = alive & right
        runs = runs + alive
    return [0] + runs.tolist()


def survival_of_runs(texts: Sequence[Sequence[int]], most: int) -> tuple[float, ...]:
    """``s_i`` for i = 1..``most``: the share of tokens, over ``texts`` (each token's
    run: what a round drafting there keeps), whose run reaches i."""
    runs = [run for text in texts for run in text]
    if not runs:
        return ()
    return tuple(sum(r >= i for r in runs) / len(runs) for i in range(1, most + 1))


def survival_of_guesses(texts: Sequence[Sequence[bool]],
                        most: int = MAX_DRAFT_TOKENS) -> tuple[float, ...]:
    """``s_i`` for i = 1..``most``: the share of tokens, over ``texts``, from which the
    next i guesses are all right (a run cut by a text's end counts as far as it went)."""
    return survival_of_runs([runs_of(matches) for matches in texts], most)
