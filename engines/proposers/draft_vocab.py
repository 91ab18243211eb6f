"""A draft model that proposes only its vocabulary's most frequent tokens.

A small draft sharing a large vocabulary spends most of each step in its output layer
(smollm2's two-layer draft: 28M of its 37M multiply-adds go to 49,152 rows of 576). As
FR-Spec (Zhao et al., 2025) does, a draft folder may list the tokens it drafts from
(``DRAFT_VOCAB_FILE``, the most frequent ones of the text it was trained on); each draft
step then runs the output layer on those rows only. Its sampling log-probs are widened
back to the whole vocabulary with every other token impossible (q = 0), so the verify
rule is unchanged and speculation stays lossless: a token the draft cannot propose is
simply one it never guesses.

The file's format and checks: ``engines.draft_vocab_file``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import mlx.core as mx
import mlx.nn as nn

from specdeck.engines.decode.shared import log_probs, output_layer, split_at_output
from specdeck.engines.models.draft_vocab_file import read_listed_tokens


def read_draft_vocab(folder: Path, vocab_size: int) -> mx.array | None:
    """The token ids ``folder``'s ``DRAFT_VOCAB_FILE`` lists (sorted), None without one;
    ModelError naming the file and the fix when it is not a valid list."""
    tokens = read_listed_tokens(folder, vocab_size)
    return None if tokens is None else mx.array(tokens, mx.uint32)


class WholeVocabulary:
    """A draft step over the whole vocabulary: logits, log-probs and greedy guesses from
    one pass of the model."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def logits(self, cache: Sequence[Any], tokens: mx.array, last: bool = False) -> mx.array:
        """The logits (S, rows) after each of ``tokens`` (only the last: (1, rows)),
        advancing ``cache``."""
        # squeeze, not [0]: mlx indexes with a gather, a copy and a task of its own
        logits = self.model(tokens[None], cache=cache).squeeze(0)
        return logits[-1:] if last else logits

    def step(self, cache: Sequence[Any], tokens: mx.array) -> mx.array:
        """Log-probabilities over the rows (1, rows) after the last of ``tokens``."""
        return log_probs(self.logits(cache, tokens, last=True))

    def guesses(self, cache: Sequence[Any], tokens: mx.array) -> mx.array:
        """The greedy guess (a token id) after each of ``tokens``, feeding them all."""
        return self.pick(mx.argmax(self.logits(cache, tokens), -1))

    def pick(self, rows: mx.array) -> mx.array:
        """The token ids of rows chosen from ``step``'s log-probs."""
        return rows

    def widen(self, logprobs: mx.array) -> mx.array:
        """Log-probs over the rows as over the whole vocabulary (1, V)."""
        return logprobs


class DraftVocabulary(WholeVocabulary):
    """The output layer of a draft model cut down to ``tokens``: a step's logits over
    those rows, and the way back to whole-vocabulary ids and log-probs."""

    def __init__(self, model: nn.Module, tokens: mx.array) -> None:
        super().__init__(model)
        layer = output_layer(model)
        self.trunk = split_at_output(model)[0]
        self.tokens = tokens
        self.size = int(layer.weight.shape[0])
        if isinstance(layer, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            biases = getattr(layer, "biases", None)
            rows = mx.dequantize(layer.weight[tokens], layer.scales[tokens],
                                 None if biases is None else biases[tokens],
                                 layer.group_size, layer.bits,
                                 mode=getattr(layer, "mode", "affine"))
        else:
            rows = layer.weight[tokens]
        self.rows = rows.T
        self.bias = layer.bias[tokens] if "bias" in layer else None
        mx.eval(self.rows, *([self.bias] if self.bias is not None else []))

    def logits(self, cache: Sequence[Any], tokens: mx.array, last: bool = False) -> mx.array:
        """The cut-down output layer, over the listed rows: with ``last``, of the last
        hidden state only (a catch-up of many tokens runs the output layer once)."""
        hidden = self.trunk(tokens[None], cache=cache).squeeze(0)
        logits = (hidden[-1:] if last else hidden) @ self.rows
        return logits if self.bias is None else logits + self.bias

    def pick(self, rows: mx.array) -> mx.array:
        return self.tokens[rows]

    def widen(self, logprobs: mx.array) -> mx.array:
        """-inf for every token the draft cannot propose."""
        whole = mx.full((logprobs.shape[0], self.size), -mx.inf, logprobs.dtype)
        whole[:, self.tokens] = logprobs
        return whole


def draft_vocabulary(model: nn.Module, folder: Path) -> DraftVocabulary | None:
    """The cut-down output layer of a model whose ``folder`` lists the tokens it drafts
    from; None for one that drafts from its whole vocabulary."""
    tokens = read_draft_vocab(folder, int(output_layer(model).weight.shape[0]))
    return None if tokens is None else DraftVocabulary(model, tokens)
