"""``auto`` against every fixed k, side by side in one sweep (issue 18, item 1).

A family (the demo one by default; ``--family smollm2`` once fetched), temperature 0,
``draft`` at k = 1, 2, 4, 8, 16 and auto against plain, on the built-in code and prose
prompts and on prompts that are not in ``prompts/`` (held out: no change that was kept
was chosen on ``timer`` and ``picnic``; ``csv`` and ``garden`` chose the hope budget;
``queue`` and ``letter`` ran in side-by-side trials of variants that were not kept). The pair is calibrated first (``specdeck
calibrate``, cached), so auto starts from this machine's costs; ``--no-calibration``
runs it on an empty cache, learning every cost from its own rounds. Per prompt it
prints the best fixed k, auto's speedup over plain, auto over the best fixed k (the
goal: within 5 %), and, where every fixed k loses to plain, whether auto stays within
the noise of plain (the larger of plain's and auto's robust CV).

The sweep's best fixed k is the fastest of several noisy medians, so its own figure is
biased upwards (the winner's curse: with five k within a few percent of each other the
largest median overstates its k by about one spread of a median). ``--confirm N`` then
measures auto against that k head to head in N fresh interleaved repetitions per prompt
(plain, the best k, auto, in turn) and reports the median of the per-repetition ratios
auto / best k, which no choice was made on.

    python bench/auto_k.py --reps 5 --max-tokens 128 [--family smollm2] [--no-calibration]
                           [--confirm 9]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from demo_sweep import sweep_cells  # noqa: E402

#: The fixed k auto is measured against (``--ks``).
FIXED = [1, 2, 4, 8, 16]
#: Prompts not in ``prompts/``: code of five other shapes, a letter and two questions.
HELD_OUT = {
    "config": 'import json\n\n\ndef load_config(path):\n    """Read a JSON config file and '
              'fill in the defaults."""\n    with open(path) as handle:\n        config = '
              'json.load(handle)\n    config.setdefault("name", "untitled")\n    config.'
              'setdefault("retries", 3)\n    return config\n\n\ndef save_config(path, '
              'config):\n    """Write a config back to disk."""\n',
    "stack": "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push("
             "self, item):\n        self.items.append(item)\n\n    def pop(self):\n",
    "queue": 'from collections import deque\n\n\nclass TaskQueue:\n    """A first-in, first-'
             'out queue of jobs with a size limit."""\n\n    def __init__(self, limit=100):\n'
             '        self.limit = limit\n        self.jobs = deque()\n\n    def add(self, '
             'job):\n',
    "letter": "Dear neighbours,\n\nThis is a reminder that the street will be closed for "
              "repairs next week. Please move your cars before Monday morning, and",
    "csv": 'import csv\n\n\ndef read_scores(path):\n    """Return a dict of player name to '
           'total score from a CSV file with name,score rows."""\n    totals = {}\n',
    "garden": "How should I look after a small vegetable garden in a hot, dry summer? "
              "I grow tomatoes, beans and lettuce.",
    "timer": 'import time\nfrom contextlib import contextmanager\n\n\n@contextmanager\ndef '
             'timed(label):\n    """Print how long the block inside took, in milliseconds.'
             '"""\n',
    "picnic": "I am planning a picnic for ten people in the park on Saturday. What food "
              "and things should I bring?",
}


#: Prompts written after auto's rules were chosen and used only to measure them (by
#: name, the file's stem; ``bench/auto_replay.py`` replays them by default).
HELD_OUT_FILES = Path(__file__).resolve().parent / "held_out"


def prompt_text(name: str) -> str:
    """One of the held-out prompts above or in ``held_out/``, a file's text, or a
    built-in prompt."""
    from specdeck.prompts import get_prompt

    if name in HELD_OUT:
        return HELD_OUT[name]
    if (HELD_OUT_FILES / f"{name}.txt").is_file():
        return (HELD_OUT_FILES / f"{name}.txt").read_text()
    if Path(name).is_file():
        return Path(name).read_text()
    return get_prompt(name).text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--family", default="demo")
    ap.add_argument("--ks", default=",".join(map(str, FIXED)),
                    help="the fixed k to measure auto against (comma-separated)")
    ap.add_argument("--prompts", default="code,prose," + ",".join(HELD_OUT),
                    help="which of the prompts to run, or text files (comma-separated)")
    ap.add_argument("--no-calibration", action="store_true",
                    help="auto learns every cost from its run (an empty cache)")
    ap.add_argument("--confirm", type=int, default=0, metavar="N",
                    help="then auto against the sweep's best k, N fresh repetitions each")
    args = ap.parse_args()

    from specdeck.cli import main as specdeck
    from specdeck.engines.core.config import AUTO
    from specdeck.engines.models.families import require_family
    from specdeck.engines.core.requests import SweepPrompt, SweepRequest

    demo = require_family(args.family)
    if args.no_calibration:
        os.environ["SPECDECK_CACHE_DIR"] = tempfile.mkdtemp(prefix="specdeck-auto-k-")
        print("no calibration: auto learns its costs from its own rounds")
    elif specdeck(["calibrate", "--target", demo.target, "--draft", demo.draft]) != 0:
        return 1
    fixed = [int(k) for k in args.ks.split(",")]
    prompts = [SweepPrompt(Path(name).stem, prompt_text(name), Path(name).stem)
               for name in args.prompts.split(",")]
    request = SweepRequest(
        target=demo.target, draft=demo.draft, prompts=prompts, strategies=["draft"],
        ks=[*fixed, AUTO], reps=args.reps, max_tokens=args.max_tokens)
    cells = sweep_cells(request)
    print(f"{'prompt':<7} {'plain tok/s':>11} "
          + "".join(f"{'k=' + str(k):>7}" for k in fixed)
          + f" {'auto':>7} {'best fixed':>12} {'auto/best':>9}  where every k loses")
    for prompt in prompts:
        mine = [c for c in cells if c["prompt"] == prompt.name]
        plain = next(c for c in mine if c["strategy"] == "plain")
        by_k = [c for c in mine if c["strategy"] == "draft" and c["k"] != AUTO]
        auto = next(c for c in mine if c["k"] == AUTO)
        best = max(by_k, key=lambda c: c["speedup"])
        loses = ""
        if best["speedup"] < 1.0:
            noise = max(plain["cv"], auto["cv"])
            verdict = "within" if auto["speedup"] >= 1.0 - noise else "OUTSIDE"
            loses = f"auto {auto['speedup']:.2f}x, {verdict} the noise (CV {noise:.3f})"
        best_label = f"k={best['k']} {best['speedup']:.2f}x"
        speedups = {c["k"]: c["speedup"] for c in by_k}
        print(f"{prompt.name:<7} {plain['median_tokens_per_s']:>11.1f} "
              + "".join(f"{speedups[k]:>6.2f}x" for k in fixed)
              + f" {auto['speedup']:>6.2f}x {best_label:>12} "
              f"{auto['speedup'] / best['speedup']:>9.2f}  {loses}")
    if args.confirm:
        cells += confirm(request, cells, args.confirm)
    if not all(c["correct"] is not False for c in cells):
        print("an output differs from plain decoding")
        return 1
    return 0


def confirm(request, cells: list[dict], reps: int) -> list[dict]:
    """Auto against each prompt's best fixed k of ``cells``, head to head in ``reps``
    fresh interleaved repetitions; prints the per-prompt verdict, returns the new cells."""
    from dataclasses import replace

    from specdeck.engines.core.config import AUTO
    from specdeck.engines.core.stats import median

    print(f"\nhead to head, {reps} fresh repetitions each (plain, best k, auto in turn):")
    print(f"{'prompt':<7} {'best k':>6} {'best':>6} {'auto':>6} "
          f"{'auto/best':>9} {'per-rep ratios (min..max)':>26}")
    fresh: list[dict] = []
    for prompt in request.prompts:
        mine = [c for c in cells if c["prompt"] == prompt.name and c["strategy"] == "draft"]
        best = max((c for c in mine if c["k"] != AUTO), key=lambda c: c["speedup"])
        again = sweep_cells(replace(request, prompts=[prompt], ks=[best["k"], AUTO],
                                    reps=reps))
        fixed = next(c for c in again if c["strategy"] == "draft" and c["k"] != AUTO)
        auto = next(c for c in again if c["k"] == AUTO)
        ratios = [a / b for a, b in zip(auto["tokens_per_s"], fixed["tokens_per_s"])]
        print(f"{prompt.name:<7} {best['k']:>6} {fixed['speedup']:>5.2f}x "
              f"{auto['speedup']:>5.2f}x {median(ratios):>9.2f} "
              f"{min(ratios):>17.2f}..{max(ratios):.2f}")
        fresh += again
    return fresh


if __name__ == "__main__":
    sys.exit(main())
