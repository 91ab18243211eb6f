"""scripts/train_demo.py: its phases chain, and the target's greedy continuations that
the last phase trains the draft on are what plain greedy decoding writes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import mlx.core as mx
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "train_demo.py"


@pytest.fixture(scope="module")
def train_demo():
    spec = importlib.util.spec_from_file_location("train_demo", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.fixture(scope="module")
def family(train_demo):
    s = train_demo.Settings(
        vocab_size=64, hidden=32, layers=2, full_attention_interval=2, intermediate=64,
        heads=2, kv_heads=1, head_dim=16, linear_key_heads=1, linear_value_heads=2,
        linear_head_dim=8, draft_hidden=32, draft_intermediate=64, draft_heads=2,
        draft_kv_heads=1,
    )
    fam = train_demo.Family(train_demo.target_config(s, 0), train_demo.draft_config(s, 0))
    train_demo.init_family(fam, seed=3)
    # Larger embeddings so that the random target does not repeat one token forever.
    text = fam.target.language_model
    text.model.embed_tokens.weight = text.model.embed_tokens.weight * 50
    return fam


def test_phases_follow_each_other_and_empty_ones_are_skipped(train_demo):
    s = train_demo.Settings(steps=10, distill_steps=5, mix_steps=0, policy_steps=7)
    plan = train_demo.phases(s)
    assert [p.name for p in plan] == ["joint", "distill", "mix", "policy"]
    assert all(a.end == b.start for a, b in zip(plan, plan[1:]))
    assert [train_demo.phase_at(plan, step).name for step in (0, 9, 10, 14, 15, 21, 22)] == [
        "joint", "joint", "distill", "distill", "policy", "policy", "policy"
    ]
    assert [p.draft_only for p in plan] == [False, True, False, True]


def test_greedy_continuation_equals_decoding_without_a_cache(train_demo, family):
    prefixes = mx.array([[1, 2, 3, 4], [9, 8, 7, 6], [5, 5, 5, 5]])
    out = train_demo.greedy_continuation(family.target, prefixes, 12)
    assert out.shape == (3, 16)
    expected = prefixes
    for _ in range(12):
        nxt = family.target(expected)[:, -1].argmax(-1, keepdims=True)
        expected = mx.concatenate([expected, nxt], axis=1)
    assert out.tolist() == expected.tolist()
    # Not one token repeated: the check above would hold for a degenerate model too.
    assert len(set(out[:, 4:].reshape(-1).tolist())) > 3
