"""Model loading: each model once, half precision upcast on the CPU backend."""

from __future__ import annotations

import shutil

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

from specdeck.engines.errors import ModelError
from specdeck.engines.loading import ModelStore, check_pair, vocabulary_mismatch, load_tokenizer


def test_a_model_is_loaded_once(tiny_family) -> None:
    store = ModelStore()
    a = store.get(str(tiny_family["llama_target"]))
    b = store.get(str(tiny_family["llama_target"]) + "/")
    assert a is b


def half_copy(src, out):
    """``src`` with its weights stored in float16."""
    shutil.copytree(src, out)
    weights = mx.load(str(out / "model.safetensors"))
    mx.save_safetensors(
        str(out / "model.safetensors"),
        {k: v.astype(mx.float16) for k, v in weights.items()},
        metadata={"format": "mlx"},
    )
    return out


def test_half_precision_is_upcast_on_cpu(tiny_family, tmp_path) -> None:
    half = half_copy(tiny_family["llama_target"], tmp_path / "half")
    loaded = ModelStore().get(str(half))
    dtypes = {v.dtype for _, v in tree_flatten(loaded.model.parameters())}
    if mx.default_device().type == mx.DeviceType.cpu:
        assert loaded.upcast and dtypes == {mx.float32}
    else:
        assert not loaded.upcast and mx.float16 in dtypes


def test_vocabularies(tiny_family) -> None:
    main = load_tokenizer(tiny_family["llama_target"])
    assert vocabulary_mismatch(main, load_tokenizer(tiny_family["hybrid_draft"])) is None
    reason = vocabulary_mismatch(main, load_tokenizer(tiny_family["other_tokenizer_model"]))
    assert reason and "regular tokens in the two vocabularies differ" in reason
    check_pair(str(tiny_family["llama_target"]), str(tiny_family["hybrid_draft"]))
    with pytest.raises(ModelError, match="same model family"):
        check_pair(str(tiny_family["llama_target"]), str(tiny_family["other_tokenizer_model"]))


def test_native_dtype_matches_mlx_lm_generate_step_bit_for_bit(tiny_family, tmp_path) -> None:
    """``--dtype native`` keeps float16 weights as stored, as ``mlx_lm generate`` does:
    the same tokens, from logits equal to the last bit."""
    from mlx_lm import load
    from mlx_lm.generate import generate_step

    from specdeck.engines.config import DecodeSettings
    from specdeck.engines.strategies import Models, run_strategy

    half = half_copy(tiny_family["llama_target"], tmp_path / "half")
    store = ModelStore()
    native = store.get(str(half), dtype="native")
    assert not native.upcast
    assert {v.dtype for _, v in tree_flatten(native.model.parameters())} == {mx.float16}
    assert store.get(str(half), dtype="native") is native
    assert store.get(str(half)) is not native  # "fast" is a model of its own
    model, tokenizer = load(str(half))
    ids = tokenizer.encode("def add(a, b):\n    return a + b\n")
    oracle = list(generate_step(mx.array(ids), model, max_tokens=48))
    settings = DecodeSettings(max_tokens=48, stop_at_eos=False)
    tokens = [t for e in run_strategy("plain", Models(native), ids, settings)
              if type(e).__name__ == "Round" for t in e.tokens]
    assert tokens == [t for t, _ in oracle]
    sequence = mx.array([ids + tokens])
    assert mx.array_equal(native.model(sequence), model(sequence)).item()
    if mx.default_device().type == mx.DeviceType.cpu:  # where "fast" upcasts
        fast = store.get(str(half)).model(sequence)
        assert fast.dtype == mx.float32 and not mx.array_equal(fast, model(sequence)).item()
