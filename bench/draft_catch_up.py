"""What a draft model's catching up costs after the rounds it skipped.

When ``auto`` takes plain steps (or a ``chain``'s lookup drafts), the draft model sees none
of those tokens; its next draft step feeds them all. Fed through the whole model, every
skipped token also pays for the output layer, which on a 49k vocabulary costs more than a
small draft's layers; ``DraftModel`` feeds them as a prefill does and runs the output layer
on the last token only. This prints, for n skipped tokens, the draft's first step both ways
(median of ``--reps``, interleaved) and their ratio. At temperature 0 ``auto`` instead
catches the draft up with its output layer on every skipped token, judging its greedy
guess at each (``DraftModel.guesses``): the last columns print what that costs, and how
it compares with one plain step of the target on the same context.

    python bench/draft_catch_up.py --family smollm2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import mlx.core as mx  # noqa: E402
from mlx_lm.models.cache import make_prompt_cache  # noqa: E402

from specdeck.engines.core.config import DecodeSettings  # noqa: E402
from specdeck.engines.decode.shared import forward, prefill  # noqa: E402
from specdeck.engines.proposers.draft import DraftModel  # noqa: E402
from specdeck.engines.models.families import require_family  # noqa: E402
from specdeck.engines.models.loading import ModelStore  # noqa: E402
from specdeck.engines.decode.sampling import KeyStream  # noqa: E402
from specdeck.prompts import get_prompt  # noqa: E402


def whole_model(proposer: DraftModel, tokens: mx.array) -> mx.array:
    """The draft step as it was: every pending token through the whole model."""
    return forward(proposer.model, proposer.cache, tokens)[-1:]


def engine(proposer: DraftModel, tokens: mx.array) -> mx.array:
    """``DraftModel.propose`` of one draft, after ``tokens`` were left pending."""
    proposer.pending = tokens
    return proposer.propose(1)[1]


def guessing(proposer: DraftModel, tokens: mx.array) -> mx.array:
    """``DraftModel.guesses`` over ``tokens`` and the token after them: n guesses judged
    (read back, as the engine reads them)."""
    proposer.pending = tokens
    return mx.array(proposer.guesses(0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="demo")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--skipped", default="1,2,4,8,16,32,64,128")
    args = ap.parse_args()
    family = require_family(args.family)
    store = ModelStore()
    draft, target = store.get(family.draft), store.get(family.target)
    settings = DecodeSettings()
    text = get_prompt("code").text * 8
    ids = mx.array(draft.tokenizer.encode(text), mx.uint32)
    context = 64
    print(f"{args.family} draft, {context} tokens of context; the first draft step after "
          "n skipped tokens, ms (median)")
    print(f"{'n':>5} {'whole model':>12} {'as a prefill':>13} {'ratio':>7} "
          f"{'n guesses':>10} {'target step':>12} {'guesses/step':>13}")
    for n in (int(x) for x in args.skipped.split(",")):
        if context + n > ids.size:
            break
        steps = {"whole": whole_model, "engine": engine, "guesses": guessing}
        times: dict[str, list[float]] = {name: [] for name in [*steps, "target"]}
        for rep in range(args.reps):
            for name in steps if rep % 2 else reversed(steps):
                proposer = DraftModel(draft, settings, KeyStream(0))
                prefill(proposer.model, proposer.cache, ids[: context + 1],
                        settings.prefill_step_size)
                start = time.perf_counter()
                mx.eval(steps[name](proposer, ids[context:context + n + (name == "guesses")]))
                times[name].append(time.perf_counter() - start)
            target_cache = make_prompt_cache(target.model)
            prefill(target.model, target_cache, ids[: context + n + 1],
                    settings.prefill_step_size)
            start = time.perf_counter()
            mx.eval(forward(target.model, target_cache, ids[context + n:context + n + 1]))
            times["target"].append(time.perf_counter() - start)
        whole, ours, guesses, step = (statistics.median(times[k]) * 1e3 for k in times)
        print(f"{n:>5} {whole:>12.2f} {ours:>13.2f} {ours / whole:>6.2f}x "
              f"{guesses:>10.2f} {step:>12.2f} {guesses / step:>12.2f}x")
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    raise SystemExit(main())
