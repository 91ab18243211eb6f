"""OpenBLAS on one thread against its own count, side by side in one run, for the demo
family's target and (once fetched) smollm2's: what ``engines.blas_threads`` decides
from. Each measurement is a fresh process (OpenBLAS's threads, once woken, keep a core
busy for a while after: switching in one process hides most of the difference) that
sets the count as specdeck does, before its first product, then decodes plainly at
temperature 0 (a warm-up run, then one timed); the two settings take turns. Prints each
one's median tokens/s, its robust CV, and the ratio.

    python bench/blas_threads.py --reps 5 --max-tokens 128
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from specdeck.blas import reexec_with_openblas


def child(family: str, threads: int, max_tokens: int) -> None:
    """One measurement: print the tokens/s of a plain run with ``threads`` (0: as
    OpenBLAS started)."""
    from specdeck.engines.measure import blas_threads
    from specdeck.engines.runs.compare import encode_prompt
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.models.families import require_family
    from specdeck.engines.models.loading import ModelStore
    from specdeck.engines.core.stats import compute_stats
    from specdeck.engines.decode.run import Models, run_strategy
    from specdeck.prompts import get_prompt

    lib, started = blas_threads._openblas()
    lib.openblas_set_num_threads(threads or started)
    models = Models(ModelStore().get(require_family(family).target))
    ids = encode_prompt(models.target.tokenizer, get_prompt("prose").text)
    settings = DecodeSettings(max_tokens=max_tokens, stop_at_eos=False)
    list(run_strategy("plain", models, ids, settings))
    print(compute_stats(list(run_strategy("plain", models, ids, settings))).tokens_per_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--child", nargs=2, metavar=("FAMILY", "THREADS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.max_tokens)
        return 0

    from specdeck.engines.measure import blas_threads
    from specdeck.engines.core.errors import ModelError
    from specdeck.engines.models.families import require_family
    from specdeck.engines.core.stats import median, robust_cv

    found = blas_threads._openblas()
    if found is None:
        print("no OpenBLAS in this process: preload it (see the docstring)")
        return 1
    started = found[1]
    print(f"{'family':<8} {'1 thread tok/s':>16} {f'{started} threads tok/s':>18} {'1 / n':>7}")
    for family in ("demo", "smollm2"):
        try:
            require_family(family)
        except ModelError:
            print(f"{family:<8} not fetched")
            continue
        rates: dict[int, list[float]] = {1: [], 0: []}
        for _ in range(args.reps):
            for threads in rates:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", family, str(threads),
                     "--max-tokens", str(args.max_tokens)],
                    check=True, capture_output=True, text=True).stdout
                rates[threads].append(float(out.split()[-1]))
        one, many = median(rates[1]), median(rates[0])
        print(f"{family:<8} {one:>9.1f} (CV {robust_cv(rates[1]):.2f}) "
              f"{many:>10.1f} (CV {robust_cv(rates[0]):.2f}) {one / many:>6.2f}x")
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    sys.exit(main())
