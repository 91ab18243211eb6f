"""A draft that drafts from its listed tokens against the same draft over its whole
vocabulary (``engines.draft_vocab``), side by side in one run.

For a fetched family whose draft folder lists its tokens (smollm2): the draft step both
ways (median of chained steps), then on chat prompts its training never saw (the draft
card's held-out prompts, or ``--prompt``), plain decoding and ``draft`` at each k with
the listed tokens (``listed``) and without (``whole``), repetitions interleaved; per
prompt the median of per-repetition speedups over plain, then their median over prompts,
and the acceptance of each arm. Every output is checked against plain decoding.

    python bench/draft_vocab.py --family smollm2 --reps 3 --max-tokens 64 -k 1,2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import mlx.core as mx  # noqa: E402
from mlx_lm.models.cache import make_prompt_cache  # noqa: E402

from specdeck.engines.runs.compare import encode_prompt  # noqa: E402
from specdeck.engines.core.config import DecodeSettings  # noqa: E402
from specdeck.engines.decode.shared import prefill  # noqa: E402
from specdeck.engines.proposers.draft_vocab import WholeVocabulary  # noqa: E402
from specdeck.engines.core.events import Trace  # noqa: E402
from specdeck.engines.models.families import require_family, shipped_draft_dir  # noqa: E402
from specdeck.engines.models.loading import ModelStore  # noqa: E402
from specdeck.engines.core.stats import compute_stats  # noqa: E402
from specdeck.engines.decode.run import Models, run_strategy  # noqa: E402


def step_ms(vocabulary, model, ids: list[int], steps: int = 16, reps: int = 9) -> float:
    """Median over ``reps`` of ``steps`` chained greedy draft steps, per step."""
    times = []
    for _ in range(reps):
        cache = make_prompt_cache(model)
        y = prefill(model, cache, mx.array(ids, mx.uint32), 512)
        mx.eval([c.state for c in cache])
        start = time.perf_counter()
        for _ in range(steps):
            y = vocabulary.pick(mx.argmax(vocabulary.step(cache, y), axis=-1))
            mx.async_eval(y)
        mx.eval(y)
        times.append((time.perf_counter() - start) / steps)
    return statistics.median(times) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="smollm2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("-k", default="1,2", help="draft lengths (comma-separated)")
    ap.add_argument("--prompt", action="append", default=[], metavar="TEXT",
                    help="a chat prompt (repeatable; default: the draft card's held-out ones)")
    args = ap.parse_args()
    family = require_family(args.family)
    store = ModelStore()
    target, listed = store.get(family.target), store.get(family.draft)
    if listed.vocabulary is None:
        print(f"the {args.family} draft lists no tokens: nothing to compare")
        return 1
    whole = dataclasses.replace(listed, vocabulary=None)
    prompts = args.prompt or json.loads(
        (shipped_draft_dir() / "card.json").read_text())["held_out_prompts"]

    ids = encode_prompt(target.tokenizer, prompts[0])
    cut = step_ms(listed.vocabulary, listed.model, ids)
    full = step_ms(WholeVocabulary(listed.model), listed.model, ids)
    print(f"draft step: {cut:.2f} ms over {listed.vocabulary.tokens.size:,} listed tokens, "
          f"{full:.2f} ms over all {listed.vocabulary.size:,} ({cut / full:.2f}x)")

    arms = {"plain": (Models(target), "plain", 1)}
    for k in (int(x) for x in args.k.split(",")):
        arms[f"listed k={k}"] = (Models(target, listed), "draft", k)
        arms[f"whole k={k}"] = (Models(target, whole), "draft", k)
    kept = {a: [0, 0] for a in arms}
    ratios: dict[str, list[float]] = {a: [] for a in arms}
    settings = DecodeSettings(max_tokens=args.max_tokens, stop_at_eos=False)

    def run(arm: str, ids: list[int]) -> list:
        models, strategy, k = arms[arm]
        return list(run_strategy(strategy, models, ids,
                                 dataclasses.replace(settings, num_draft_tokens=k)))

    print(f"{len(prompts)} chat prompts, {args.max_tokens} tokens, {args.reps} repetitions; "
          "speedup over plain (median of per-repetition ratios)")
    for prompt in prompts:
        ids = encode_prompt(target.tokenizer, prompt)
        outputs = {}
        for arm in arms:  # warm-up, output check and acceptance
            trace = Trace(arm, run(arm, ids))
            outputs[arm] = trace.tokens
            for r in trace.rounds:
                kept[arm][0] += r.accepted
                kept[arm][1] += len(r.drafted)
        differ = [a for a, tokens in outputs.items() if tokens != outputs["plain"]]
        if differ:
            print(f"OUTPUT DIFFERS from plain decoding: {', '.join(differ)} on {prompt!r}")
            return 1
        speed: dict[str, list[float]] = {a: [] for a in arms}
        for rep in range(args.reps):
            for arm in list(arms) if rep % 2 == 0 else list(arms)[::-1]:
                speed[arm].append(compute_stats(run(arm, ids)).tokens_per_s)
        for arm in arms:
            ratios[arm].append(statistics.median(
                [x / p for x, p in zip(speed[arm], speed["plain"])]))
        print(f"  {prompt[:44]:<44} " + "  ".join(
            f"{a} {ratios[a][-1]:.2f}x" for a in arms if a != "plain"), flush=True)
    print("every output equal to plain decoding")
    for arm in list(arms)[1:]:
        drafted = kept[arm][1]
        print(f"{arm:>12}: {statistics.median(ratios[arm]):.3f}x of plain (median over "
              f"prompts), acceptance {kept[arm][0] / max(drafted, 1):.1%} of {drafted} drafts")
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    raise SystemExit(main())
