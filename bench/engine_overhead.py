"""What observability costs: specdeck's strategies against mlx-lm's own loops.

Runs, interleaved and repeated, on the same models and prompt:
  specdeck ``draft``  vs  ``mlx_lm.generate.speculative_generate_step``
  specdeck ``plain``  vs  ``mlx_lm.generate.generate_step``
  the speculative loop drafting nothing (the plain steps of ``auto``, of prompt lookup
  finding nothing to copy)  vs  ``generate_step``
and prints tokens/s medians and the ratio specdeck / mlx-lm (target >= 0.97 on the tiny
pair, >= 1.0 on the small one).

Each repetition runs the five loops back to back, in an order that rotates from one
repetition to the next, and each specdeck run is divided by the mlx-lm run of the same
repetition: load from other processes drifts slowly, so these paired ratios scatter far
less than the tokens/s do. The median ratio is printed with its interquartile range.

Models: ``--target``/``--draft`` directories, or a random pair built on the fly
(``--size small``: a ~25M-parameter target with a ~3M draft sharing its embeddings, so a
forward pass costs real compute; ``--size tiny``: the test fixtures, where per-round Python
overhead dominates and the ratio is a worst case).

    python bench/engine_overhead.py --size small --tokens 128 --reps 15

``--against REV`` adds the speculative loop drafting nothing and the ``draft`` strategy as
they were at a git revision (its whole ``engines/``, imported beside this one), paired
with this one's: whether a change to the loop made its plain steps or its drafting
rounds faster.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Callable

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import mlx.core as mx  # noqa: E402
from mlx_lm.generate import generate_step, speculative_generate_step  # noqa: E402

import specdeck.engines as this_engines  # noqa: E402
from revisions import engines_at  # noqa: E402
from specdeck.engines.core.config import (  # noqa: E402
    DTYPES, INSPECTOR_ALTERNATIVES, DecodeSettings,
)
from specdeck.engines.measure.blas_threads import fit_blas_threads_to  # noqa: E402
from specdeck.engines.models.loading import ModelStore  # noqa: E402
from specdeck.engines.decode.run import Models, run_strategy  # noqa: E402

PROMPT = "def fibonacci(n):\n    if n < 2:\n        return n\n    return"


def build_pair(size: str, root: Path) -> tuple[Path, Path]:
    from specdeck.testing.tiny_models import build_family, build_model, build_tokenizer

    if size == "tiny":
        family = build_family(root)
        return family["llama_target"], family["llama_draft"]
    tok = build_tokenizer(root / "tokenizer")
    target = build_model(root / "target", "llama", seed=1, tokenizer_dir=tok,
                         hidden_size=512, num_layers=8, num_heads=8, num_kv_heads=4)
    draft = build_model(root / "draft", "llama", seed=2, tokenizer_dir=tok,
                        hidden_size=512, num_layers=1, num_heads=8, num_kv_heads=4,
                        share_embeddings_from=target)
    return target, draft


def model_pair(target: str | None, draft: str | None, size: str,
               root: Path) -> tuple[Path, Path]:
    """The folders ``--target`` and ``--draft`` name, or a ``size`` pair built in ``root``."""
    if target and draft:
        return Path(target), Path(draft)
    return build_pair(size, root)


#: Each line of the report: a specdeck loop and the mlx-lm loop it is measured against.
PAIRS = (("specdeck draft", "mlx-lm draft"), ("specdeck plain", "mlx-lm plain"),
         ("plain steps", "mlx-lm plain"))


def made(events) -> int:
    """The tokens a run's events add up to."""
    return sum(len(getattr(e, "tokens", ())) for e in events)


def module_of(engines: ModuleType, name: str) -> ModuleType:
    """``engines``'s module ``name`` (``decode.sampling``), or, at a revision from before
    engines/ had folders, its flat twin (``sampling``); ``new|old`` names a module by
    its name now and at older revisions."""
    tried = [f"{engines.__name__}.{each}" for dotted in name.split("|")
             for each in (dotted, dotted.split(".")[-1])]
    for module in tried:
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError:
            pass
    raise ModuleNotFoundError(f"none of {', '.join(tried)}")


def plain_steps_loop(engines: ModuleType, models: Models, ids: list[int],
                     n: int, alternatives: int) -> Callable[[], int]:
    """The speculative loop of ``engines`` (this tree's or a revision's) drafting
    nothing: prompt lookup whose match would need more tokens than any run holds, so
    every round is a plain step, as auto's plain steps and an unmatched lookup are
    (recording ``alternatives`` per position)."""
    names = {"speculative": "decode.speculative", "ngram": "proposers.ngram",
             "lengths": "auto.length|auto.draft_length", "sampling": "decode.sampling"}
    parts = {key: module_of(engines, name) for key, name in names.items()}
    settings = DecodeSettings(max_tokens=n, stop_at_eos=False, alternatives=alternatives)

    def run() -> int:
        return made(parts["speculative"].run_speculative(
            models.target, parts["ngram"].PromptLookup(1 << 30), ids, settings,
            {"ngram": parts["lengths"].FixedLength(4)}, parts["sampling"].KeyStream(0)))
    return run


def draft_loop(engines: ModuleType, models: Models, ids: list[int], n: int, k: int,
               alternatives: int) -> Callable[[], int]:
    """The ``draft`` strategy of ``engines`` (a revision's), as ``loops`` runs this tree's."""
    run, config = module_of(engines, "decode.run|run"), module_of(engines, "core.config|config")
    settings = config.DecodeSettings(max_tokens=n, num_draft_tokens=k, stop_at_eos=False,
                                     alternatives=alternatives)
    pair = run.Models(models.target, models.draft)
    return lambda: made(run.run_strategy("draft", pair, ids, settings))


def loops(models: Models, ids: list[int], n: int, k: int,
          alternatives: int) -> dict[str, Callable[[], int]]:
    """Each loop of ``PAIRS`` on ``models`` and the prompt ``ids``: a call runs it for
    ``n`` tokens (k drafts a round; ``alternatives`` recorded per position, as the app's
    inspector asks) and returns the tokens it made."""
    prompt = mx.array(ids)
    settings = DecodeSettings(max_tokens=n, num_draft_tokens=k, stop_at_eos=False,
                              alternatives=alternatives)

    def ours(name: str) -> Callable[[], int]:
        return lambda: made(run_strategy(name, models, ids, settings))

    def mlx_draft() -> int:
        return sum(1 for _ in speculative_generate_step(
            prompt, models.target.model, models.draft.model, num_draft_tokens=k, max_tokens=n))

    def mlx_plain() -> int:
        return sum(1 for _ in generate_step(prompt, models.target.model, max_tokens=n))

    return {"specdeck draft": ours("draft"), "mlx-lm draft": mlx_draft,
            "specdeck plain": ours("plain"), "mlx-lm plain": mlx_plain,
            "plain steps": plain_steps_loop(this_engines, models, ids, n, alternatives)}


def timed(fn: Callable[[], int]) -> float:
    """Tokens per second of one run."""
    mx.synchronize()
    start = time.perf_counter()
    n = fn()
    mx.synchronize()
    return n / (time.perf_counter() - start)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target")
    parser.add_argument("--draft")
    parser.add_argument("--size", choices=["tiny", "small"], default="small")
    parser.add_argument("-k", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--dtype", choices=DTYPES, default="fast",
                        help="fast: half-precision weights cast to float32 on the CPU "
                             "backend; native: as stored, as mlx_lm generate runs them")
    parser.add_argument("--alternatives", type=int, default=0,
                        help="top alternatives specdeck records per position (the app: "
                             f"{INSPECTOR_ALTERNATIVES})")
    parser.add_argument("--prompts", metavar="NAMES",
                        help="comma-separated prompts of --prompt-folder (default: one "
                             "code prompt); each repetition runs every loop on each")
    parser.add_argument("--prompt-folder", default="held_out", metavar="NAME",
                        help="the folder of bench/ that --prompts names (held_out_chat: "
                             "six chat prompts no loop change was tuned on)")
    parser.add_argument("--against", metavar="REV",
                        help="also time the loop's plain steps and draft as at this git "
                             "revision")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        target_dir, draft_dir = model_pair(args.target, args.draft, args.size, Path(tmp))
        store = ModelStore()
        models = Models(store.get(str(target_dir), dtype=args.dtype),
                        store.get(str(draft_dir), dtype=args.dtype))
        # OpenBLAS's threads as the app runs this target (one below 64 MB of weights),
        # for both loops: two threads on the tiny pair time a set-up no run uses.
        threads = fit_blas_threads_to(models.target)
        n = args.tokens
        texts = ([(ROOT / "bench" / args.prompt_folder / f"{name}.txt").read_text()
                  for name in args.prompts.split(",")] if args.prompts else [PROMPT])
        then, drafted = f"plain steps ({args.against})", f"draft ({args.against})"
        engines = engines_at(args.against, Path(tmp)) if args.against else None
        runs: dict[str, list[Callable[[], int]]] = {}
        for text in texts:
            ids = models.target.tokenizer.encode(text)
            for name, fn in loops(models, ids, n, args.k, args.alternatives).items():
                runs.setdefault(name, []).append(fn)
            if engines is not None:
                runs.setdefault(then, []).append(plain_steps_loop(engines, models, ids, n,
                                                                  args.alternatives))
                runs.setdefault(drafted, []).append(draft_loop(engines, models, ids, n, args.k,
                                                               args.alternatives))
        pairs = PAIRS
        if args.against:
            pairs += ((then, "mlx-lm plain"), ("plain steps", then),
                      (drafted, "mlx-lm draft"), ("specdeck draft", drafted))
        names = list(runs)
        for fns in runs.values():  # warm-up
            fns[0]()
        # results[name][rep * prompts + prompt]: paired across names by position.
        results: dict[str, list[float]] = {name: [] for name in runs}
        for rep in range(args.reps):
            for p in range(len(texts)):
                turn = (rep + p) % len(names)
                for name in names[turn:] + names[:turn]:
                    results[name].append(timed(runs[name][p]))

    print(f"models: {target_dir.name} + {draft_dir.name} ({args.dtype}), k={args.k}, "
          f"{n} tokens, {len(texts)} prompt(s), {args.alternatives} alternatives, "
          f"{args.reps} interleaved repetitions, device {mx.default_device()}, "
          f"OpenBLAS threads {threads or 'as started'}")
    for name, values in results.items():
        q1, med, q3 = quartiles(values)
        print(f"  {name:15s} {med:8.1f} tok/s  (quartiles {q1:.1f}-{q3:.1f})")
    for ours_name, theirs in pairs:
        paired = [a / b for a, b in zip(results[ours_name], results[theirs])]
        q1, med, q3 = quartiles(paired)
        medians = statistics.median(results[ours_name]) / statistics.median(results[theirs])
        print(f"{ours_name} / {theirs} = {med:.3f}  (paired, quartiles {q1:.3f}-{q3:.3f}; "
              f"ratio of medians {medians:.3f})")


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    main()
