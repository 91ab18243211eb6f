"""Prompt lookup and the draft model against plain on held-out chat prompts whose
answer reuses the prompt's text (what bare ``specdeck`` opens on).

Three chat prompts written for this check and kept out of ``prompts/`` (a summary, a
rewrite and a translation of a paragraph given in the prompt) run on the smollm2 family
at temperature 0, each strategy warmed up first. Each repetition runs plain, ngram and
draft one after another, the order turning every repetition, and each run's decode
speed (tok/s, the prefill left out, as the app's panes count it) is divided by the
plain run of the same repetition: on a shared machine only a ratio measured side by
side means anything. Per prompt it prints each strategy's acceptance, the median of the
ratios and their range; the load average before and after says how busy the machine
was. Every run's tokens are checked against plain's (speculation is lossless).
``--against REV`` adds prompt lookup as it was at a git revision (``ngram@REV``), run by
that revision's own code in the same rotation.

    python bench/first_impression.py [--reps 5] [--max-tokens 128] [--prompts a,FILE,FOLDER]
        [--strategies plain,ngram] [--against REV]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from importlib import import_module
from pathlib import Path
from typing import Any, Callable

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specdeck.engines.core.config import DecodeSettings  # noqa: E402
from specdeck.engines.core.events import Round  # noqa: E402
from specdeck.engines.core.stats import compute_stats  # noqa: E402
from specdeck.engines.decode.run import Models, run_strategy  # noqa: E402
from specdeck.engines.measure.blas_threads import fit_blas_threads_to  # noqa: E402
from specdeck.engines.models.families import require_family  # noqa: E402
from specdeck.engines.models.loading import ModelStore  # noqa: E402
from specdeck.engines.runs.compare import encode_prompt  # noqa: E402
from revisions import engines_at  # noqa: E402

#: Held out: written for this check, never in ``prompts/``, no setting chosen on them.
HELD_OUT = {
    "summarise": (
        "Summarise this notice in two sentences.\n\n"
        "From Monday 3 March, household recycling in the Riverside district will be "
        "collected every second Thursday instead of every Tuesday. Green bins for paper and "
        "cardboard go out on the first Thursday, blue bins for glass, cans and plastic "
        "bottles on the second. Bins must be at the kerb by 7 am and brought back in by the "
        "evening. Residents who miss a collection can take their recycling to the depot on "
        "Mill Lane, which is open every day from 8 am to 6 pm."),
    "rewrite": (
        "Rewrite this product description in a friendlier tone, keeping every detail.\n\n"
        "The Trailhead 28 is a 28-litre daypack made of recycled nylon. It has a padded "
        "laptop sleeve that fits screens up to 15 inches, two side pockets for water "
        "bottles, and a front pocket with a key clip. The shoulder straps are padded and "
        "adjustable, and the back panel has mesh to let air through. It weighs 850 grams "
        "and comes in black, olive and rust."),
    "translate": (
        "Translate this message into French.\n\n"
        "Hello Marie, the train to Lyon on Friday leaves at 9:15 from platform 4, not at "
        "8:45 as we said. I have your ticket, so let us meet at the café next to the "
        "station at 8:50. If you are late, call me on my mobile and I will wait for you. "
        "See you on Friday, Paul."),
}
STRATEGIES = ("plain", "ngram", "draft")


def prompt_text(name: str) -> str:
    """A held-out prompt by name, else a text file, else a built-in prompt by key."""
    from specdeck.prompts import get_prompt

    if name in HELD_OUT:
        return HELD_OUT[name]
    if Path(name).is_file():
        return Path(name).read_text(encoding="utf-8")
    return get_prompt(name).text


def prompt_names(spec: str) -> list[str]:
    """Names, files and folders (their ``.txt`` files, sorted) from a comma list."""
    names: list[str] = []
    for name in spec.split(","):
        folder = Path(name)
        names += sorted(map(str, folder.glob("*.txt"))) if folder.is_dir() else [name]
    return names


def runners(strategies: tuple[str, ...], models: Models, engines: Any, against: str
            ) -> dict[str, Callable[[list[int], DecodeSettings], tuple[Any, list[int]]]]:
    """Each strategy's run, as (statistics, tokens) of a prompt under settings; with
    ``engines`` (a revision's), ``ngram@REV`` too, measured by that revision's code."""
    def ours(strategy: str) -> Callable[[list[int], DecodeSettings], tuple[Any, list[int]]]:
        def run(ids: list[int], settings: DecodeSettings) -> tuple[Any, list[int]]:
            events = list(run_strategy(strategy, models, ids, settings))
            return compute_stats(events), [t for e in events if isinstance(e, Round)
                                           for t in e.tokens]
        return run

    def then(ids: list[int], settings: DecodeSettings) -> tuple[Any, list[int]]:
        config, ngram, events_, stats = (import_module(f"{engines.__name__}.{name}") for name in (
            "core.config", "proposers.ngram", "core.events", "core.stats"))
        # The revision's own defaults (its n and k), at this run's length.
        events = list(ngram.run(models, ids, config.DecodeSettings(max_tokens=settings.max_tokens)))
        rounds = [e for e in events if isinstance(e, events_.Round)]
        return stats.compute_stats(events), [t for e in rounds for t in e.tokens]

    runs = {strategy: ours(strategy) for strategy in strategies}
    if engines is not None:
        runs[f"ngram@{against}"] = then
    return runs


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompts", default=",".join(HELD_OUT),
                    help="held-out prompts by name, text files, folders of them or "
                         "built-in prompts")
    ap.add_argument("--strategies", default=",".join(STRATEGIES),
                    help="plain first, then the strategies measured against it")
    ap.add_argument("--against", metavar="REV",
                    help="also prompt lookup as it was at this git revision")
    args = ap.parse_args()
    strategies = tuple(args.strategies.split(","))
    if strategies[0] != "plain" or len(strategies) < 2:
        ap.error("--strategies starts with plain and names at least one other")

    family = require_family("smollm2")
    store = ModelStore()
    models = Models(target=store.get(family.target),
                    draft=store.get(family.draft) if "draft" in strategies else None)
    fit_blas_threads_to(models.target)
    with tempfile.TemporaryDirectory() as tmp:
        engines = engines_at(args.against, Path(tmp)) if args.against else None
        race(runners(strategies, models, engines, args.against), models, args)
    return 0


def race(runs: dict[str, Callable[[list[int], DecodeSettings], tuple[Any, list[int]]]],
         models: Models, args: argparse.Namespace) -> None:
    """Every prompt: each run warmed, then ``args.reps`` rotations; one line each."""
    strategies = tuple(runs)
    settings = DecodeSettings(max_tokens=args.max_tokens)
    load_before = os.getloadavg()
    print(f"smollm2, temperature 0, up to {args.max_tokens} tokens, {args.reps} repetitions, "
          f"{os.cpu_count()} cores; load average before {load_before[0]:.2f} "
          f"(1 min) {load_before[1]:.2f} (5 min)")
    print(f"{'prompt':<16} {'tokens':>6} {'plain tok/s':>11}  "
          + "  ".join(f"{s + ' accept':>13} {s + '/plain median (range)':>30}"
                      for s in strategies[1:]))
    for name in prompt_names(args.prompts):
        ids = encode_prompt(models.target.tokenizer, prompt_text(name))
        for strategy in strategies:  # warm each once, untimed
            runs[strategy](ids, DecodeSettings(max_tokens=8))
        speeds: dict[str, list[float]] = {s: [] for s in strategies}
        acceptance: dict[str, float | None] = {}
        tokens: dict[str, list[int]] = {}
        for rep in range(args.reps):
            turn = rep % len(strategies)
            for strategy in strategies[turn:] + strategies[:turn]:
                stats, made = runs[strategy](ids, settings)
                if tokens.setdefault(strategy, made) != made or made != tokens.get("plain", made):
                    raise SystemExit(f"{strategy} on {name}: its tokens differ from plain's")
                speeds[strategy].append(stats.tokens_per_s)
                acceptance[strategy] = stats.acceptance_rate
        cells = []
        for strategy in strategies[1:]:
            ratios = [s / p for s, p in zip(speeds[strategy], speeds["plain"])]
            cells.append(f"{acceptance[strategy]:>13.0%} "
                         f"{statistics.median(ratios):>19.2f}x ({spread(ratios)})")
        label = Path(name).stem if Path(name).is_file() else name
        print(f"{label:<16} {len(tokens['plain']):>6} "
              f"{statistics.median(speeds['plain']):>11.1f}  " + "  ".join(cells), flush=True)
    load_after = os.getloadavg()
    print(f"load average after {load_after[0]:.2f} (1 min) {load_after[1]:.2f} (5 min)")


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    raise SystemExit(main())
