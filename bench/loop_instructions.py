"""Instructions one more token costs in specdeck's loops and in mlx-lm's, counted by valgrind.

``bench/engine_overhead.py`` times the same loops, but this VM's paired ratios spread
+-15 % from one run to the next and hide a loop's few percent. An instruction count does
not move between runs: each loop (``engine_overhead.loops``) runs under callgrind for
``--short`` and for ``--long`` tokens, and the difference over the tokens between is what
a token costs the whole process (both threads: the Python loop and mlx's work), its start
and the models' loading left out. On the tiny pair (the default), where a forward pass is
mostly dispatch, that is the loop's own overhead at its worst. Instructions are not time
(a wait costs none, a cache miss many cycles): read it beside the timings.

    python bench/loop_instructions.py [--size tiny|small] [--short 16] [--long 144] [--jobs 2]

Each callgrind run takes a few minutes (it runs every instruction on a simulated CPU).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def run_child(loop: str, tokens: int, target: str, draft: str, k: int) -> None:
    """Run one loop once (inside callgrind)."""
    import resource

    # Under valgrind the open-files limit cannot be raised to what mlx-lm asks for on
    # import; it needs no more files here.
    raise_limit = resource.setrlimit

    def tolerant(which: int, limits: tuple[int, int]) -> None:
        try:
            raise_limit(which, limits)
        except ValueError:
            pass

    resource.setrlimit = tolerant
    sys.path[:0] = [str(ROOT / "bench")]
    from engine_overhead import loops

    from specdeck.engines.models.loading import ModelStore
    from specdeck.engines.decode.run import Models

    store = ModelStore()
    made = loops(Models(store.get(target), store.get(draft)), tokens, k)[loop]()
    if made != tokens:
        raise SystemExit(f"{loop} made {made} tokens, not {tokens}")


def count(loop: str, tokens: int, target: Path, draft: Path, k: int) -> int:
    """Instructions the whole process executes running ``loop`` for ``tokens``."""
    # One BLAS thread: numpy's OpenBLAS (loaded with the tokenizer's libraries) spins its
    # idle threads, and two runs of one loop differed by 5-22 M instructions (up to 4 %
    # of what 128 tokens cost); with one thread, by 0.08 M.
    quiet = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--child", loop, "--tokens", str(tokens), "--target", str(target),
         "--draft", str(draft), "-k", str(k)],
        capture_output=True, text=True, env=quiet)
    found = COLLECTED.search(done.stderr)
    if done.returncode or not found:
        raise SystemExit(f"{loop} at {tokens} tokens failed under valgrind:\n"
                         + done.stderr[-2000:])
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", help="a target folder (with --draft) instead of a "
                                          "random pair built on the fly")
    parser.add_argument("--draft")
    parser.add_argument("--size", choices=["tiny", "small"], default="tiny")
    parser.add_argument("-k", type=int, default=2)
    parser.add_argument("--short", type=int, default=16)
    parser.add_argument("--long", type=int, default=144)
    parser.add_argument("--jobs", type=int, default=2, help="callgrind runs at once")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.child, args.tokens, args.target, args.draft, args.k)
        return

    sys.path[:0] = [str(ROOT / "bench")]
    from engine_overhead import PAIRS, model_pair

    names = list(dict.fromkeys(name for pair in PAIRS for name in pair))
    with tempfile.TemporaryDirectory() as tmp:
        target, draft = model_pair(args.target, args.draft, args.size, Path(tmp))
        jobs = [(name, n) for name in names for n in (args.short, args.long)]
        with ThreadPoolExecutor(args.jobs) as pool:
            counts = dict(zip(jobs, pool.map(
                lambda job: count(job[0], job[1], target, draft, args.k), jobs)))
    per_token = {name: (counts[name, args.long] - counts[name, args.short])
                 / (args.long - args.short) for name in names}
    print(f"models: {target.name} + {draft.name}, k={args.k}; instructions per token between "
          f"{args.short} and {args.long} tokens (valgrind, whole process)")
    for name in names:
        print(f"  {name:15s} {per_token[name] / 1e6:8.3f} M")
    for ours, theirs in PAIRS:
        print(f"{ours} / {theirs} = {per_token[ours] / per_token[theirs]:.3f}")


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    main()
