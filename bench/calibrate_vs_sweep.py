"""What ``specdeck calibrate`` predicts against what a sweep measures, side by side in one
run on the same pair (the demo family by default; ``--family smollm2`` once fetched).

It calibrates the pair (its passes, then a few short runs of the loop), then sweeps the
draft strategy over k (``--drafter mtp``: the target's MTP head over its depths) on one
prompt at temperature 0. The calibration's costs turn the sweep's own survival by
position (from its largest k, which measures every position) into a predicted speedup
for each k: the best k predicted against the best k measured, and each k's predicted
speedup against its measured one. A second calibration after the sweep says how far the
machine drifted while it ran.

    python bench/calibrate_vs_sweep.py [--family demo] [--prompt prompts/code.txt] [--reps 5]
                                       [--drafter mtp]
"""

from __future__ import annotations

import argparse
import sys

from specdeck.blas import reexec_with_openblas
from specdeck.engines.runs.compare import encode_prompt
from specdeck.engines.core.config import MAX_MTP_DEPTH
from specdeck.engines.models.families import FAMILIES, require_family
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.measure.pass_timing import measure_calibration, measure_loop
from specdeck.engines.core.requests import SweepPrompt, SweepRequest
from specdeck.engines.runs.sweep import run_sweep, sweep_models
from specdeck.commands.progress_line import ProgressLine
from specdeck.prompts import read_prompt

KS = [1, 2, 3, 4, 6, 8, 12, 16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=list(FAMILIES), default="demo")
    parser.add_argument("--prompt", default="prompts/code.txt")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--drafter", choices=("draft", "mtp"), default="draft",
                        help="who drafts: the family's draft model, or the target's MTP head")
    args = parser.parse_args()

    pair = require_family(args.family)
    text = read_prompt(args.prompt)
    drafter = args.drafter
    depths = [k for k in KS if k <= MAX_MTP_DEPTH]
    request = SweepRequest(target=pair.target, draft=pair.draft,
                           prompts=[SweepPrompt("prompt", text)], strategies=[drafter],
                           ks=KS, depths=depths, reps=args.reps, max_tokens=args.max_tokens)
    models = sweep_models(request, ModelStore())
    ids = encode_prompt(models.target.tokenizer, text)
    draft, mtp = (models.draft, None) if drafter == "draft" else (None, models.mtp)

    def calibrated():
        return measure_loop(measure_calibration(models.target, ids, draft, mtp),
                            models.target, ids, draft, mtp)

    before = calibrated()
    line = ProgressLine(every=0.0)
    cells, _ = run_sweep(request, models=models, progress=lambda p: line.show(
        f"{p.done}/{p.total} runs", last=p.done == p.total))
    line.end()
    after = calibrated()

    drafts = {c.k if drafter == "draft" else c.depth: c for c in cells if c.strategy == drafter}
    survival = drafts[max(drafts)].acceptance_by_position
    print(f"{args.family}, {args.prompt}, temperature 0, {args.max_tokens} tokens, "
          f"median of {args.reps}; survival from k={max(drafts)}: "
          + " ".join(f"{s:.2f}" for s in survival[:8]) + " ...")
    print(f"plain step in the loop {before.unit * 1e3:.2f} ms before the sweep, "
          f"{after.unit * 1e3:.2f} ms after; a round's own work "
          f"{before.round_overhead(drafter).seconds * 1e3:.2f} ms")
    print(f"{'k':>3} {'measured':>9} {'predicted':>10} {'after':>7} {'pred/meas':>10}")
    predicted = {k: before.cost_model(drafter, survival=survival).predicted(k) for k in drafts}
    again = {k: after.cost_model(drafter, survival=survival).predicted(k) for k in drafts}
    for k, cell in drafts.items():
        print(f"{k:>3} {cell.speedup:>8.2f}x {predicted[k]:>9.2f}x {again[k]:>6.2f}x "
              f"{predicted[k] / cell.speedup:>10.2f}")
    best_measured = max(drafts, key=lambda k: drafts[k].speedup)
    best_predicted = max(predicted, key=predicted.get)
    print(f"best k measured {best_measured} ({drafts[best_measured].speedup:.2f}x), "
          f"predicted {best_predicted} ({predicted[best_predicted]:.2f}x; after the sweep "
          f"{max(again, key=again.get)})")
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    sys.exit(main())
