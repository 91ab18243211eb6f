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


def test_half_precision_is_upcast_on_cpu(tiny_family, tmp_path) -> None:
    src = tiny_family["llama_target"]
    half = tmp_path / "half"
    shutil.copytree(src, half)
    weights = mx.load(str(half / "model.safetensors"))
    mx.save_safetensors(
        str(half / "model.safetensors"),
        {k: v.astype(mx.float16) for k, v in weights.items()},
        metadata={"format": "mlx"},
    )
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
