"""``auto`` (or another draft-length policy) against plain decoding, paired run by run,
and the loop's own plain steps.

Where every fixed k loses, ``auto`` should run as fast as plain decoding. What it can
lose there is of two kinds: its own (choosing each round, the rounds that try
drafting from plain steps) and the speculative loop's (a plain step run by the loop that
drafts, against ``engines.plain``'s). So each prompt runs four ways, in an order that
turns each repetition: plain, the strategy at ``auto``, the same loop held at plain
steps (a fixed k of 0: every round drafts nothing), and plain again. Each is timed
against the plain run of its repetition, and the ratios are summed up as a geometric
mean with its standard error and the spread of one pair (the standard deviation of the
log-ratios): this VM's single runs spread 10-15 %, pairs within a repetition far less.
Plain again against plain is what "noise" means here: the spread of a pair in which
nothing differs.

    python bench/auto_vs_plain.py [--family demo] [--strategy mtp|draft|ngram]
                                  [--policy auto|grow|pmin:P] [--max-tokens 128]
                                  [--reps 6] [--prompts a,b,FILE] [--variants FILE]

``--variants`` runs each policy of a file (``bench/auto_replay.py``'s kind, such as
``bench/auto_tries_doubling.py``) the same way, timed against plain and with the
policy's time over its own, so a change to ``auto`` is timed beside what it changed.

Prompts by name (``bench/draft_policies.py``'s, ``held_out/``'s, built-in ones) or text
files. The default is eight held-out prompts (written to measure the MTP head's auto on
2026-12-04). The machine's load (``os.getloadavg``) is printed before and after: on a
shared machine, a figure means little without it.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import mlx.core as mx  # noqa: E402

from auto_replay import load_module  # noqa: E402
from draft_policies import prompt_text  # noqa: E402
from specdeck.engines.measure.blas_threads import fit_blas_threads_to  # noqa: E402
from specdeck.engines.runs.compare import encode_prompt, machine_calibration  # noqa: E402
from specdeck.engines.core.config import DecodeSettings, parse_draft_count  # noqa: E402
from specdeck.engines.proposers.draft import DraftModel  # noqa: E402
from specdeck.engines.auto.length import DraftLength, FixedLength  # noqa: E402
from specdeck.engines.core.events import Round  # noqa: E402
from specdeck.engines.models.families import require_family  # noqa: E402
from specdeck.engines.models.loading import ModelStore  # noqa: E402
from specdeck.engines.proposers.mtp import MtpDrafter, load_mtp  # noqa: E402
from specdeck.engines.proposers.ngram import PromptLookup  # noqa: E402
from specdeck.engines.decode.sampling import KeyStream  # noqa: E402
from specdeck.engines.decode.speculative import run_speculative  # noqa: E402
from specdeck.engines.decode.run import Models, run_strategy  # noqa: E402

PROMPTS = "glacier,invoice,stackq,trainlate,jsonload,festival,tea,bitcount"
#: The settings field that holds each strategy's draft count.
COUNT = {"mtp": "mtp_depth", "draft": "num_draft_tokens", "ngram": "ngram_k"}


def load(family: str, strategy: str) -> Models:
    """The family's target (with its head, or its draft) and this machine's calibration."""
    found = require_family(family)
    store = ModelStore()
    target = store.get(found.target)
    fit_blas_threads_to(target)
    draft = store.get(found.draft) if strategy == "draft" else None
    calibration = machine_calibration(Path(found.target), Path(found.draft) if draft else None)
    mtp = load_mtp(target) if strategy == "mtp" else None
    return Models(target=target, draft=draft, mtp=mtp, calibration=calibration)


def runners(models: Models, strategy: str, policy: str, ids: list[int], n: int,
            variants: dict[str, Callable] | None = None
            ) -> dict[str, Callable[[], tuple[int, int]]]:
    """Each way to run the prompt: a call returns (tokens made, rounds that drafted).
    Each of ``variants`` (a name: a policy made from the most drafts and the
    calibration's prices, as ``auto`` is) runs the strategy's loop under that policy."""
    plain = DecodeSettings(max_tokens=n, stop_at_eos=False)
    auto = DecodeSettings(max_tokens=n, stop_at_eos=False, **{COUNT[strategy]: policy})
    calibration = models.mtp_calibration() if strategy == "mtp" else models.calibration
    prior = calibration.drafting_costs(strategy) if calibration else None

    def counted(events) -> tuple[int, int]:
        rounds = [e for e in events if isinstance(e, Round)]
        return sum(len(r.tokens) for r in rounds), sum(1 for r in rounds if r.drafted)

    def looped(settings: DecodeSettings, length: Callable[[], DraftLength]
               ) -> Callable[[], tuple[int, int]]:
        def run() -> tuple[int, int]:
            keys = KeyStream(0)
            proposer = {"mtp": lambda: MtpDrafter(models.mtp.head, settings, keys),
                        "draft": lambda: DraftModel(models.draft, settings, keys),
                        "ngram": lambda: PromptLookup.for_run(settings, models.target.tokenizer),
                        }[strategy]()
            return counted(run_speculative(models.target, proposer, ids, settings,
                                           {proposer.drafter(): length()}, keys))
        return run

    def plain_run() -> tuple[int, int]:
        return counted(run_strategy("plain", models, ids, plain))

    most = auto.max_drafts(strategy)
    return {"plain": plain_run,
            policy: lambda: counted(run_strategy(strategy, models, ids, auto)),
            **{name: looped(auto, lambda make=make: make(most, prior))
               for name, make in (variants or {}).items()},
            "plain steps": looped(plain, lambda: FixedLength(0)),
            "plain again": plain_run}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="demo")
    ap.add_argument("--strategy", choices=sorted(COUNT), default="mtp")
    ap.add_argument("--policy", type=parse_draft_count, default="auto")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--prompts", default=PROMPTS)
    ap.add_argument("--variants", help="a file whose VARIANTS maps names to policies (as "
                                       "bench/auto_replay.py's), each run beside auto")
    args = ap.parse_args()
    if args.reps * len(args.prompts.split(",")) < 2:
        ap.error("a standard error needs two pairs or more (--reps times the prompts)")
    variants = getattr(load_module(args.variants), "VARIANTS", {}) if args.variants else {}

    print("load average (1, 5, 15 min) before: %.2f %.2f %.2f" % os.getloadavg())
    models = load(args.family, args.strategy)
    if models.calibration is None:
        print("no calibration of these models on this machine: auto learns every cost "
              "from its own rounds (specdeck calibrate first to measure what a run gets)")
    ratios: dict[str, list[float]] = {args.policy: [], **{name: [] for name in variants},
                                      "plain steps": [], "plain again": []}
    against: dict[str, list[float]] = {name: [] for name in variants}
    print(f"{args.family} {args.strategy}, {args.max_tokens} tokens, {args.reps} repetitions: "
          "time over plain's in the same repetition (median), auto's drafting rounds")
    for name in args.prompts.split(","):
        ids = encode_prompt(models.target.tokenizer, prompt_text(name))
        ways = runners(models, args.strategy, args.policy, ids, args.max_tokens, variants)
        ways["plain"]()  # warm
        order = list(ways)
        seconds: dict[str, list[float]] = {way: [] for way in ways}
        drafting = []
        for rep in range(args.reps):
            for way in order[rep % len(order):] + order[:rep % len(order)]:
                mx.synchronize()
                start = time.perf_counter()
                made, drafted = ways[way]()
                mx.synchronize()
                seconds[way].append(time.perf_counter() - start)
                if made != args.max_tokens:
                    raise SystemExit(f"{way} on {name} made {made} tokens")
                if way == args.policy:
                    drafting.append(drafted)
        row = []
        for way in ratios:
            pairs = [a / b for a, b in zip(seconds[way], seconds["plain"])]
            ratios[way] += pairs
            row.append(f"{way} {statistics.median(pairs):.3f}")
        for variant in variants:
            against[variant] += [a / b for a, b in zip(seconds[args.policy], seconds[variant])]
        print(f"  {name:12s} " + "  ".join(row) + f"  (auto drafted {drafting} rounds)",
              flush=True)
    for way, values in [*((f"{way} / plain", v) for way, v in ratios.items()),
                        *((f"{args.policy} / {name}", v) for name, v in against.items())]:
        logs = [math.log(r) for r in values]
        error = statistics.stdev(logs) / math.sqrt(len(logs))
        print(f"{way}: {math.exp(statistics.mean(logs)):.3f} of its time "
              f"(geometric mean, +-{error:.3f} s.e., {len(logs)} pairs; one pair spreads "
              f"+-{statistics.stdev(logs):.3f})")
    print("load average (1, 5, 15 min) after: %.2f %.2f %.2f" % os.getloadavg())
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    raise SystemExit(main())
