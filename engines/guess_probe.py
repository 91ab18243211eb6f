"""How far a draft model's greedy guesses run on ordinary text: part of ``specdeck
calibrate``.

The target decodes a few of specdeck's built-in prompts greedily (``GUESS_PROMPTS``,
``GUESS_TOKENS`` each, as a run encodes them: in the chat template where the tokenizer
has one); the draft then reads each prompt and that output in one pass, and its greedy
guess at every output token is right or not. From every output token, a round drafting
there at temperature 0 would keep the run of right guesses that starts there, so the
share of tokens whose run reaches i is the survival at position i of a typical round
(``Calibration.guess_survival``). ``auto`` reads from it whether drafts past one pay on
such text (``engines.draft_length``); ``calibrate`` prints it.
"""

from __future__ import annotations

from typing import Sequence

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from specdeck.engines.calibration import GUESS_TOKENS
from specdeck.engines.config import MAX_DRAFT_TOKENS, DecodeSettings
from specdeck.engines.draft_vocab import WholeVocabulary
from specdeck.engines.events import Round
from specdeck.engines.loading import LoadedModel
from specdeck.engines.strategies import Models, run_strategy


def guesses_right(target: LoadedModel, draft: LoadedModel, prompt: list[int],
                  tokens: int = GUESS_TOKENS) -> list[bool]:
    """Whether the draft's greedy guess at each token of the target's greedy output to
    ``prompt`` is that token."""
    settings = DecodeSettings(max_tokens=tokens, num_draft_tokens=0, stop_at_eos=False)
    output = [t for event in run_strategy("plain", Models(target), prompt, settings)
              if isinstance(event, Round) for t in event.tokens]
    if not output:
        return []
    vocabulary = draft.vocabulary or WholeVocabulary(draft.model)
    read = prompt + output[:-1]
    guessed = vocabulary.guesses(make_prompt_cache(draft.model), mx.array(read, mx.uint32))
    return (guessed[len(prompt) - 1:] == mx.array(output, mx.uint32)).tolist()


def survival_of_guesses(texts: Sequence[Sequence[bool]],
                        most: int = MAX_DRAFT_TOKENS) -> tuple[float, ...]:
    """``s_i`` for i = 1..``most``: the share of tokens, over ``texts``, from which the
    next i guesses are all right (a run cut by a text's end counts as far as it went)."""
    runs: list[int] = []
    for matches in texts:
        run = 0
        for right in reversed(matches):  # the run from each token, from the end back
            run = run + 1 if right else 0
            runs.append(run)
    if not runs:
        return ()
    return tuple(sum(r >= i for r in runs) / len(runs) for i in range(1, most + 1))
