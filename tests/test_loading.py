"""Model loading: each model found, read and loaded once; half precision upcast on the CPU
backend."""

from __future__ import annotations

import shutil
import time

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

from specdeck.engines.core.errors import ModelError
from specdeck.engines.models.loading import ModelStore, check_pair, vocabulary_mismatch, load_tokenizer


def test_a_model_is_loaded_once(tiny_family) -> None:
    store = ModelStore()
    a = store.get(str(tiny_family["llama_target"]))
    b = store.get(str(tiny_family["llama_target"]) + "/")
    assert a is b



def test_a_folder_named_like_a_glob_pattern_loads(tiny_family, tmp_path) -> None:
    """mlx-lm finds weights with ``glob``, which read ``models [v2]`` as a pattern and
    found none ("No safetensors found"); the load goes through a plain-named link."""
    folder = tmp_path / "models [v2]" / "target"
    shutil.copytree(tiny_family["llama_target"], folder)
    loaded = ModelStore().get(str(folder))
    original = ModelStore().get(str(tiny_family["llama_target"]))
    assert loaded.path == folder
    ids = mx.array([[1, 2, 3]])
    assert mx.array_equal(loaded.model(ids), original.model(ids))

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
    check_pair("target", "draft", main, load_tokenizer(tiny_family["hybrid_draft"]))
    with pytest.raises(ModelError, match="same model family"):
        check_pair("target", "other", main, load_tokenizer(tiny_family["other_tokenizer_model"]))


# --- models found, read and loaded once -------------------------------------------------


class Counter:
    """Wraps a function and counts its calls by first argument."""

    def __init__(self, fn) -> None:
        self.fn, self.calls = fn, []

    def __call__(self, *args, **kwargs):
        self.calls.append(str(args[0]) if args else "")
        return self.fn(*args, **kwargs)


def test_a_comparison_finds_reads_and_loads_each_model_once(tiny_family, monkeypatch) -> None:
    from specdeck.engines.runs import compare
    from specdeck.engines.models import loading
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.core.requests import CompareRequest

    counters = {name: Counter(getattr(module, name)) for module, name in (
        (loading, "resolve"), (loading, "load_tokenizer"), (compare, "describe_dir"),
        (compare, "encode_prompt"))}
    for module in (loading, compare):
        for name, counter in counters.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, counter)
    loads = Counter(ModelStore._load)
    monkeypatch.setattr(ModelStore, "_load", staticmethod(loads))
    target, draft = str(tiny_family["llama_target"]), str(tiny_family["llama_draft"])
    request = CompareRequest(target=target, draft=draft, prompt="def add(a, b):",
                             strategies=["plain", "draft", "ngram"], warmup_tokens=2,
                             settings=DecodeSettings(max_tokens=6))
    store = ModelStore()
    loaded = []
    result = compare.run_compare(request, store, on_loaded=loaded.append)
    assert len(result.traces) == 3 and loaded == [result.models]
    assert sorted(counters["resolve"].calls) == sorted([target, draft])
    assert sorted(counters["describe_dir"].calls) == sorted(
        str(store.resolve(s)) for s in (target, draft))
    assert len(counters["load_tokenizer"].calls) == 2  # the pair check, before loading
    assert len(counters["encode_prompt"].calls) == 1
    assert sorted(loads.calls) == sorted([target, draft])
    # A second run on the same store (the app's engine process) finds and loads nothing.
    for counter in (*counters.values(), loads):
        counter.calls.clear()
    compare.run_compare(request, store)
    assert counters["resolve"].calls == counters["load_tokenizer"].calls == loads.calls == []
    assert len(counters["encode_prompt"].calls) == 1


def test_the_engine_announces_the_target_without_loading_it_again(tiny_family, monkeypatch) -> None:
    from specdeck.hosts.engine import EventBatch, RunCommand, RunEnded, TargetLoaded, serve_run
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.core.requests import CompareRequest

    gets = Counter(ModelStore.get)
    monkeypatch.setattr(ModelStore, "get", lambda self, *a, **kw: gets(self, *a, **kw))
    request = CompareRequest(target=str(tiny_family["llama_target"]), strategies=["plain"],
                             prompt="def add(a, b):", warmup_tokens=0,
                             settings=DecodeSettings(max_tokens=4))
    sent = []
    serve_run(RunCommand(1, request, save=False), ModelStore(), sent.append, lambda: False,
              time.perf_counter)
    kinds = [type(m) for m in sent]
    assert kinds.count(TargetLoaded) == 1 and kinds[-1] is RunEnded and sent[-1].error is None
    assert kinds.index(TargetLoaded) < kinds.index(EventBatch)
    announced = sent[kinds.index(TargetLoaded)]
    assert announced.path == str(tiny_family["llama_target"])
    assert len(gets.calls) == 1  # the load itself; announcing read nothing again


def test_native_dtype_matches_mlx_lm_generate_step_bit_for_bit(tiny_family, tmp_path) -> None:
    """``--dtype native`` keeps float16 weights as stored, as ``mlx_lm generate`` does:
    the same tokens, from logits equal to the last bit."""
    from mlx_lm import load
    from mlx_lm.generate import generate_step

    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.decode.run import Models, run_strategy

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
