"""What splitting the target over a group does to speculation: 1 rank against 2.

For each simulated interconnect latency, measures on the same models, one after the
other, in one run:

- the time of a target step and of verify passes of 2, 3, 5, 9 and 17 tokens (in
  target steps), on one rank (the whole target in one process) and on two ranks (the
  target split by tensor over ``mlx.launch --backend ring -n 2`` on this machine);
- plain decoding's speed and the speedup of the best k of the draft strategy on each
  (a ``specdeck sweep`` of k, median of ``--reps``, every output checked against plain).

Latency is simulated in the workers, where this script controls it: with
``--latency-ms L`` every mlx collective (all_sum, all_gather, send, recv) first waits
for the work queued before it, then sleeps L ms, then runs: the link's latency paid
once per collective and per pass, whatever the number of tokens, as on a real link.
(``tc netem`` on loopback would delay every local connection of the machine, other
users' included, and needs root: not used.) A run on one rank makes no collective, so
it pays none.

Two ranks on one machine share its cores: on a 2-core machine the split target
computes no faster than the whole one, and what shows is what each pass's collectives
cost, which is the point.

    python bench/distributed.py --latency-ms 0,0.5 --ks 1,2,4,8 --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

#: Verify passes shown (tokens per pass); a target step is 1.
SHOWN = (2, 3, 5, 9, 17)


def add_latency(seconds: float) -> None:
    """Every mlx collective waits for what was queued before it, then ``seconds``."""
    import mlx.core as mx

    for name in ("all_sum", "all_gather", "send", "recv", "recv_like"):
        original = getattr(mx.distributed, name)

        def delayed(x, *args, _original=original, **kwargs):
            mx.eval(x)
            time.sleep(seconds)
            return _original(x, *args, **kwargs)

        setattr(mx.distributed, name, delayed)


def worker(args: argparse.Namespace) -> None:
    """One rank (or the one process): sweep k, write rank 0's figures to ``--out``."""
    from specdeck.engines.core.config import Sampling
    from specdeck.engines.distributed.split import group_sweep, split_store, start_group
    from specdeck.engines.core.requests import GroupSpec, SweepPrompt, SweepRequest
    from specdeck.prompts import get_prompt

    if args.latency_ms:
        add_latency(args.latency_ms / 1000)
    group = start_group(GroupSpec(shard="tensor"))
    prompt = get_prompt("code")
    request = SweepRequest(
        target=args.target, draft=args.draft, prompts=[SweepPrompt("code", prompt.text)],
        strategies=["draft"], ks=args.ks, reps=args.reps, warmup=1,
        max_tokens=args.max_tokens, sampling=Sampling(seed=0))
    cells, complete, record = group_sweep(request, group, split_store(group, args.target))
    if group.lead:
        Path(args.out).write_text(json.dumps({
            "complete": complete, "group": record,
            "cells": [{"k": c.k, "tokens_per_s": c.median_tokens_per_s, "speedup": c.speedup,
                       "correct": c.correct, "cv": c.cv} for c in cells],
        }))


def measure(ranks: int, latency_ms: float, args: argparse.Namespace) -> dict:
    """Run the worker on ``ranks`` processes and read rank 0's figures."""
    from specdeck.engines.core.requests import GroupSpec
    from specdeck.hosts.launch import launch_argv

    out = Path(tempfile.mkdtemp()) / "figures.json"
    command = [str(Path(__file__).resolve()), "--worker", "--out", str(out),
               "--latency-ms", str(latency_ms), "--target", args.target, "--draft",
               args.draft, "--ks", ",".join(map(str, args.ks)), "--reps", str(args.reps),
               "--max-tokens", str(args.max_tokens)]
    if ranks == 1:
        argv = [sys.executable, *command]
    else:
        argv = launch_argv(GroupSpec(shard="tensor", ranks=ranks), command)
    log = out.with_name("log.txt")
    with open(log, "wb") as output:
        # stdin a pipe never written: mlx.launch polls it, and spins on one at its end.
        run = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=output,
                               stderr=subprocess.STDOUT,
                               env={**os.environ, "SPECDECK_SESSIONS_DIR": str(out.parent)})
        run.wait()
        run.stdin.close()
    if not out.exists():
        sys.exit(f"{ranks} rank(s), {latency_ms} ms: no figures\n{log.read_text()[-3000:]}")
    return json.loads(out.read_text())


def row(ranks: int, latency_ms: float, figures: dict) -> list[str]:
    costs = figures["group"]["pass_costs"]["group"]
    cells = figures["cells"]
    plain = next(c for c in cells if c["k"] is None)
    drafts = [c for c in cells if c["k"] is not None and c["speedup"] is not None]
    best = max(drafts, key=lambda c: c["speedup"])
    wrong = [c["k"] for c in cells if c["correct"] is False]
    return [f"{latency_ms:g}", str(ranks), f"{costs[0] * 1000:.2f}",
            *(f"{costs[n - 1] / costs[0]:.2f}" for n in SHOWN),
            f"{plain['tokens_per_s']:.0f}", f"{best['k']}", f"{best['speedup']:.2f}x",
            "all equal to plain" if not wrong else f"DIFFERS at k={wrong}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    demo = ROOT / "models" / "demo"
    parser.add_argument("--target", default=str(demo / "target"))
    parser.add_argument("--draft", default=str(demo / "draft"))
    parser.add_argument("--latency-ms", default="0,0.5",
                        help="simulated latency per collective, comma-separated (ms)")
    parser.add_argument("--ks", default="1,2,4,8")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.ks = [int(k) for k in str(args.ks).split(",")]
    if args.worker:
        args.latency_ms = float(args.latency_ms)
        worker(args)
        return
    header = ["latency ms", "ranks", "step ms", *(f"verify {n}" for n in SHOWN),
              "plain tok/s", "best k", "speedup", "check"]
    rows = []
    # One rank makes no collective: it pays no latency, so it runs once.
    runs = [(1, 0.0)] + [(2, float(v)) for v in args.latency_ms.split(",")]
    for ranks, latency in runs:
        started = time.perf_counter()
        rows.append(row(ranks, latency, measure(ranks, latency, args)))
        print(f"  {ranks} rank(s), {latency:g} ms: {time.perf_counter() - started:.0f} s",
              file=sys.stderr, flush=True)
    print("verify n: a verify pass of n tokens in target steps (a step: a pass of one)")
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    main()
