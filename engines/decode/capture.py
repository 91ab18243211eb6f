"""A verify pass that keeps every position's recurrent state (Qwen3.5/3.6 hybrids).

A gated delta net layer cannot forget a token: rewinding it to the last accepted draft
otherwise means restoring its state from before the verify pass and feeding the kept
tokens again (``rollback.Rewind.REPLAY``), a second target pass in most rounds. mlx-optiq's
``forward_with_gdn_capture`` runs the pass keeping each position's convolution and
recurrent state, and ``commit_captured_prefix`` sets every such layer to the state after
the last kept token and trims the attention layers: no second pass. Its stock (non-Metal)
path steps the recurrence one position at a time, as mlx-lm's own CPU path does, so the
logits are those of the ordinary pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import mlx.core as mx

from specdeck.engines.decode.shared import log_probs


def is_split(model: Any) -> bool:
    """Whether ``model`` runs split over a group (``engines.distributed``): its layers
    then need collectives that only the model's own forward pass makes."""
    text = getattr(model, "language_model", model)
    inner = getattr(text, "model", None)
    if getattr(inner, "pipeline_size", 1) > 1 or getattr(text, "sharding_group", None):
        return True
    return any(getattr(getattr(layer, "linear_attn", None), "sharding_group", None)
               is not None for layer in getattr(inner, "layers", None) or [])


def supports_capture(model: Any) -> bool:
    """Whether ``model`` has the Qwen3.5/3.6 hybrid layout the capture pass knows.

    Never on a split model: mlx-optiq's capture pass runs the layers itself, without
    the collectives, so it would keep no state for a tensor-split gated delta net
    layer, read a slice of the vocabulary, and skip a pipeline's hops. A split hybrid
    target checkpoints and replays instead (``Rewind.REPLAY``: exact, one more pass).
    """
    text = getattr(model, "language_model", model)
    inner = getattr(text, "model", None)
    layers = getattr(inner, "layers", None) or []
    return (
        not is_split(model)
        and hasattr(inner, "fa_idx") and hasattr(inner, "ssm_idx")
        and any(getattr(layer, "is_linear", False) for layer in layers)
        and all(hasattr(layer, "linear_attn" if layer.is_linear else "self_attn")
                for layer in layers)
    )


@dataclass(slots=True)
class CapturedPass:
    """Log-probabilities (S, V) after each fed token, the final hidden states (S, H)
    when asked for, and the per-position states to commit a prefix from."""

    logprobs: mx.array
    hidden: mx.array | None
    captures: dict[int, dict[str, mx.array]]


def forward_captured(model: Any, cache: Sequence[Any], tokens: mx.array,
                     want_hidden: bool) -> CapturedPass:
    """``decoding.forward`` (or ``forward_hidden``) for a hybrid target, keeping states."""
    from optiq.runtime.mtp.gdn_capture import forward_with_gdn_capture

    out = forward_with_gdn_capture(model, tokens[None], cache, return_hidden=want_hidden,
                                   capture_backend=None)  # stock path: CPU and Metal
    logits, hidden, captures = out if want_hidden else (out[0], None, out[1])
    return CapturedPass(log_probs(logits.squeeze(0)),
                        hidden.squeeze(0) if hidden is not None else None,
                        captures)


def commit_prefix(cache: Sequence[Any], captured: CapturedPass, keep: int, fed: int) -> None:
    """Leave ``cache`` as if only the first ``keep`` of the ``fed`` tokens were seen."""
    from optiq.runtime.mtp.gdn_capture import commit_captured_prefix

    if not commit_captured_prefix(list(cache), captured.captures, keep, fed):
        raise ValueError(f"cannot keep {keep} of {fed} verified tokens")
