"""``specdeck calibrate``: will speculation help on this machine, and at which k?

Times a target step, verify passes of 2..17 tokens, a draft step and (when the target has
one) an MTP head step (``engines.pass_timing``), caches them for this machine and model
pair (``engines.calibration``), and prints what they predict: for each k the cost of a
round and the acceptance at which it breaks even with plain decoding, the best k at the
acceptance given (``--acceptance``), a small chart, and the best k over a range of
acceptances. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from specdeck.commands.options import add_model_options, say
from specdeck.engines.measure.calibration import (
    GUESS_PROMPTS, GUESS_TOKENS, REPS, TABLE_ACCEPTANCES, WARMUP, Calibration,
)
from specdeck.engines.core.config import MAX_DRAFT_TOKENS, MAX_MTP_DEPTH
from specdeck.engines.core.formatting import duration, percent, times
from specdeck.commands.progress_line import ProgressLine
from specdeck.hosts.stopping import Stopping
from specdeck.safe_text.plain import visible

#: The k values the table and the chart show (every k is measured; these read well).
SHOWN_KS = (1, 2, 3, 4, 6, 8, 12, 16)
#: Characters of the chart's longest bar.
BAR_WIDTH = 40


def _share(value: str) -> float:
    try:
        share = float(value.rstrip("%")) / (100 if value.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an acceptance like 0.6 or 60%, got {value!r}")
    if not 0.0 <= share <= 1.0:
        raise argparse.ArgumentTypeError(f"an acceptance is from 0 to 1 (got {value!r})")
    return share


def add_parser(sub: argparse._SubParsersAction) -> None:

    p = sub.add_parser(
        "calibrate", help="will speculation help on this machine? time a target's passes "
        "and a draft step, and predict the best k",
        description="Time a target step, verify passes of 2..17 tokens, a draft step and "
        "an MTP step (when the target has an MTP head) without generating an answer; print "
        "the acceptance at which each k breaks even with plain decoding and the best k for "
        "an acceptance. Acceptance here is the chance a draft is kept given that the ones "
        "before it were (the same at every position). The result is cached for this "
        "machine and model pair; the estimate before a run uses it.")
    p.set_defaults(run=run)
    add_model_options(p, command=True)
    p.add_argument("--target", help="target model: a directory or a Hugging Face id "
                   "(default: the built-in demo target)")
    p.add_argument("--draft", help="draft model (default with the demo target: the demo draft)")
    p.add_argument("--acceptance", type=_share, default=0.6,
                   help="the acceptance to predict the best k for (0.6 or 60%%; "
                   "default %(default)s)")
    p.add_argument("--reps", type=int, default=REPS,
                   help="timed repetitions of each pass (default %(default)s)")
    p.add_argument("--warmup", type=int, default=WARMUP,
                   help="untimed rounds first (default %(default)s)")
    p.add_argument("--cached", action="store_true",
                   help="show the cached calibration of this pair; measure nothing")
    p.add_argument("--json", action="store_true", help="print the calibration as JSON")


def report(cal: Calibration, acceptance: float) -> list[str]:
    """What ``calibrate`` prints about a calibration: its steps, a table per k, the best
    k at ``acceptance`` with a chart, and the best k over ``TABLE_ACCEPTANCES``."""
    proposers = cal.proposers
    worst = max(t.spread for t in (*cal.passes, cal.draft_step, cal.mtp_step) if t)
    lines = [f"median of {cal.reps} repetitions each (largest robust spread "
             f"{percent(worst)}), measured {cal.measured}"]
    step = f"target step {duration(cal.target_step.seconds)}"
    works = [(p, timing) for p in proposers if (timing := cal.round_overhead(p))]
    if cal.plain_step and works:
        step += (f"; in the decoding loop a plain step {duration(cal.plain_step.seconds)}, "
                 "a round's own work " + ", ".join(
                     duration(timing.seconds) + (f" ({p})" if len(works) > 1 else "")
                     for p, timing in works))
    for proposer in proposers:
        timing = cal.step_timing(proposer)
        step += (f"; {proposer} step {duration(timing.seconds)} "
                 f"({cal.proposer_step(proposer):.2f} plain steps)")
    lines += [step, ""]
    if not proposers:
        lines.append("no draft model and no MTP head: only the verify passes were timed")
    header = f"{'k':>3}  {'verify pass':>19}"
    for proposer in proposers:
        header += f"  {proposer + ' round':>11}  {'break-even':>10}  {'at ' + percent(acceptance):>7}"
    lines.append(header)
    for k in range(1, MAX_DRAFT_TOKENS + 1):
        if k not in SHOWN_KS:
            continue
        passes = cal.passes[k]
        row = f"{k:>3}  {duration(passes.seconds):>8} {cal.pass_steps()[k]:>5.2f} steps"
        for proposer in proposers:
            needed = cal.break_even(proposer, k)
            row += (f"  {cal.round_cost(proposer, k):>5.2f} steps"
                    f"  {'never' if needed is None else percent(needed):>10}"
                    f"  {times(cal.speedup(proposer, k, acceptance)):>7}")
        lines.append(row)
    for proposer in proposers:
        k, speed = cal.best_k(proposer, acceptance)
        best = f"k={k}, {times(speed)}" if k else "plain decoding (no k beats it)"
        lines += ["", f"{proposer} at {percent(acceptance)} acceptance: best {best}"]
        lines += speedup_chart([(k, cal.speedup(proposer, k, acceptance)) for k in SHOWN_KS])
    for proposer in proposers:
        lines += typical_lines(cal, proposer)
    if proposers:
        lines += ["", "best k by acceptance (0: plain decoding wins)",
                  "acceptance " + "".join(f"{percent(a):>7}" for a in TABLE_ACCEPTANCES)]
        for proposer in proposers:
            best = [cal.best_k(proposer, a) for a in TABLE_ACCEPTANCES]
            lines.append(f"{proposer + ' k':<11}" + "".join(f"{k:>7}" for k, _ in best))
            lines.append(f"{'speedup':<11}" + "".join(f"{times(s):>7}" for _, s in best))
    return lines


#: How ``report`` names what each drafter's typical survival was judged on.
JUDGED = {"draft": "the draft's greedy guesses", "mtp": "the MTP head's greedy drafts"}


def typical_lines(cal: Calibration, proposer: str) -> list[str]:
    """What ``proposer``'s drafts on the built-in prompts predict (``typical_best_k``):
    its survival by position and its best k there; none when they were not judged."""
    typical = cal.typical_best_k(proposer)
    if typical is None:
        return []
    k, speed = typical
    survival = cal.typical_survival(proposer)
    best = f"best k={k}, {times(speed)}" if k else "plain decoding wins (no k beats it)"
    return ["", f"{JUDGED[proposer]} on the built-in {' and '.join(GUESS_PROMPTS)} "
            f"prompts ({GUESS_TOKENS} tokens each):",
            f"  right at {percent(survival[0])} of tokens; survival by position "
            + " ".join(percent(s) for s in survival[:4]) + " ...",
            f"  at that: {best}"]


def speedup_chart(points: list[tuple[int, float]], width: int = BAR_WIDTH) -> list[str]:
    """A bar per k, as long as its predicted speedup; ``|`` marks 1.00x (plain decoding)
    where a bar stops short of it."""
    top = max([1.0, *(s for _, s in points)])
    plain = min(round(width / top), width)
    lines = []
    for k, speed in points:
        bar = "█" * round(width * speed / top)
        if len(bar) <= plain:
            bar = bar.ljust(plain) + "|"
        lines.append(f"  k={k:<3}{bar.ljust(width + 1)} {times(speed)}")
    return lines + ["  (| marks 1.00x: plain decoding)"]


def run(args: argparse.Namespace) -> int:
    import orjson
    from specdeck.engines.measure.calibration import load_calibration
    from specdeck.engines.core.errors import UserError
    from specdeck.engines.models.families import models_for

    target, draft = models_for(args.family, args.target, args.draft)
    if args.cached:
        from specdeck.engines.models.catalog import resolve

        cal = load_calibration(resolve(target), resolve(draft) if draft else None, say)
        if cal is None:
            raise UserError("no calibration of this pair on this machine yet: run "
                            "specdeck calibrate without --cached")
    else:
        if args.reps < 1 or args.warmup < 0:
            raise UserError("--reps must be at least 1 and --warmup at least 0")
        with Stopping("interrupt"):  # SIGTERM and SIGHUP end it as Ctrl+C does
            cal = _measure(target, draft, args)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(cal.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
        return 0
    names = visible(target, 120) + (f" with {visible(draft, 120)}" if draft else "")
    print(f"specdeck calibrate: {names}")
    for line in report(cal, args.acceptance):
        print(line)
    return 0


def _measure(target: str, draft: str | None, args: argparse.Namespace) -> Calibration:
    """Load the pair, time it with progress on stderr, cache the result."""
    from specdeck.engines.measure.blas_threads import fit_blas_threads_to
    from specdeck.engines.measure.calibration import save_calibration
    from specdeck.engines.models.catalog import describe_dir
    from specdeck.engines.runs.compare import encode_prompt
    from specdeck.engines.core.errors import ModelError
    from specdeck.engines.measure.guess_probe import (
        greedy_output, guesses_right, mtp_runs, survival_of_guesses, survival_of_runs,
    )
    from specdeck.engines.models.loading import ModelStore, check_pair
    from specdeck.engines.proposers.mtp import load_mtp
    from specdeck.engines.measure.pass_timing import (
        CalibrationProgress, measure_calibration, measure_loop,
    )
    from specdeck.prompts import get_prompt
    from specdeck.sessions.store import why_not

    store = ModelStore()
    target_path = store.resolve(target)
    if draft:
        draft_path = store.resolve(draft)
        check_pair(target, draft, store.tokenizer(target_path), store.tokenizer(draft_path))
    say(f"loading {target}")
    loaded = store.get(target, dtype=args.dtype)
    fit_blas_threads_to(loaded)
    draft_model = None
    if draft:
        say(f"loading {draft}")
        draft_model = store.get(draft, dtype=args.dtype)
    mtp = None
    if describe_dir(target_path).has_mtp_head:
        try:
            mtp = load_mtp(loaded)
        except ModelError as exc:
            say(f"no MTP step: {exc}")
    prompt = encode_prompt(loaded.tokenizer, get_prompt("code").text, chat=False)

    line = ProgressLine()

    def progress(p: CalibrationProgress) -> None:
        line.show(f"specdeck calibrate: {p.done}/{p.total} passes timed ({p.label})",
                  last=p.done == p.total)

    cal = measure_calibration(loaded, prompt, draft_model, mtp, reps=args.reps,
                              warmup=args.warmup, progress=progress)
    line.end()
    if cal.proposers:
        say("timing the decoding loop (a few short runs)")
        cal = measure_loop(cal, loaded, prompt, draft_model, mtp)
    guess_prompts = [encode_prompt(loaded.tokenizer, get_prompt(name).text)
                     for name in GUESS_PROMPTS]
    # The target answers each once; the draft's guesses and the head's drafts judge it.
    answers = ([greedy_output(loaded, p) for p in guess_prompts]
               if draft_model is not None or mtp is not None else [])
    if draft_model is not None:
        say(f"judging the draft's guesses on the built-in {' and '.join(GUESS_PROMPTS)} "
            f"prompts ({GUESS_TOKENS} tokens each)")
        judged = [guesses_right(draft_model, p, answer)
                  for p, answer in zip(guess_prompts, answers)]
        cal = replace(cal, guess_survival=survival_of_guesses(judged) or None)
    if mtp is not None:
        say("judging the MTP head's drafts on the same prompts")
        runs = [mtp_runs(mtp, p, answer) for p, answer in zip(guess_prompts, answers)]
        cal = replace(cal, mtp_survival=survival_of_runs(runs, MAX_MTP_DEPTH) or None)
    try:
        say(f"cached in {save_calibration(cal, target_path, draft_model.path if draft_model else None)}")
        if draft_model is not None:
            # What a run without the draft model reads (MTP, prompt lookup): the same
            # target measured, without what only the pair has.
            alone = save_calibration(cal.target_alone(), target_path, None)
            say(f"and for the target alone in {alone}")
    except OSError as exc:
        say(f"warning: the calibration was not cached ({why_not(exc)})")
    return cal
