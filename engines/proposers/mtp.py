"""MTP self-speculation (the ``mtp`` strategy): a model's own multi-token-prediction head
drafts ``depth`` tokens per cycle and the same model verifies them.

A Qwen3.5/3.6 MTP head is one decoder block on top of the trunk. From the trunk's final
hidden state at position t and the token at t+1 it computes a hidden state that predicts
t+2 through the trunk's own output layer; chained on its own output it drafts further.
Here the head drafts as a proposer of the shared speculative loop, which hands it the
verify pass's hidden states, so every cycle is a Round like any other strategy's, with
the rejected drafts, their probabilities and the correction or bonus token.

Why the head is loaded through mlx-optiq and driven here:

- Loading is what optiq is good at: it finds the head (``mtp.*`` tensors inside the
  checkpoint, or its sidecar ``optiq/mtp.safetensors`` / ``mlx_lm_extra_tensors``) and
  finalises it (dequantises, keeps pre-quantized layouts, splits fused experts, shifts
  zero-centred norms, refuses missing or misshapen tensors). ``inject_mtp_support`` is
  its one entry point for all of that; it attaches the head to the object it is given by
  swapping that object's class. We give it a throwaway holder, never the model, so the
  target stays a stock mlx-lm model that plain and draft decoding share unchanged, and
  two MTP runs (or two models) never share anything but read-only weights.
- Driving is ours: optiq's own loop reports only ``from_draft`` per token, while a Round
  needs the drafted ids, their probabilities and the rejected ones. The head step below
  is the architecture's definition, a few lines on optiq's loaded block.
- optiq is imported only when a head is loaded. That import patches some mlx / mlx-lm
  functions process-wide (``nn.quantize`` chunked, tool-parser inference on tokenizer
  load); nothing here relies on those patches, and they change no decoding result.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence, TYPE_CHECKING

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.qwen3_5 import TextModelArgs

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.decode.shared import Clock, log_probs, split_at_output
from specdeck.engines.auto.length import draft_length
from specdeck.engines.core.errors import ModelError
from specdeck.engines.core.events import Event
from specdeck.engines.models.loading import LoadedModel, prefer_fast_dtype
from specdeck.engines.decode.sampling import KeyStream, choose, no_drafts, sampling_logprobs
from specdeck.engines.decode.speculative import run_speculative

if TYPE_CHECKING:  # run.py imports this module when it runs a strategy
    from specdeck.engines.decode.run import Models


class MtpHead:
    """A Qwen3.5/3.6 MTP block bound to the trunk it was trained on.

    Stateless: it keeps no cache (each draft step attends only to its own position, as
    in optiq's engine), so one head serves any number of runs.
    """

    def __init__(self, block: nn.Module, model: nn.Module) -> None:
        self.block = block
        _, self.output = split_at_output(model)
        self.embed = model.language_model.model.embed_tokens

    def __call__(self, hidden: mx.array, token: mx.array) -> tuple[mx.array, mx.array]:
        """From a hidden state (B, 1, H) at position t and the token (B, 1) at t+1: the
        head's own hidden state (chain it to draft further) and log-probs (B, V) for t+2.
        B = 1 as a round drafts; more to judge many positions at once, as each attends
        only to itself (``engines.measure.guess_probe.mtp_runs``)."""
        b = self.block
        embedded = b.pre_fc_norm_embedding(self.embed(token))
        x = b.fc(mx.concatenate([embedded, b.pre_fc_norm_hidden(hidden)], axis=-1))
        out = b.norm(b.layers[0](x, mask=None, cache=None))
        return out, log_probs(self.output(out).squeeze(1))


@dataclass
class MtpModel:
    """A model together with its MTP head: it drafts and verifies its own tokens."""

    model: LoadedModel
    head: MtpHead


class _HeadHolder(nn.Module):
    """What optiq attaches the head to (and whose class it swaps) instead of the model."""

    def __init__(self, args: TextModelArgs) -> None:
        super().__init__()
        self.args = args


def _no_head(model: LoadedModel, why: str) -> ModelError:
    return ModelError(
        f"{model.name} has no MTP head to draft with: {why}. The mtp strategy needs a "
        "Qwen3.5/3.6 checkpoint that kept its head (mtp.* weights in the checkpoint or "
        "optiq/mtp.safetensors); name one with --mtp-model, or use the draft or ngram "
        "strategy"
    )


def load_mtp(model: LoadedModel) -> MtpModel:
    """Find and load ``model``'s MTP head; ModelError when it has none usable."""
    text = getattr(model.model, "language_model", None)
    if not isinstance(getattr(text, "args", None), TextModelArgs):
        kind = model.config.get("model_type", "unknown")
        raise _no_head(model, f"it is a {kind} model, and MTP drafting supports Qwen3.5/3.6")
    from optiq.runtime.mtp.mtp_patch import MTPContract, inject_mtp_support

    holder = _HeadHolder(text.args)
    log = logging.getLogger(inject_mtp_support.__module__)
    level = log.level
    log.setLevel(logging.ERROR)  # its "weights not found" warning becomes our message
    try:
        contract = MTPContract().with_config_defaults(model.config)
        found = inject_mtp_support(holder, model.path, model.config, contract)
    except (ValueError, RuntimeError, OSError) as exc:  # a broken or misshapen head
        raise ModelError(f"cannot load the MTP head of {model.name}: {exc}") from exc
    finally:
        log.setLevel(level)
    if not found:
        raise _no_head(
            model, "its config declares no MTP layers or its files hold no mtp.* weights"
        )
    prefer_fast_dtype(holder.mtp)  # as the trunk: half precision is slow on the CPU
    return MtpModel(model, MtpHead(holder.mtp, model.model))


class MtpDrafter:
    """Proposals from the head, chained ``count`` deep from the last verified position.

    The first cycle has nothing to draft from (no verified hidden state yet): it
    proposes nothing, and the target alone picks the first token.
    """

    wants_hidden = True
    guesser = None

    def __init__(self, head: MtpHead, settings: DecodeSettings, keys: KeyStream) -> None:
        self.head = head
        self.sampling = settings.sampling
        self.keys = keys
        # The verify pass's hidden states and the row the next drafts chain from, cut
        # only when a round drafts: a slice is an operation to build, and most of
        # ``auto``'s rounds draft nothing.
        self.hidden: mx.array | None = None
        self.row = 0
        self.token = 0

    def drafter(self) -> str:
        return "mtp"

    def companions(self) -> list[tuple[Any, Sequence[Any]]]:
        return []

    def begin(self, prompt: list[int], rest: mx.array) -> None:
        self.hidden = None

    def may_draft(self, counts: Mapping[str, int]) -> bool:
        return counts[self.drafter()] > 0

    def propose(self, count: int, p_min: float | None = None
                ) -> tuple[mx.array, mx.array | None, float | None]:
        if self.hidden is None or not count:
            return no_drafts(), None, None
        hidden = self.hidden[None, self.row : self.row + 1]
        token = mx.array([[self.token]], mx.uint32)
        drafts, lps = [], []
        for _ in range(count):
            hidden, lp = self.head(hidden, token)
            lp = sampling_logprobs(lp, self.sampling)
            if p_min is not None and (top := mx.exp(lp.max()).item()) < p_min:
                if not drafts:  # ``pmin``: the head is unsure of its first draft
                    return no_drafts(), None, top
                return mx.concatenate(drafts), mx.concatenate(lps), top
            draft = choose(lp, self.sampling, self.keys)
            mx.async_eval(draft)
            drafts.append(draft)
            lps.append(lp)
            token = draft[None]
        return mx.concatenate(drafts), mx.concatenate(lps), None

    def settle(
        self, drafts: list[int], accepted: int, token: int, hidden: mx.array | None
    ) -> None:
        self.hidden, self.row, self.token = hidden, accepted, token


def run(
    models: Models,
    prompt: list[int],
    settings: DecodeSettings,
    clock: Clock = time.perf_counter,
) -> Iterator[Event]:
    """MTP self-speculation, ``mtp_depth`` drafts per cycle (or ``auto``, starting from
    the machine's calibration of the model whose head drafts, when there is one)."""
    keys = KeyStream(settings.sampling.seed)
    mtp = models.mtp
    drafter = MtpDrafter(mtp.head, settings, keys)
    lengths = {"mtp": draft_length(settings, "mtp", models.mtp_calibration())}
    return run_speculative(mtp.model, drafter, prompt, settings, lengths, keys, clock)
