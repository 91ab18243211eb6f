"""Every draft-length policy against plain decoding and the fixed k, timed side by side
in one sweep; and the prompts the policy benchmarks share.

A family (the demo one by default; ``--family smollm2`` once fetched), temperature 0,
``draft`` (or ``--strategy mtp``) at each fixed k and each policy (``auto``, ``grow``,
``pmin:P``) against plain, in interleaved repetitions (``specdeck sweep``'s). The pair is
calibrated first (``specdeck calibrate``, cached), so ``auto`` starts from this machine's
costs. Per prompt it prints each speedup over plain, the best fixed k and each policy
over it. The best fixed k is the largest of several noisy medians, so its own figure runs
high (the winner's curse); ``bench/auto_replay.py`` compares policies without timing
noise, this shows what they do for real.

    python bench/draft_policies.py --reps 5 --max-tokens 128 [--family smollm2]
                                   [--strategy mtp] [--policies auto,grow,pmin:0.6]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from demo_sweep import sweep_cells  # noqa: E402

#: Prompts rules may be chosen on: the built-in ``code`` and ``prose`` (None: their
#: text is the built-in one), code of five other shapes, a letter and two questions.
#: Prompts held out from every choice are files in ``held_out/``.
TUNING: dict[str, str | None] = {
    "code": None, "prose": None,
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
#: Prompts written after the rules were chosen, used only to measure them (by name, the
#: file's stem).
HELD_OUT_FILES = Path(__file__).resolve().parent / "held_out"


def prompt_text(name: str) -> str:
    """A tuning prompt, a held-out one, a file's text, or a built-in prompt."""
    from specdeck.prompts import get_prompt

    if TUNING.get(name):
        return TUNING[name]
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
    ap.add_argument("--strategy", choices=("draft", "mtp"), default="draft")
    ap.add_argument("--ks", default="1,2,4,8,16", help="the fixed k (comma-separated)")
    ap.add_argument("--policies", default="auto,grow,pmin:0.6")
    ap.add_argument("--prompts", default=",".join(TUNING),
                    help="prompt names (tuning, held-out or built-in) or text files")
    args = ap.parse_args()

    from specdeck.cli import main as specdeck
    from specdeck.engines.core.config import MAX_MTP_DEPTH, parse_draft_count
    from specdeck.engines.core.requests import SweepPrompt, SweepRequest
    from specdeck.engines.models.families import require_family

    pair = require_family(args.family)
    if specdeck(["calibrate", "--target", pair.target, "--draft", pair.draft]) != 0:
        return 1
    fixed = [int(k) for k in args.ks.split(",")]
    if args.strategy == "mtp":
        fixed = [k for k in fixed if k <= MAX_MTP_DEPTH]
    policies = [parse_draft_count(p) for p in args.policies.split(",")]
    prompts = [SweepPrompt(Path(name).stem, prompt_text(name), Path(name).stem)
               for name in args.prompts.split(",")]
    counts = {"ks" if args.strategy == "draft" else "depths": [*fixed, *policies]}
    request = SweepRequest(target=pair.target, draft=pair.draft, prompts=prompts,
                           strategies=[args.strategy], reps=args.reps,
                           max_tokens=args.max_tokens, **counts)
    cells = sweep_cells(request)
    x = "k" if args.strategy == "draft" else "depth"
    print(f"{'prompt':<8} {'plain tok/s':>11} " + "".join(f"{'k=' + str(k):>7}" for k in fixed)
          + "".join(f"{str(p):>10}" for p in policies) + f" {'best fixed':>11}  policy / best")
    for prompt in prompts:
        mine = [c for c in cells if c["prompt"] == prompt.name]
        plain = next(c for c in mine if c["strategy"] == "plain")
        speed = {c[x]: c["speedup"] for c in mine if c["strategy"] == args.strategy}
        best = max(fixed, key=lambda k: speed[k])
        best_speed = max(speed[best], 1.0)
        print(f"{prompt.name[:8]:<8} {plain['median_tokens_per_s']:>11.1f} "
              + "".join(f"{speed[k]:>6.2f}x" for k in fixed)
              + "".join(f"{speed[p]:>9.2f}x" for p in policies)
              + f" {'plain' if speed[best] < 1 else f'k={best}':>6} {best_speed:.2f}x  "
              + " ".join(f"{speed[p] / best_speed:.2f}" for p in policies))
    if not all(c["correct"] is not False for c in cells):
        print("an output differs from plain decoding")
        return 1
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    sys.exit(main())
