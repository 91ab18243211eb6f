"""How long ``specdeck diff`` takes to line up two long outputs: difflib's SequenceMatcher
(what diff used) against ``specdeck.sessions.diff.token_opcodes`` (difflib on the stretches between
anchors), side by side in one run, on 20,000-token outputs of several shapes:

- ``zipf``: two unrelated outputs whose tokens follow a Zipf law (as words do);
- ``zipf, 300 edits``: one output and a copy with 300 tokens changed, inserted or deleted;
- ``20 words``: unrelated outputs over 20 tokens (the shape of ``bench/sessions.py``'s);
- ``loop``: an output that repeats one 40-token line, against a copy with edits.

Each result is checked (applying its edits to a gives b) and the edited tokens counted
(fewer is better: difflib's count is the reference). Times are CPU time of this process.

Run: python bench/diff_tokens.py [--tokens 20000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from difflib import SequenceMatcher
from pathlib import Path

from specdeck.blas import reexec_with_openblas

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdeck.sessions.diff import token_opcodes  # noqa: E402


def mutate(rng: random.Random, tokens: list[int], edits: int, vocab: int) -> list[int]:
    out = list(tokens)
    for _ in range(edits):
        i = rng.randrange(len(out))
        kind = rng.random()
        if kind < 0.4:
            out[i] = rng.randrange(vocab)
        elif kind < 0.7:
            out.insert(i, rng.randrange(vocab))
        else:
            del out[i]
    return out


def cases(n: int, rng: random.Random) -> dict[str, tuple[list[int], list[int]]]:
    zipf = [1 / (i + 1) for i in range(2048)]
    a = rng.choices(range(2048), zipf, k=n)
    line = rng.choices(range(2048), zipf, k=40)
    loop = (line * (n // 40 + 1))[:n]
    return {
        "zipf": (a, rng.choices(range(2048), zipf, k=n)),
        "zipf, 300 edits": (a, mutate(rng, a, 300, 2048)),
        "20 words": ([rng.randrange(20) for _ in range(n)], [rng.randrange(20) for _ in range(n)]),
        "loop, 30 edits": (loop, mutate(rng, loop, 30, 2048)),
    }


def applied(a: list[int], b: list[int], ops) -> list[int]:
    out = []
    for op, i1, i2, j1, j2 in ops:
        out += a[i1:i2] if op == "equal" else b[j1:j2]
    return out


def edited(ops) -> int:
    return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in ops if op != "equal")


def timed(fn):
    started = time.process_time()
    result = fn()
    return result, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    args = parser.parse_args()
    rng = random.Random(0)
    print(f"{'case':<16} {'difflib s':>10} {'specdeck s':>11} {'speedup':>8} "
          f"{'edited (difflib)':>17} {'edited (specdeck)':>18}")
    for name, (a, b) in cases(args.tokens, rng).items():
        ref, ref_s = timed(lambda: SequenceMatcher(None, a, b, autojunk=False).get_opcodes())
        ops, ops_s = timed(lambda: token_opcodes(a, b))
        assert applied(a, b, ops) == b and applied(a, b, ref) == b
        print(f"{name:<16} {ref_s:>10.2f} {ops_s:>11.3f} {ref_s / max(ops_s, 1e-6):>7.0f}x "
              f"{edited(ref):>17,} {edited(ops):>18,}")


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    main()
