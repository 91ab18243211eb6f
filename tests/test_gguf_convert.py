"""The GGUF converter on tiny files written here the way llama.cpp writes them.

A random mlx-lm llama and a byte-level BPE tokenizer (SmolLM's pre-tokenizer: digits one
by one, then GPT-2's pattern) are written to GGUF with the ``gguf`` package (llama.cpp's
own Python writer): ``attn_q`` / ``attn_k`` rows permuted for GGML's rotary layout, names
and metadata as llama.cpp's converter sets them, tensors in F32 or quantized to Q4_1 /
Q8_0 by the ``gguf`` package. Converting back must give the same model (the same logits)
and the same tokenizer (the same ids, the same chat prompt).
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten
from mlx_lm import load
from mlx_lm.models import llama

from specdeck.engines.errors import ModelError
from specdeck.engines.gguf_convert import convert, unpermute_rotary

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
SAMPLES = [
    "The capital of France is Paris, population 2102650.",
    "def mul(x, y):\n\treturn x * y  # 42\n",
    "naïve café — ünïcödé 漢字 🙂",
    "<|im_start|>user\nhi<|im_end|>\n",
]


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


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def logits(model, ids: list[int]) -> np.ndarray:
    return np.array(model(mx.array([ids]))[0], dtype=np.float32)


@pytest.mark.parametrize("tied", [True, False])
def test_float_round_trip_gives_the_same_model(tmp_path, tokenizer, tied):
    original = build_model(tokenizer.get_vocab_size(), tied)
    write_gguf(tmp_path / "m.gguf", original, tokenizer, {})
    config = convert(tmp_path / "m.gguf", tmp_path / "out")
    assert config["tie_word_embeddings"] is tied
    converted, _ = load(str(tmp_path / "out"))
    for (name, a), (name_b, b) in zip(sorted(tree_flatten(original.parameters())),
                                      sorted(tree_flatten(converted.parameters()))):
        assert name == name_b
        np.testing.assert_array_equal(np.array(a), np.array(b), err_msg=name)
    ids = tokenizer.encode(SAMPLES[0]).ids
    np.testing.assert_array_equal(logits(original, ids), logits(converted, ids))


def test_unpermute_inverts_llamacpp_permutation():
    q = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    permuted = llamacpp_permute(q, 4)
    assert not np.array_equal(permuted, q)
    np.testing.assert_array_equal(np.array(unpermute_rotary(mx.array(permuted), 4)), q)


def test_quantized_blocks_are_dequantized_like_llamacpp(tmp_path, tokenizer):
    original = build_model(tokenizer.get_vocab_size(), tied=True)
    Q = gguf.GGMLQuantizationType
    quant = {"attn_q": Q.Q4_1, "attn_k": Q.Q4_1, "attn_v": Q.Q4_0, "ffn_down": Q.Q4_1,
             "ffn_up": Q.Q8_0, "token_embd": Q.Q8_0}
    stored = write_gguf(tmp_path / "q.gguf", original, tokenizer, quant)
    convert(tmp_path / "q.gguf", tmp_path / "out")
    converted, _ = load(str(tmp_path / "out"))
    params = dict(tree_flatten(converted.parameters()))
    assert all(v.dtype == mx.float32 for v in params.values())
    q0 = stored["blk.0.attn_q"]
    np.testing.assert_allclose(
        np.array(params["model.layers.0.self_attn.q_proj.weight"]),
        np.array(unpermute_rotary(mx.array(q0), 4)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.array(params["model.layers.1.mlp.up_proj.weight"]),
                               stored["blk.1.ffn_up"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.array(params["model.embed_tokens.weight"]),
                               stored["token_embd"], rtol=1e-6, atol=1e-6)
    # Quantization is lossy: the converted model is close to the original, not equal.
    assert not np.array_equal(np.array(params["model.layers.0.mlp.down_proj.weight"]),
                              np.array(original.model.layers[0].mlp.down_proj.weight))


def test_tokenizer_and_chat_template_rebuilt(tmp_path, tokenizer):
    original = build_model(tokenizer.get_vocab_size(), tied=True)
    write_gguf(tmp_path / "m.gguf", original, tokenizer, {})
    convert(tmp_path / "m.gguf", tmp_path / "out")
    _, wrapper = load(str(tmp_path / "out"))
    for text in SAMPLES:
        assert wrapper.encode(text) == tokenizer.encode(text).ids, text
        assert wrapper.decode(wrapper.encode(text)) == text
    assert wrapper.encode("<|im_end|>") == [tokenizer.token_to_id("<|im_end|>")]
    assert wrapper.encode("2024") == [tokenizer.token_to_id(d) for d in "2024"]
    assert wrapper.eos_token_ids == {tokenizer.token_to_id("<|im_end|>")}
    prompt = wrapper.apply_chat_template([{"role": "user", "content": "Hi there"}],
                                         add_generation_prompt=True)
    assert wrapper.decode(prompt) == "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"


def test_other_architectures_refused_in_one_line(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "x.gguf"), "mamba")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ModelError, match="architecture is 'mamba'; only 'llama'"):
        convert(tmp_path / "x.gguf", tmp_path / "out")
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf file")
    with pytest.raises(ModelError, match="cannot read .* as a GGUF file"):
        convert(tmp_path / "junk.gguf", tmp_path / "out")
