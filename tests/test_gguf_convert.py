"""The GGUF converter on tiny files written here the way llama.cpp writes them.

A random mlx-lm llama and a byte-level BPE tokenizer (SmolLM's pre-tokenizer: digits one
by one, then GPT-2's pattern) are written to GGUF with the ``gguf`` package (llama.cpp's
own Python writer): ``attn_q`` / ``attn_k`` rows permuted for GGML's rotary layout, names
and metadata as llama.cpp's converter sets them, tensors in F32 or quantized to Q4_1 /
Q8_0 by the ``gguf`` package. Converting back must give the same model (the same logits)
and the same tokenizer (the same ids, the same chat prompt).
"""

from __future__ import annotations


import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten
from mlx_lm import load

from specdeck.engines.core.errors import ModelError
from specdeck.engines.models.gguf_convert import convert, unpermute_rotary
from helpers.gguf import build_model, build_tokenizer, gguf, llamacpp_permute, write_gguf


SAMPLES = [
    "The capital of France is Paris, population 2102650.",
    "def mul(x, y):\n\treturn x * y  # 42\n",
    "naïve café — ünïcödé 漢字 🙂",
    "<|im_start|>user\nhi<|im_end|>\n",
]


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
