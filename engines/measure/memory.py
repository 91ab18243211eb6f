"""How much memory a strategy will hold at its peak, before any weights are loaded.

Built from the files (``engines.catalog``) and the run's settings, term by term, each the
bytes mlx really allocates:

- weights of every model the comparison keeps loaded (a ``ModelStore`` holds them all
  while each strategy runs), half precision counted as float32 on the CPU backend
  (``loading.prefer_fast_dtype``);
- the target's KV cache: mlx-lm's ``KVCache`` allocates in 256-token steps and, when it
  grows, joins a fresh zeroed step onto each attention layer (that step is counted too);
  a ``RotatingKVCache`` (``max_kv_size``) stops at its window;
- recurrent state (``ArraysCache`` of gated delta net layers: conv state and a float32
  state matrix per layer) and what exact rollback holds on to: a Qwen3.5/3.6 target's
  verify pass keeps one state per position it feeds (``engines.capture``), another
  hybrid target keeps the state from before the pass; one per draft step for a hybrid
  draft; a copy of a wrapped rotating window;
- the draft model's own cache, and the MTP head (dequantised by mlx-optiq);
- the largest forward pass's transients: a prefill chunk or a verify pass (hidden
  states, MLP intermediates, float32 attention scores, and float32 log-probabilities
  when the output layer runs).

A target split over a group (``engines.distributed``) is estimated per rank
(``Split``): each process holds its share of the target's weights, KV cache and
recurrent state, and all of everything else (draft, MTP head, activations, which are
counted whole: an upper bound).

``check_headroom`` compares the largest estimate with the machine's free memory, and
refuses one beyond all of its memory (a run that could only thrash) unless forced.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from specdeck.engines.models.catalog import CAPTURE_TYPES, ModelInfo
from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.errors import ModelError
from specdeck.engines.core.formatting import byte_size
from specdeck.engines.measure.machine import memory_bytes
from specdeck.engines.core.strategies import strategy_of

#: mlx-lm's ``KVCache.step``: caches grow by this many positions at a time.
KV_STEP = 256
#: Share of the free memory a run may use before it counts as short of headroom (the
#: rest is left to the OS, the app and other processes).
USABLE_SHARE = 0.9


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Bytes one strategy is expected to hold at its peak, by what holds them."""

    strategy: str
    #: Weights of the model the strategy decodes with (for mtp: the MTP model's trunk),
    #: of its draft model, of its MTP head, and of the models (and heads) loaded for
    #: the comparison's other strategies, which stay resident while this one runs.
    weights: int
    draft_weights: int
    mtp_head: int
    other_models: int
    kv_cache: int
    recurrent_state: int
    rollback_snapshot: int
    draft_cache: int
    activations: int

    @property
    def total(self) -> int:
        return (self.weights + self.draft_weights + self.mtp_head + self.other_models
                + self.kv_cache
                + self.recurrent_state + self.rollback_snapshot + self.draft_cache
                + self.activations)

    def to_dict(self) -> dict:
        return {**asdict(self), "total": self.total}


@dataclass(frozen=True, slots=True)
class Split:
    """The target (the model in ``path``) split over ``ranks`` processes, ``shard``-wise
    (``tensor``: every layer's heads and matrices; ``pipeline``: whole layers)."""

    path: Path
    ranks: int
    shard: str

    def state_share(self, info: ModelInfo) -> float:
        """Share of the KV cache and recurrent state one rank holds (the largest)."""
        t = info.text_config
        if self.shard == "pipeline":
            layers = max(int(t.get("num_hidden_layers") or 1), 1)
            return math.ceil(layers / self.ranks) / layers
        kv_heads = int(t.get("num_key_value_heads") or t.get("num_attention_heads") or 1)
        # mlx-lm repeats key/value heads when there are fewer than ranks: one per rank.
        return max(1, kv_heads // self.ranks) / kv_heads

    def weight_bytes(self, info: ModelInfo, upcast: bool) -> int:
        """Bytes of the target's weights one rank holds: its share of the layers' and
        the embedding and output matrices whole (llama's mlx-lm keeps them whole)."""
        total = weight_bytes(info, upcast)
        t = info.text_config
        params = info.parameters or 0
        vocab = int(info.vocab_size or t.get("vocab_size") or 0) * int(t.get("hidden_size") or 0)
        vocab *= 1 if t.get("tie_word_embeddings", True) else 2
        whole = min(total, total * vocab // params) if params else 0
        if self.shard == "pipeline":
            return whole + math.ceil((total - whole) * self.state_share(info))
        return whole + math.ceil((total - whole) / self.ranks)


def cpu_backend() -> bool:
    """Whether mlx runs on the CPU here (where half precision is upcast)."""
    import mlx.core as mx

    return mx.default_device().type == mx.DeviceType.cpu


def float_bytes(info: ModelInfo, upcast: bool) -> int:
    """Bytes of one float ``info`` computes in once loaded: float32 when upcast (the CPU
    backend) or stored so, else half precision."""
    return 4 if upcast or info.dtype in (None, "F32") else 2


def weight_bytes(info: ModelInfo, upcast: bool) -> int:
    """Bytes of ``info``'s weights once loaded (half precision doubled when upcast),
    with the output-layer rows of the tokens its folder lists to draft from, which
    loading copies (dequantised) out of that layer (``engines.draft_vocab``)."""
    rows = info.listed_tokens * int(info.text_config.get("hidden_size") or 0)
    return (info.weight_bytes + (info.half_weight_bytes if upcast else 0)
            + rows * float_bytes(info, upcast))


def mtp_head_bytes(info: ModelInfo, upcast: bool) -> int:
    """Bytes of the MTP head once loaded: mlx-optiq dequantises it to the model's float
    dtype, and the CPU backend casts half precision to float32 (an upper bound for a
    sidecar optiq keeps quantized)."""
    return info.mtp_parameters * float_bytes(info, upcast)


@dataclass(frozen=True, slots=True)
class _Shape:
    """The sizes of a model that its caches and activations depend on."""

    hidden: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    full_layers: int
    sliding_layers: int
    sliding_window: int | None
    recurrent_layers: int
    #: Bytes of one recurrent layer's state (conv state + state matrix).
    recurrent_bytes: int
    #: Bytes per element of activations and KV entries.
    element: int


def _shape(info: ModelInfo, upcast: bool) -> _Shape:
    t = info.text_config
    layers = int(t.get("num_hidden_layers", 0))
    heads = int(t.get("num_attention_heads", 1))
    hidden = int(t.get("hidden_size", 0))
    head_dim = int(t.get("head_dim") or (hidden // heads if heads else 0))
    element = float_bytes(info, upcast)
    kinds = list(t.get("layer_types") or [])
    interval = t.get("full_attention_interval")
    if kinds:
        full = sum(k in ("full_attention", "attention") for k in kinds)
        sliding = sum(k == "sliding_attention" for k in kinds)
    elif interval and info.hybrid:
        full, sliding = layers // int(interval), 0
    elif info.hybrid:
        full, sliding = 0, 0
    else:
        full, sliding = layers, 0
    recurrent = layers - full - sliding if info.hybrid else 0
    key_dim = int(t.get("linear_num_key_heads", 0)) * int(t.get("linear_key_head_dim", 0))
    value_heads = int(t.get("linear_num_value_heads", 0))
    value_head_dim = int(t.get("linear_value_head_dim", 0))
    conv = (int(t.get("linear_conv_kernel_dim", 4)) - 1) * (2 * key_dim + value_heads * value_head_dim)
    state = value_heads * value_head_dim * int(t.get("linear_key_head_dim", 0)) * 4
    intermediate = int(t.get("intermediate_size") or 0)
    if t.get("num_experts_per_tok") and t.get("moe_intermediate_size"):
        intermediate = int(t["moe_intermediate_size"]) * int(t["num_experts_per_tok"])
    return _Shape(
        hidden=hidden, intermediate=intermediate,
        vocab=int(info.vocab_size or t.get("vocab_size") or 0), heads=heads,
        kv_heads=int(t.get("num_key_value_heads") or heads), head_dim=head_dim,
        full_layers=full, sliding_layers=sliding,
        sliding_window=t.get("sliding_window"), recurrent_layers=recurrent,
        recurrent_bytes=conv * element + state, element=element,
    )


def _slots(tokens: int, window: int | None) -> int:
    """Positions a KV cache has allocated after ``tokens`` (whole 256-token steps)."""
    steps = -(-tokens // KV_STEP) * KV_STEP
    return steps if window is None else min(steps, window)


def kv_cache_bytes(shape: _Shape, tokens: int, max_kv_size: int | None) -> int:
    """Keys and values of every attention layer, plus the zeroed step a growth joins on."""
    per_position = 2 * shape.kv_heads * shape.head_dim * shape.element
    windows = [(shape.full_layers, max_kv_size), (shape.sliding_layers, shape.sliding_window)]
    total = 0
    for count, window in windows:
        if not count:
            continue
        slots = _slots(tokens, window)
        grows = tokens > KV_STEP and (window is None or window > KV_STEP)
        total += count * (slots + (KV_STEP if grows else 0)) * per_position
    return total


def forward_bytes(shape: _Shape, new: int, context: int, output: bool) -> int:
    """Transients of one forward pass of ``new`` tokens over ``context`` positions: hidden
    states and MLP intermediates of a layer, its float32 attention scores, and the
    float32 log-probabilities (logits, normalised, sampled from) when ``output``."""
    layer = new * (4 * shape.hidden + 2 * shape.intermediate) * shape.element
    scores = shape.heads * new * context * 4
    logits = 3 * new * shape.vocab * 4 if output else 0
    return layer + scores + logits


def _model_bytes(info: ModelInfo, upcast: bool, tokens: int, settings: DecodeSettings,
                 prompt_tokens: int, verify: int) -> tuple[int, int, int]:
    """(KV cache, recurrent state, activations) of one model decoding ``tokens``."""
    shape = _shape(info, upcast)
    kv = kv_cache_bytes(shape, tokens, settings.max_kv_size)
    chunk = min(settings.prefill_step_size, max(prompt_tokens - 1, 1))
    activations = max(
        forward_bytes(shape, chunk, min(prompt_tokens, tokens), output=False),
        forward_bytes(shape, verify, tokens, output=True),
    )
    return kv, shape.recurrent_layers * shape.recurrent_bytes, activations


def estimate(
    strategy: str,
    model: ModelInfo,
    settings: DecodeSettings,
    prompt_tokens: int,
    *,
    draft: ModelInfo | None = None,
    other_models: int = 0,
    upcast: bool = False,
    split: Split | None = None,
) -> MemoryEstimate:
    """The peak memory of ``strategy`` decoding with ``model`` (the target; for mtp the
    model whose head drafts), ``draft`` drafting for the draft strategy.

    ``other_models``: bytes of the models the comparison loaded for its other strategies.
    ``upcast``: half precision becomes float32 (the CPU backend). ``split``: ``model`` is
    split over a group when it is the split one: one rank's share.
    """
    kind, settings = strategy_of(strategy), settings.for_pane(strategy)
    drafts = settings.max_drafts(kind.name)  # the pane's settings already
    tokens = prompt_tokens + settings.max_tokens + drafts
    kv, recurrent, activations = _model_bytes(
        model, upcast, tokens, settings, prompt_tokens, drafts + 1
    )
    split = split if split is not None and split.path == model.path else None
    if split is not None:
        share = split.state_share(model)
        kv, recurrent = math.ceil(kv * share), math.ceil(recurrent * share)
    snapshot = 0
    if drafts:
        # Each fed position's state (capture), or the state before the pass (restore:
        # also on a split target, which cannot capture; ``engines.capture``).
        captures = model.model_type in CAPTURE_TYPES and split is None
        snapshot = recurrent * (drafts + 1 if captures else 1)
        window = settings.max_kv_size
        if window is not None and tokens > window:
            snapshot += kv  # a wrapped window is copied before it is written
    with_draft = draft is not None and kind.uses_draft(True)
    # A model that drafts for itself is loaded once (``ModelStore``): its weights count once.
    if draft is not None and draft.path.resolve() == model.path.resolve():
        draft_weights = 0
    else:
        draft_weights = weight_bytes(draft, upcast) if with_draft else 0
    draft_cache = 0
    if with_draft:
        d_kv, d_recurrent, d_act = _model_bytes(
            draft, upcast, tokens, settings, prompt_tokens, 2
        )
        # A hybrid draft is checkpointed before each of its k steps.
        draft_cache = d_kv + d_recurrent * (1 + settings.max_drafts("draft"))
        activations = max(activations, d_act)
    return MemoryEstimate(
        strategy=strategy,
        weights=split.weight_bytes(model, upcast) if split else weight_bytes(model, upcast),
        draft_weights=draft_weights,
        mtp_head=mtp_head_bytes(model, upcast) if _drafts_with_head(strategy, draft) else 0,
        other_models=other_models,
        kv_cache=kv,
        recurrent_state=recurrent,
        rollback_snapshot=snapshot,
        draft_cache=draft_cache,
        activations=activations,
    )


def _drafts_with_head(strategy: str, draft: ModelInfo | None) -> bool:
    """Whether ``strategy`` drafts with an MTP head: mtp, and chain with no draft model."""
    return strategy_of(strategy).uses_mtp(draft is not None)


def estimate_comparison(
    strategies: list[str],
    target: ModelInfo,
    settings: DecodeSettings,
    prompt_tokens: int,
    *,
    draft: ModelInfo | None = None,
    mtp: ModelInfo | None = None,
    upcast: bool = False,
    split: Split | None = None,
) -> dict[str, MemoryEstimate]:
    """Each strategy's estimate when they run one after another on models loaded once:
    ``draft`` for the draft strategy, ``mtp`` (possibly the target) for the mtp one;
    per rank under ``split`` (the target split over a group).

    ``prefer_fast_dtype``'s cast to float32 is lazy: a model loaded for a later strategy
    (and the MTP head) stays in its stored precision until a strategy first uses it.
    """
    mtp = mtp or target
    decodes = {"draft": [target, draft], "mtp": [mtp]}
    # Chain decodes as its fallback does (prompt lookup costs no memory of its own).
    decodes["chain"] = decodes["draft" if draft is not None else "mtp"]
    loaded: dict[Path, ModelInfo] = {}
    for strategy in strategies:
        loaded.update((i.path, i) for i in decodes.get(strategy_of(strategy).name, [target])
                      if i is not None)
    cast: set[Path] = set()
    out = {}
    for strategy in strategies:
        used = {i.path for i in decodes.get(strategy_of(strategy).name, [target])
                if i is not None}
        cast |= used
        others = sum(
            split.weight_bytes(info, upcast and path in cast)
            if split is not None and split.path == path
            else weight_bytes(info, upcast and path in cast)
            for path, info in loaded.items() if path not in used)
        heads = [s for s in strategies if _drafts_with_head(s, draft)]
        if heads and not _drafts_with_head(strategy, draft):
            head_cast = any(s in heads for s in strategies[: strategies.index(strategy)])
            others += mtp_head_bytes(mtp, upcast and head_cast)
        out[strategy] = estimate(
            strategy, mtp if _drafts_with_head(strategy, draft) else target, settings,
            prompt_tokens, draft=draft, other_models=others, upcast=upcast, split=split,
        )
    return out


def free_memory() -> int | None:
    """Bytes this machine can give a new allocation without swapping, or None if unknown.

    Linux: ``MemAvailable``. macOS: free, inactive, speculative and purgeable pages
    (``vm_stat``), which the OS hands out before it swaps.
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["vm_stat"], capture_output=True, text=True, timeout=2).stdout
            page = int(out.split("page size of ")[1].split()[0])
            counts = {}
            for line in out.splitlines()[1:]:
                key, _, value = line.partition(":")
                counts[key.strip()] = int(value.strip().rstrip(".") or 0)
            pages = sum(counts.get(f"Pages {k}", 0)
                        for k in ("free", "inactive", "speculative", "purgeable"))
            return pages * page
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def describe(e: MemoryEstimate) -> str:
    """The estimate's largest terms, for a message."""
    parts = [(v, k.replace("_", " ")) for k, v in e.to_dict().items()
             if isinstance(v, int) and k != "total" and v]
    return ", ".join(f"{name} {byte_size(v)}" for v, name in sorted(parts, reverse=True)[:4])


def check_headroom(
    estimates: list[MemoryEstimate], already_loaded: int = 0, strict: bool = False,
    free: int | None = None, force: bool = False, total: int | None = None,
) -> str | None:
    """A warning when the largest estimate does not fit in free memory (ModelError under
    ``strict``); None when it fits or free memory is unknown. An estimate beyond the
    machine's whole memory (a huge --max-tokens or prompt) is refused unless ``force``.

    ``already_loaded``: bytes of those weights already in memory (a model kept loaded
    from an earlier run needs no more room). ``free`` and ``total`` (physical memory):
    measured now when None.
    """
    if not estimates:
        return None
    worst = max(estimates, key=lambda e: e.total)
    needed = worst.total - already_loaded
    total = memory_bytes() if total is None else total
    if total and needed > total and not force:
        raise ModelError(
            f"{worst.strategy} would need about {byte_size(needed)} ({describe(worst)}), more than "
            f"this machine's {byte_size(total)} of memory: lower --max-tokens or shorten the "
            "prompt (--force runs it anyway)"
        )
    free = free_memory() if free is None else free
    if free is None:
        return None
    if needed <= free * USABLE_SHARE:
        return None
    message = (
        f"{worst.strategy} needs about {byte_size(needed)} more memory ({describe(worst)}) but only "
        f"{byte_size(free)} is free: the machine would swap and lose what speculation gains. "
        "Close other programs, lower --max-tokens, or choose smaller models"
    )
    if strict:
        raise ModelError(message + " (--strict refuses to run short of memory)")
    return message
