"""Tiny, offline, deterministic model fixtures for specdeck's tests.

Nothing here touches the network.  Everything is built from code and from the
small corpora embedded below:

* :func:`build_tokenizer` trains a byte-level BPE tokenizer (``tokenizers``)
  whose ``tokenizer.json`` makes mlx-lm choose its BPE streaming detokenizer.
* :func:`build_model` writes a complete mlx-lm model directory (``config.json``,
  ``model.safetensors``, tokenizer files) with seeded random float32 weights for
  the ``llama``, ``qwen3`` or ``qwen3_5`` (hybrid gated-delta-net + attention)
  architectures, using the classes mlx-lm itself resolves from the config.
* :func:`build_family` builds the whole set of targets / drafts the tests use.

Weights never depend on mlx's global random state: every tensor is drawn from
its own key derived from ``seed`` and the parameter name (constructing the mlx
modules still advances the global generator, so tests that sample must seed it
themselves).  Building twice gives byte-identical files.

This module imports no pytest so that scripts can use it too.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten

__all__ = [
    "EOS_TOKEN",
    "TOKENIZER_FILES",
    "ARCHS",
    "build_tokenizer",
    "build_model",
    "build_mtp_model",
    "build_family",
]

EOS_TOKEN = "<|endoftext|>"
"""End-of-sequence token; a special token in every tokenizer built here."""

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
"""Files :func:`build_tokenizer` writes (and :func:`build_model` copies)."""

ARCHS = ("llama", "qwen3", "qwen3_5")
"""Architectures :func:`build_model` knows."""

# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------

# Pinned, embedded corpora (stdlib sources change between Python versions, so
# they are not used: the vocabulary must be the same everywhere).
_CODE_CORPUS = '''\
def add(a, b):
    """Return the sum of a and b."""
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


class Counter:
    """Count things."""

    def __init__(self, start=0):
        self.value = start

    def increment(self, step=1):
        self.value += step
        return self.value

    def reset(self):
        self.value = 0


def read_lines(path):
    with open(path, "r", encoding="utf-8") as handle:
        for line in handle:
            yield line.rstrip("\\n")


def parse_pairs(text):
    result = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        result[key.strip()] = value.strip()
    return result


def merge_sorted(left, right):
    out = []
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    out.extend(left[i:])
    out.extend(right[j:])
    return out


def find(items, target):
    for index, item in enumerate(items):
        if item == target:
            return index
    return -1


import os
import sys
from typing import Dict, List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: tool PATH", file=sys.stderr)
        return 2
    for name in args:
        if os.path.exists(name):
            print(name, os.path.getsize(name))
        else:
            print("missing:", name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''

_PROSE_CORPUS = """\
The quick brown fox jumps over the lazy dog while the farmer watches from the
porch.  In the morning the village woke slowly: bakers lit their ovens, children
ran along the river, and the old clock in the square struck seven.  Nobody
remembered who had built the bridge, but everyone agreed that it was beautiful
in autumn, when the leaves turned red and gold and the water below was still.
Travellers stopped there to rest, to write letters home, and to ask the way to
the mountains.  The innkeeper always answered with a smile and a long story
about the winter of the great snow, when the roads were closed for a month and
the whole village shared bread, soup and songs around a single fire.
Mathematics, music and gardening were taught at the little school; the teacher
believed that patience was the most important lesson of all.
"""

# variant -> (corpus, vocab size, special tokens in id order)
_TOKENIZER_VARIANTS: dict[str, tuple[str, int, tuple[str, ...]]] = {
    # 1 special + 256 bytes + 63 merges: cheap statistics over the vocabulary.
    "main": (_CODE_CORPUS, 320, (EOS_TOKEN,)),
    # Other corpus, other size, and an extra special token first, so that
    # even the single-byte tokens have different ids than in "main".
    "other": (_PROSE_CORPUS, 336, ("<|pad|>", EOS_TOKEN)),
}


def build_tokenizer(out_dir: Path, variant: str = "main") -> Path:
    """Train a deterministic byte-level BPE tokenizer and save it in ``out_dir``.

    Args:
        out_dir: Directory to create (or reuse); ``tokenizer.json`` and
            ``tokenizer_config.json`` are written there.
        variant: ``"main"`` (vocabulary of 320: ``<|endoftext|>`` at id 0, the 256
            byte symbols, 63 merges learnt on embedded Python code) or ``"other"``
            (vocabulary of 336 learnt on English prose, ``<|pad|>`` at id 0 and
            ``<|endoftext|>`` at id 1), for mismatched-tokenizer tests.

    Returns:
        ``out_dir``, loadable with ``mlx_lm.utils.load_tokenizer(out_dir)``
        (which picks ``BPEStreamingDetokenizer``).  The eos token is
        :data:`EOS_TOKEN`; no BOS is added when encoding.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    try:
        corpus, vocab_size, special_tokens = _TOKENIZER_VARIANTS[variant]
    except KeyError:
        raise ValueError(
            f"unknown tokenizer variant {variant!r}; "
            f"expected one of {sorted(_TOKENIZER_VARIANTS)}"
        ) from None

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus.splitlines(keepends=True), trainer=trainer)
    if tokenizer.get_vocab_size() != vocab_size:  # pragma: no cover - sanity
        raise RuntimeError(
            f"trained vocabulary has {tokenizer.get_vocab_size()} entries, "
            f"expected {vocab_size}"
        )
    tokenizer.save(str(out_dir / "tokenizer.json"))

    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS_TOKEN,
        "bos_token": None,
        "unk_token": None,
        "pad_token": "<|pad|>" if "<|pad|>" in special_tokens else None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
    }
    (out_dir / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config, indent=2, sort_keys=True) + "\n",
        encoding="utf-8",
    )
    return out_dir


def _tokenizer_info(tokenizer_dir: Path) -> tuple[int, int, list[int]]:
    """(vocabulary size, eos id, special token ids) of a saved tokenizer."""
    data = json.loads((Path(tokenizer_dir) / "tokenizer.json").read_text("utf-8"))
    ids = set(data["model"]["vocab"].values())
    eos_id = None
    special = []
    for tok in data.get("added_tokens", []):
        ids.add(tok["id"])
        if tok.get("special"):
            special.append(tok["id"])
        if tok["content"] == EOS_TOKEN:
            eos_id = tok["id"]
    if eos_id is None:
        raise ValueError(f"{tokenizer_dir} has no {EOS_TOKEN} token")
    return max(ids) + 1, eos_id, sorted(special)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

# Parameters copied from ``share_embeddings_from`` (matched on the key suffix,
# so a llama target can feed a qwen3 draft; qwen3_5 keys have a prefix).
_SHARED_SUFFIXES = ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight")


def _config_for(
    arch: str,
    *,
    vocab_size: int,
    eos_token_id: int,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    intermediate_size: int,
    full_attention_interval: int,
    linear_num_key_heads: int,
    linear_num_value_heads: int,
    linear_head_dim: int,
    max_position_embeddings: int,
) -> dict[str, Any]:
    common: dict[str, Any] = {
        "model_type": arch,
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "intermediate_size": intermediate_size,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_kv_heads,
        "head_dim": head_dim,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "max_position_embeddings": max_position_embeddings,
        "tie_word_embeddings": False,
        "eos_token_id": eos_token_id,
        "torch_dtype": "float32",
    }
    if arch == "llama":
        return {
            **common,
            "architectures": ["LlamaForCausalLM"],
            "rope_theta": 10000.0,
            # transformers 5 spelling too (mlx-lm's llama reads the top level one).
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
            "attention_bias": False,
            "mlp_bias": False,
        }
    if arch == "qwen3":
        return {
            **common,
            "architectures": ["Qwen3ForCausalLM"],
            "rope_theta": 10000.0,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
            "attention_bias": False,
        }
    if arch == "qwen3_5":
        if full_attention_interval < 2:
            raise ValueError("qwen3_5 needs full_attention_interval >= 2 (hybrid)")
        if num_layers < full_attention_interval:
            raise ValueError(
                "qwen3_5 needs num_layers >= full_attention_interval so that "
                "it has at least one full attention layer"
            )
        # Flat config: mlx-lm's qwen3_5.ModelArgs.from_dict wraps it as text_config.
        return {
            **common,
            "architectures": ["Qwen3_5ForCausalLM"],
            "full_attention_interval": full_attention_interval,
            "linear_num_key_heads": linear_num_key_heads,
            "linear_num_value_heads": linear_num_value_heads,
            "linear_key_head_dim": linear_head_dim,
            "linear_value_head_dim": linear_head_dim,
            "linear_conv_kernel_dim": 4,
            "attention_bias": False,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
            },
        }
    raise ValueError(f"unknown arch {arch!r}; expected one of {ARCHS}")


def _init_weights(
    params: dict[str, mx.array], seed: int, embed_scale: float, logit_scale: float
) -> dict[str, mx.array]:
    """Fresh float32 weights, each from its own key (seed, parameter name)."""
    out: dict[str, mx.array] = {}
    for name, value in params.items():
        key = mx.random.key(((seed & 0xFFFFFFFF) << 32) | zlib.crc32(name.encode()))
        shape = value.shape
        if name.endswith("norm.weight") or name.endswith("dt_bias"):
            # Every norm (incl. the gated one) and dt_bias start at one.
            w = mx.ones(shape)
        elif name.endswith("A_log"):
            w = mx.log(mx.random.uniform(1.0, 16.0, shape, key=key))
        elif name.endswith("embed_tokens.weight"):
            w = mx.random.normal(shape, key=key) * (embed_scale / shape[-1] ** 0.5)
        elif len(shape) >= 2:
            # Linear (out, in) and depthwise conv1d (channels, kernel, 1).
            fan_in = 1
            for d in shape[1:]:
                fan_in *= d
            bound = fan_in**-0.5
            w = mx.random.uniform(-bound, bound, shape, key=key)
            if name.endswith("lm_head.weight"):
                w = w * logit_scale
        else:
            w = mx.random.uniform(-0.1, 0.1, shape, key=key)
        out[name] = w.astype(mx.float32)
    return out


def build_model(
    out_dir: Path,
    arch: str,
    *,
    seed: int,
    tokenizer_dir: Path,
    hidden_size: int = 48,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int | None = None,
    intermediate_size: int | None = None,
    embed_scale: float = 10.0,
    logit_scale: float = 4.0,
    share_embeddings_from: Path | None = None,
    full_attention_interval: int = 2,
    linear_num_key_heads: int = 2,
    linear_num_value_heads: int = 4,
    linear_head_dim: int = 16,
    max_position_embeddings: int = 4096,
    emit_special: bool = False,
) -> Path:
    """Write a random-weight mlx-lm model directory loadable by ``mlx_lm.load``.

    Args:
        out_dir: Directory to create; gets ``config.json``, ``model.safetensors``
            (float32, metadata ``{"format": "mlx"}``) and the tokenizer files.
        arch: ``"llama"``, ``"qwen3"`` or ``"qwen3_5"``.  ``qwen3_5`` is a
            hybrid: every ``full_attention_interval``-th layer is full
            attention, the others gated delta net, so its ``make_cache()``
            mixes ``ArraysCache`` and ``KVCache`` (not trimmable).
        seed: Seeds every weight (mlx's global random state is not used).
        tokenizer_dir: A directory made by :func:`build_tokenizer`; sets the
            vocabulary size and ``eos_token_id``.
        hidden_size, num_layers, num_heads, num_kv_heads, head_dim,
        intermediate_size: Transformer sizes (``head_dim`` defaults to
            ``hidden_size // num_heads``, ``intermediate_size`` to
            ``2 * hidden_size``).
        embed_scale: Embedding rows get norm ``≈ embed_scale``.  Big values
            make the residual stream (hence the next token) depend mostly on
            the current token, small values mostly on the layers/context.
            Random models with unit-scale embeddings tend to repeat one token.
        logit_scale: Multiplies ``lm_head``: sets how peaked the temperature-1
            distribution is without changing the greedy (argmax) output.
        share_embeddings_from: A model directory built here with the same
            tokenizer and ``hidden_size``; its embedding, ``lm_head`` and final
            norm are copied (draft models agree with their target often).
            ``embed_scale`` and ``logit_scale`` are then ignored.
        full_attention_interval, linear_num_key_heads, linear_num_value_heads,
        linear_head_dim: ``qwen3_5`` only (gated delta net sizes).
        max_position_embeddings: Written to the config.
        emit_special: If false (default) the ``lm_head`` rows of the special
            tokens (eos, pad) are zero: their logit is always 0, so greedy
            decoding never emits eos (generation runs to ``max_tokens``) and
            sampling at temperature 1 picks it with probability ~1e-3 a step.
            Ignored with ``share_embeddings_from`` (the source's rows are kept).

    Returns:
        ``out_dir``.
    """
    import mlx_lm.utils

    out_dir = Path(out_dir)
    tokenizer_dir = Path(tokenizer_dir)
    vocab_size, eos_id, special_ids = _tokenizer_info(tokenizer_dir)
    head_dim = head_dim or hidden_size // num_heads
    config = _config_for(
        arch,
        vocab_size=vocab_size,
        eos_token_id=eos_id,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate_size or 2 * hidden_size,
        full_attention_interval=full_attention_interval,
        linear_num_key_heads=linear_num_key_heads,
        linear_num_value_heads=linear_num_value_heads,
        linear_head_dim=linear_head_dim,
        max_position_embeddings=max_position_embeddings,
    )

    # Same classes (and sanitize) mlx-lm uses when it loads the directory.
    model_class, args_class = mlx_lm.utils._get_classes(config)
    model = model_class(args_class.from_dict(dict(config)))
    params = dict(tree_flatten(model.parameters()))
    weights = _init_weights(params, seed, embed_scale, logit_scale)
    if not emit_special:
        # A zero lm_head row pins the token's logit at 0, below the (positive)
        # maximum: never the greedy choice, rarely sampled.
        (head,) = [k for k in weights if k.endswith("lm_head.weight")]
        keep = mx.ones((vocab_size, 1))
        keep[mx.array(special_ids)] = 0.0
        weights[head] = weights[head] * keep

    if share_embeddings_from is not None:
        source = mx.load(str(Path(share_embeddings_from) / "model.safetensors"))
        for suffix in _SHARED_SUFFIXES:
            dst = [k for k in weights if k == suffix or k.endswith("." + suffix)]
            src = [k for k in source if k == suffix or k.endswith("." + suffix)]
            if len(dst) != 1 or len(src) != 1:
                raise ValueError(f"cannot share {suffix!r} ({src} -> {dst})")
            if source[src[0]].shape != weights[dst[0]].shape:
                raise ValueError(
                    f"{suffix}: shape {source[src[0]].shape} in "
                    f"{share_embeddings_from} but {weights[dst[0]].shape} here "
                    "(same tokenizer and hidden_size needed)"
                )
            weights[dst[0]] = source[src[0]].astype(mx.float32)

    # Round-trip through the model so a wrong key or shape fails here.
    model.load_weights(list(weights.items()), strict=True)
    mx.eval(weights)

    out_dir.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(
        str(out_dir / "model.safetensors"),
        dict(sorted(weights.items())),
        metadata={"format": "mlx"},
    )
    (out_dir / "config.json").write_text(
        json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    for name in TOKENIZER_FILES:
        shutil.copyfile(tokenizer_dir / name, out_dir / name)
    return out_dir


def build_mtp_model(
    out_dir: Path,
    *,
    seed: int,
    tokenizer_dir: Path,
    hidden_weight: float = 0.3,
    sidecar: bool = False,
    **model_kwargs: Any,
) -> Path:
    """A ``qwen3_5`` hybrid model carrying a one-layer MTP head, as Qwen3.5/3.6 ship.

    The trunk is :func:`build_model`'s (``model_kwargs`` go there). The head is derived
    from it so that it agrees with the trunk part of the time: its ``fc`` passes the
    newest token's embedding through and adds ``hidden_weight`` times a random
    projection of the trunk's hidden state (``[I | w R]`` over [embedding | hidden]), its
    decoder block is a copy of the trunk's first full-attention layer and its final norm
    the trunk's. Since the large embeddings dominate the trunk's residual stream, that
    approximates the trunk's own next step from the newest token; the hidden-state term
    makes every draft depend on the hidden state it is given (so a wrong one shows) and
    lowers agreement as it grows.

    The config declares ``mtp_num_hidden_layers: 1``. The head's ``mtp.*`` tensors go
    into ``model.safetensors`` (mlx-lm's loader drops them) or, with ``sidecar``, into
    ``optiq/mtp.safetensors`` as mlx-optiq publishes them.
    """
    out_dir = Path(out_dir)
    build_model(out_dir, "qwen3_5", seed=seed, tokenizer_dir=tokenizer_dir, **model_kwargs)
    config = json.loads((out_dir / "config.json").read_text("utf-8"))
    config["mtp_num_hidden_layers"] = 1
    weights = mx.load(str(out_dir / "model.safetensors"))
    size = config["hidden_size"]
    block = f"language_model.model.layers.{config['full_attention_interval'] - 1}."
    mix = mx.random.normal((size, size), key=mx.random.key(seed + 7)) * size**-0.5
    head = {
        "mtp.fc.weight": mx.concatenate([mx.eye(size), hidden_weight * mix], axis=1),
        "mtp.pre_fc_norm_embedding.weight": mx.ones((size,)),
        "mtp.pre_fc_norm_hidden.weight": mx.ones((size,)),
        "mtp.norm.weight": weights["language_model.model.norm.weight"],
    }
    for name, value in weights.items():
        if name.startswith(block):
            head["mtp.layers.0." + name[len(block):]] = value
    if sidecar:
        (out_dir / "optiq").mkdir(exist_ok=True)
        mx.save_safetensors(
            str(out_dir / "optiq" / "mtp.safetensors"), head, metadata={"format": "mlx"}
        )
    else:
        mx.save_safetensors(
            str(out_dir / "model.safetensors"),
            dict(sorted({**weights, **head}.items())),
            metadata={"format": "mlx"},
        )
    (out_dir / "config.json").write_text(
        json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return out_dir


def build_family(root: Path) -> dict[str, Path]:
    """Build every tokenizer and model the tests use under ``root``.

    Returns a dict of directories:

    * ``"tokenizer"``: the ``"main"`` tokenizer alone;
    * ``"llama_target"`` / ``"llama_draft"``: attention-only pair (the draft is
      a 1-layer qwen3 sharing the target's embedding, lm_head and final norm);
    * ``"qwen3_target"``: another attention-only target (main tokenizer);
    * ``"hybrid_target"`` / ``"hybrid_draft"``: qwen3_5 pair (untrimmable cache);
    * ``"mtp_target"``: a qwen3_5 hybrid with an MTP head in its checkpoint
      (:func:`build_mtp_model`);
    * ``"other_tokenizer_model"``: llama model on the ``"other"`` tokenizer.
    """
    root = Path(root)
    tok = build_tokenizer(root / "tokenizer", "main")
    other_tok = build_tokenizer(root / "other_tokenizer", "other")
    paths: dict[str, Path] = {"tokenizer": tok}
    # Seeds picked (embed_scale 10, logit_scale 4) for: varied greedy output and
    # mid-range draft agreement on "def add(a, b):\n    return".
    paths["llama_target"] = build_model(
        root / "llama_target", "llama", seed=15, tokenizer_dir=tok, num_layers=2
    )
    paths["llama_draft"] = build_model(
        root / "llama_draft",
        "qwen3",
        seed=1015,
        tokenizer_dir=tok,
        num_layers=1,
        share_embeddings_from=paths["llama_target"],
    )
    paths["qwen3_target"] = build_model(
        root / "qwen3_target", "qwen3", seed=3, tokenizer_dir=tok, num_layers=2
    )
    paths["hybrid_target"] = build_model(
        root / "hybrid_target", "qwen3_5", seed=10, tokenizer_dir=tok, num_layers=4
    )
    paths["hybrid_draft"] = build_model(
        root / "hybrid_draft",
        "qwen3_5",
        seed=1010,
        tokenizer_dir=tok,
        num_layers=2,
        share_embeddings_from=paths["hybrid_target"],
    )
    paths["other_tokenizer_model"] = build_model(
        root / "other_tokenizer_model", "llama", seed=6, tokenizer_dir=other_tok
    )
    # Seed picked for an MTP head accepting about half of its drafts at depth 1 and a
    # fifth at depth 4 on the prompt above.
    paths["mtp_target"] = build_mtp_model(
        root / "mtp_target", seed=12, tokenizer_dir=tok, num_layers=4
    )
    return paths
