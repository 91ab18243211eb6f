"""Hand-built runs for session, diff and replay tests: no model needed.

Token ``n`` always reads as the text ``" w<n>"``, so a test can predict any text.
"""

from __future__ import annotations

import copy

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.events import Done, Prefill, Round, Trace
from specdeck.sessions.session import Session, build_document, session_from_document


#: A program that runs specdeck's command line (its arguments) where mlx, mlx-lm and
#: mlx-optiq cannot be imported: replay, diff and export must need none of them.
NO_MLX = """
import importlib.abc, sys
class NoMlx(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mlx", "mlx_lm", "optiq"):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NoMlx())
from specdeck.cli import main
sys.exit(main(sys.argv[1:]))
"""

MACHINE = {"chip": "Test CPU", "os": "Linux 6.1", "machine": "x86_64", "python": "3.11",
           "memory_bytes": 2**34, "cpu_count": 2, "device": "Device(cpu, 0)", "blas": None,
           "versions": {"mlx": "0.32.4", "mlx-lm": "0.32.2", "mlx-optiq": None,
                        "specdeck": "0.1.0"}}


def piece(token: int) -> str:
    return f" w{token}"


def spec_round(index: int, t: float, drafted: list[int], accepted: int, target: int | None,
               probs: bool = True) -> Round:
    """A round that kept ``drafted[:accepted]`` and then ``target`` (None: stopped inside
    the accepted drafts)."""
    k = len(drafted)
    tokens = drafted[:accepted] + ([] if target is None else [target])
    end = None if target is None else ("target" if not k else "bonus" if accepted == k
                                       else "correction")
    return Round(
        index=index, drafted=list(drafted), accepted=accepted, tokens=tokens, end=end,
        pieces=[piece(x) for x in tokens],
        rejected_pieces=[piece(x) for x in drafted[accepted:]],
        draft_seconds=0.002 * k, verify_seconds=0.01, t=t,
        draft_probs=[0.5] * k if probs and k else None,
        target_probs=[0.25] * k if probs and k else None,
        alternatives=[[[target or 0, 0.9], [7, 0.05]]] if target is not None else None,
    )


def make_trace(name: str, rounds: list[tuple[list[int], int, int | None]],
               reason: str | None = "length") -> Trace:
    """A run from ``(drafted, accepted, target)`` triples; ``reason=None``: no Done."""
    events: list = [Prefill(prompt_tokens=5, seconds=0.02, t=0.02)]
    t = 0.02
    for i, (drafted, accepted, target) in enumerate(rounds):
        t += 0.01 + 0.002 * len(drafted)
        events.append(spec_round(i, t, drafted, accepted, target))
    if reason is not None:
        generated = sum(len(e.tokens) for e in events[1:])
        events.append(Done(reason, generated, t + 0.001, 123_456_789, tail="!"))
    return Trace(name, events)


def plain_trace(name: str, tokens: list[int], reason: str | None = "length") -> Trace:
    return make_trace(name, [([], 0, x) for x in tokens], reason)


def config(strategies: list[str], **settings) -> dict:
    return {
        "prompt": "def fib(n):", "prompt_tokens": [1, 2, 3, 4, 5], "chat": False,
        "strategies": strategies,
        "target": {"source": "tiny/target", "path": "/models/target", "revision": None},
        "draft": {"source": "tiny/draft", "path": "/models/draft", "revision": None},
        "settings": DecodeSettings(**settings).to_dict(), "warmup_tokens": 0,
    }


def document(traces: dict[str, Trace], requested: list[str] | None = None,
             machine: dict | None = None, **settings) -> dict:
    """A session document with a machine of its own: a test that edits it (the hostile
    ones do) changes no other test's."""
    return build_document(config(requested or list(traces), **settings),
                          copy.deepcopy(machine or MACHINE), traces)


def session(traces: dict[str, Trace], **settings) -> Session:
    return session_from_document(document(traces, **settings))


def sample_traces() -> dict[str, Trace]:
    """A greedy plain run and a speculative run with the same output (lossless)."""
    out = [11, 12, 13, 14, 15, 16, 17, 18]
    return {
        "plain": plain_trace("plain", out),
        "draft": make_trace("draft", [
            ([11, 12], 2, 13),        # both accepted, bonus 13
            ([14, 99], 1, 15),        # one rejected, correction 15
            ([98, 97], 0, 16),        # none accepted
            ([17, 18], 2, None),      # max tokens reached inside the drafts
        ]),
    }


def sweep_cell(prompt: str, strategy: str, speedup: float, k: int | None = None,
               depth: int | None = None, correct: bool | None = True) -> dict:
    """One measured cell of a hand-built sweep, as ``specdeck sweep`` saves it."""
    label = {"plain": "plain", "draft": f"draft k={k}", "mtp": f"mtp depth={depth}"}[strategy]
    spec = strategy != "plain"
    return {
        "prompt": prompt, "kind": prompt, "strategy": strategy, "label": label,
        "temperature": 0.0, "k": k, "depth": depth, "n": None, "reps": 3,
        "tokens_per_s": [200.0 * speedup] * 3, "median_tokens_per_s": 200.0 * speedup,
        "speedup": speedup, "cv": 0.08 if k == 4 else 0.01, "noisy": k == 4,
        "acceptance_rate": 0.7 if spec else None, "mean_accepted": 1.4 if spec else None,
        "tokens_per_round": 1.0, "acceptance_by_position": [], "expected_tokens_per_round":
        None, "cost_ratio": None, "predicted_speedup": 1.2 if spec else None,
        "peak_memory_bytes": 50 * 2**20, "memory_over_plain_bytes": 2**20 if spec else 0,
        "correct": correct, "why": f"why {label}",
    }


def sweep_document() -> dict:
    """A saved sweep: draft k=1, 2, 4 on a code prompt, MTP depth 1, 2 on prose (depth 2's
    output differs from plain)."""
    return {
        "schema_version": 1, "kind": "sweep", "created": "2026-11-29T10:00:00+00:00",
        "partial": False, "config": {}, "machine": {"chip": "Test CPU", "os": "Linux 6.1"},
        "cells": [
            sweep_cell("code", "plain", 1.0), sweep_cell("code", "draft", 1.5, k=1),
            sweep_cell("code", "draft", 1.25, k=2), sweep_cell("code", "draft", 0.5, k=4),
            sweep_cell("prose", "plain", 1.0), sweep_cell("prose", "mtp", 0.75, depth=1),
            sweep_cell("prose", "mtp", 0.25, depth=2, correct=False),
        ],
        "recommendations": ["code @ temp 0: best draft k=1, 1.50x plain",
                            "prose @ temp 0: speculation never beat plain decoding here"],
    }
