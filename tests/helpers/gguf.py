"""Tiny GGUF files written the way llama.cpp writes them (with the gguf package)."""

from __future__ import annotations

import json
from pathlib import Path
import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models import llama


gguf = pytest.importorskip("gguf")


SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


CORPUS = [
    "The quick brown fox jumps over the lazy dog in 2024 and again in 1999.",
    "def add(a, b):\n    return a + b\n\nprint(add(12, 345))\n",
    "A hash map stores keys and values; lookups take constant time on average.",
    "Paris is the capital of France. Berlin is the capital of Germany.",
] * 20


def llamacpp_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's ``convert_hf_to_gguf.LlamaModel.permute``, written from its definition."""
    return (weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=384, special_tokens=SPECIAL, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    return tok


def build_model(vocab: int, tied: bool) -> llama.Model:
    args = llama.ModelArgs(
        model_type="llama", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=vocab,
        rope_theta=100000.0, tie_word_embeddings=tied,
    )
    mx.random.seed(3)
    model = llama.Model(args)
    # Random tied models repeat one token; larger embeddings give varied logits.
    model.model.embed_tokens.weight = model.model.embed_tokens.weight * 10
    mx.eval(model.parameters())
    return model


GGUF_NAMES = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def write_gguf(path: Path, model: llama.Model, tok, quant: dict[str, object]) -> dict:
    """Write ``model`` and ``tok`` as llama.cpp would; ``quant`` maps GGUF part names
    (``attn_q``, ``token_embd``, ...) to a GGMLQuantizationType. Returns the float32
    weights (by GGUF name) the file holds once its blocks are dequantized."""
    args = model.args
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(args.num_hidden_layers)
    w.add_context_length(256)
    w.add_embedding_length(args.hidden_size)
    w.add_feed_forward_length(args.intermediate_size)
    w.add_head_count(args.num_attention_heads)
    w.add_head_count_kv(args.num_key_value_heads)
    w.add_rope_freq_base(args.rope_theta)
    w.add_layer_norm_rms_eps(args.rms_norm_eps)
    w.add_rope_dimension_count(args.hidden_size // args.num_attention_heads)
    w.add_vocab_size(args.vocab_size)
    data = json.loads(tok.to_str())
    vocab = {**data["model"]["vocab"], **{t["content"]: t["id"] for t in data["added_tokens"]}}
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m
                        for m in data["model"]["merges"]])
    w.add_bos_token_id(vocab["<|im_start|>"])
    w.add_eos_token_id(vocab["<|im_end|>"])
    w.add_unk_token_id(vocab["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)
    stored = {}
    for name, value in tree_flatten(model.parameters()):
        value = np.array(value, dtype=np.float32)
        if name == "model.embed_tokens.weight":
            gname = "token_embd"
        elif name == "model.norm.weight":
            gname = "output_norm"
        elif name == "lm_head.weight":
            gname = "output"
        else:
            layer, rest = name.removeprefix("model.layers.").split(".", 1)
            part = GGUF_NAMES[rest.removesuffix(".weight")]
            if part == "attn_q":
                value = llamacpp_permute(value, args.num_attention_heads)
            elif part == "attn_k":
                value = llamacpp_permute(value, args.num_key_value_heads)
            gname = f"blk.{layer}.{part}"
        qtype = quant.get(gname.split(".")[-1])
        if qtype is None:
            w.add_tensor(f"{gname}.weight", value)
            stored[gname] = value
        else:
            blocks = gguf.quants.quantize(value, qtype)
            w.add_tensor(f"{gname}.weight", blocks, raw_dtype=qtype)
            stored[gname] = gguf.quants.dequantize(blocks, qtype).reshape(value.shape)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return stored
