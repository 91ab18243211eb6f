"""What a draft model's catching up costs after the rounds it skipped.

When ``auto`` takes plain steps (or a ``chain``'s lookup drafts), the draft model sees none
of those tokens; its next draft step feeds them all. Fed through the whole model, every
skipped token also pays for the output layer, which on a 49k vocabulary costs more than a
small draft's layers; ``DraftModel`` feeds them as a prefill does and runs the output layer
on the last token only. This prints, for n skipped tokens, the draft's first step both ways
(median of ``--reps``, the two interleaved) and their ratio.

    python bench/draft_catch_up.py --family smollm2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import mlx.core as mx  # noqa: E402

from specdeck.engines.config import DecodeSettings  # noqa: E402
from specdeck.engines.decoding import forward, prefill  # noqa: E402
from specdeck.engines.draft import DraftModel  # noqa: E402
from specdeck.engines.families import require_family  # noqa: E402
from specdeck.engines.loading import ModelStore  # noqa: E402
from specdeck.engines.sampling import KeyStream  # noqa: E402
from specdeck.prompts import get_prompt  # noqa: E402


def whole_model(proposer: DraftModel, tokens: mx.array) -> mx.array:
    """The draft step as it was: every pending token through the whole model."""
    return forward(proposer.model, proposer.cache, tokens)[-1:]


def engine(proposer: DraftModel, tokens: mx.array) -> mx.array:
    """``DraftModel.propose`` of one draft, after ``tokens`` were left pending."""
    proposer.pending = tokens
    return proposer.propose(1)[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="demo")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--skipped", default="1,2,4,8,16,32,64,128")
    args = ap.parse_args()
    family = require_family(args.family)
    draft = ModelStore().get(family.draft)
    settings = DecodeSettings()
    text = get_prompt("code").text * 8
    ids = mx.array(draft.tokenizer.encode(text), mx.uint32)
    context = 64
    print(f"{args.family} draft, {context} tokens of context; the first draft step after "
          "n skipped tokens, ms (median)")
    print(f"{'n':>5} {'whole model':>12} {'as a prefill':>13} {'ratio':>7}")
    for n in (int(x) for x in args.skipped.split(",")):
        if context + n > ids.size:
            break
        times: dict[str, list[float]] = {"whole": [], "engine": []}
        for rep in range(args.reps):
            for name in ("whole", "engine") if rep % 2 else ("engine", "whole"):
                proposer = DraftModel(draft, settings, KeyStream(0))
                prefill(proposer.model, proposer.cache, ids[: context + 1],
                        settings.prefill_step_size)
                step = whole_model if name == "whole" else engine
                start = time.perf_counter()
                mx.eval(step(proposer, ids[context:context + n]))
                times[name].append(time.perf_counter() - start)
        whole, ours = (statistics.median(times[k]) * 1e3 for k in ("whole", "engine"))
        print(f"{n:>5} {whole:>12.2f} {ours:>13.2f} {ours / whole:>6.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
