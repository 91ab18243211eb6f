"""Cache rewind is exact for every cache kind: after rewinding, a cache behaves exactly as
one that never saw the discarded tokens."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import (
    ArraysCache,
    CacheList,
    ChunkedKVCache,
    KVCache,
    QuantizedKVCache,
    RotatingKVCache,
)

from specdeck.engines.decode.rollback import Rewind, checkpoint, restore, rewind

HEADS, DIM = 2, 64


def kv(n: int, seed: int) -> tuple[mx.array, mx.array]:
    k = mx.random.normal((1, HEADS, n, DIM), key=mx.random.key(seed))
    v = mx.random.normal((1, HEADS, n, DIM), key=mx.random.key(seed + 1000))
    return k, v


def feed(cache, n: int, seed: int):
    """Feed n positions one call at a time for n == 1, else in one call (as verify does)."""
    return cache.update_and_fetch(*kv(n, seed))


def fetched(cache, seed: int) -> list[np.ndarray]:
    """What the next single-token update returns: the keys/values attention would see."""
    out = feed(cache, 1, seed)
    arrays = []
    for part in out:
        if isinstance(part, (tuple, list)):
            arrays.extend(np.array(p) for p in part)
        else:
            arrays.append(np.array(part))
    return arrays


MAKERS = {
    "kv": lambda: KVCache(),
    "quantized": lambda: QuantizedKVCache(group_size=64, bits=8),
    "chunked": lambda: ChunkedKVCache(chunk_size=64),
    "rotating": lambda: RotatingKVCache(max_size=12, keep=2),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
@pytest.mark.parametrize("history", [5, 30])
@pytest.mark.parametrize("keep", [0, 1, 3, 5])
def test_attention_caches_rewind_exactly(kind: str, history: int, keep: int) -> None:
    make = MAKERS[kind]
    ours, reference = make(), make()
    for step in range(history):  # token by token, as decoding does
        feed(ours, 1, step)
        feed(reference, 1, step)
    upcoming = 5
    point = checkpoint([ours], upcoming)
    # The verify pass: the kept tokens are the same in both, then rejected ones.
    new_k, new_v = kv(upcoming, 500)
    ours.update_and_fetch(new_k, new_v)
    action = rewind([ours], point, keep)
    if action is Rewind.REPLAY:
        ours.update_and_fetch(new_k[:, :, :keep], new_v[:, :, :keep])
    if keep:
        reference.update_and_fetch(new_k[:, :, :keep], new_v[:, :, :keep])
    wrapped = kind == "rotating" and history + upcoming >= 12
    assert action is (Rewind.NONE if keep == upcoming else Rewind.REPLAY if wrapped and keep else Rewind.TRIM)
    for a, b in zip(fetched(ours, 999), fetched(reference, 999)):
        np.testing.assert_array_equal(a, b)


def recurrent_step(cache: ArraysCache, x: mx.array) -> mx.array:
    """A toy recurrent layer that replaces its state, as gated delta net does."""
    state = cache[0] if cache[0] is not None else mx.zeros_like(x)
    cache[0] = 0.5 * state + x
    return cache[0]


def test_arrays_cache_restores_state_and_needs_replay() -> None:
    ours, reference = ArraysCache(1), ArraysCache(1)
    xs = [mx.random.normal((1, 4), key=mx.random.key(i)) for i in range(8)]
    for x in xs[:3]:
        recurrent_step(ours, x)
        recurrent_step(reference, x)
    point = checkpoint([ours], 4)
    assert not point.trims_only
    for x in xs[3:7]:
        recurrent_step(ours, x)
    assert rewind([ours], point, keep=2) is Rewind.REPLAY
    for x in xs[3:5]:  # replay the kept ones
        recurrent_step(ours, x)
    for x in xs[3:5]:
        recurrent_step(reference, x)
    np.testing.assert_array_equal(np.array(ours[0]), np.array(reference[0]))


def test_arrays_cache_per_step_checkpoints_restore_without_replay() -> None:
    """The draft loop checkpoints before every step and never replays."""
    ours, reference = ArraysCache(1), ArraysCache(1)
    xs = [mx.random.normal((1, 4), key=mx.random.key(i)) for i in range(6)]
    points = []
    for x in xs:
        points.append(checkpoint([ours], 1))
        recurrent_step(ours, x)
    for x in xs[:2]:
        recurrent_step(reference, x)
    restore([ours], points[2], discard=4)
    np.testing.assert_array_equal(np.array(ours[0]), np.array(reference[0]))


def test_cache_list_mixes_trim_and_restore() -> None:
    """A layer holding both a KV cache and a recurrent state is restored as a whole."""
    ours = CacheList(KVCache(), ArraysCache(1))
    reference = CacheList(KVCache(), ArraysCache(1))
    for step in range(4):
        for c in (ours, reference):
            feed(c[0], 1, step)
            recurrent_step(c[1], mx.full((1, 4), float(step)))
    point = checkpoint([ours], 3)
    feed(ours[0], 3, 77)
    recurrent_step(ours[1], mx.full((1, 4), 9.0))
    assert rewind([ours], point, keep=0) is Rewind.TRIM
    np.testing.assert_array_equal(np.array(ours[1][0]), np.array(reference[1][0]))
    for a, b in zip(fetched(ours[0], 5), fetched(reference[0], 5)):
        np.testing.assert_array_equal(a, b)
