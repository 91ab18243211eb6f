"""``specdeck compare``: strategies one after another on one prompt, headless or in the
playground."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specdeck.commands import group as group_command
from specdeck.commands.exit_status import EXIT_NOT_SAVED, EXIT_RUN_FAILED
from specdeck.commands.options import (
    add_run_options, check_output, group_from, require_models, say, settings_from,
    write_results,
)
from specdeck.hosts.stopping import Stopping, stopped_status
from specdeck.commands.playground import open_playground
from specdeck.engines.core.errors import UserError
from specdeck.engines.core.formatting import percent, plural, rate, times
from specdeck.engines.core.requests import CompareRequest, launched
from specdeck.engines.distributed.costs import PassCosts
from specdeck.safe_text.plain import MESSAGE_CHARS, visible


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="run strategies one after another on one prompt")
    p.set_defaults(run=run)
    add_run_options(p)
    p.add_argument("--headless", action="store_true", help="no app: print a summary")
    p.add_argument("--json", type=Path, help="write the result as JSON here")
    p.add_argument("--sessions-dir", type=Path, default=None, metavar="DIR",
                   help="save every run here (default: $SPECDECK_SESSIONS_DIR, else sessions/)")
    p.add_argument("--no-save", action="store_true", help="do not save the session")
    p.add_argument("--quiet", action="store_true",
                   help="--headless: one line per strategy (no text, lossless check or why-line)")
    p.add_argument("--show-text", metavar="STRATEGY",
                   help="--headless: print this strategy's text (default: the first's)")


def run(args: argparse.Namespace) -> int:
    if launched():  # one rank of a group mlx.launch started: every rank builds the request
        if not args.headless:
            raise UserError("under mlx.launch, run compare --headless (the playground "
                            "starts its own group: specdeck compare --shard tensor -n 2)")
        return group_command.compare(args, lambda: compare_request(args), report_compare)
    request = compare_request(args)
    if not args.headless:  # which checks the models itself
        return open_playground(request, args.sessions_dir, save=not args.no_save)
    require_models(request)
    if request.group is not None:
        if request.group.wants_launch:
            return group_command.launch(args, request)
        return group_command.compare(args, lambda: request, report_compare)
    from specdeck.engines.runs.compare import run_compare  # mlx-lm: ~1 s, for runs alone

    with Stopping("cancel") as stop:
        result = run_compare(request, progress=say, cancelled=stop.is_set)
    return report_compare(result, args, stop.is_set())


def compare_request(args: argparse.Namespace) -> CompareRequest:
    """The comparison the command line asks for, checked."""
    from specdeck.engines.models.families import family_of, models_for
    from specdeck.prompts import get_prompt, read_prompt

    target, draft = models_for(args.family, args.target, args.draft)
    family = family_of(args.family, target)
    request = CompareRequest(
        target=target,
        draft=draft,
        mtp_model=args.mtp_model,
        revision=args.revision,
        strategies=[s.strip() for s in args.strategies.split(",") if s.strip()],
        prompt=(get_prompt(family.prompt).text if args.prompt is None
                else read_prompt(args.prompt)),
        settings=settings_from(args),
        chat=args.chat,
        warmup_tokens=args.warmup_tokens,
        repeats=args.repeats,
        strict_memory=args.strict,
        force=args.force,
        group=group_from(args),
        dtype=args.dtype,
    )
    request.validate()
    if args.show_text is not None and args.show_text not in request.strategies:
        raise UserError(f"--show-text {args.show_text}: not one of the strategies run "
                        f"({', '.join(request.strategies)})")
    check_output(args.json, "--json")
    return request


def report_compare(result, args: argparse.Namespace, interrupted: bool) -> int:
    """Save the comparison (``engines.compare.CompareResult``) as a session, write
    ``--json`` and print one line per strategy; the command's exit status."""
    from specdeck.sessions.session import result_document

    if interrupted and not result.traces:
        say("interrupted before any strategy ran: nothing to save")
        return stopped_status()
    document = result_document(result)
    costs = PassCosts.from_dict((result.group or {}).get("pass_costs"))
    if not args.quiet:
        print_text(result.traces, args.show_text or next(iter(result.traces)))
    failed = False
    width = max(6, *map(len, [*document["strategies"], *result.not_run]))  # names line up
    indent = " " * (width + 2)
    for name, entry in document["strategies"].items():
        stats, done = entry["stats"], entry["done"] or {}
        accepted = stats["acceptance_rate"]
        speed = stats["speedup_vs_plain"]
        print(
            f"{name:>{width}}: {plural(stats['generated_tokens'], 'token')}, "
            f"{rate(stats['tokens_per_s'] or 0)}"
            + (f", acceptance {percent(accepted)}" if accepted is not None else "")
            + (f", {times(speed)} plain" if speed is not None and name != "plain" else "")
            + f", {done.get('reason', '?')}"
        )
        if not args.quiet:
            for line in explain_run(name, result):
                print(f"{indent}{visible(line, MESSAGE_CHARS)}")
        if costs is not None and name != "plain":
            print(f"{indent}{costs.line(result.request.settings.max_drafts(name))}")
        if done.get("reason") == "error":
            failed = True
            error = visible(str(done.get("error")), MESSAGE_CHARS)
            print(f"specdeck: {name} failed: {error}", file=sys.stderr)
    for name, why in result.not_run.items():  # asked for, but its models cannot run it
        failed = True
        print(f"{name:>{width}}: not run: {visible(why, MESSAGE_CHARS)}")
    sys.stdout.flush()
    saved = write_results(document, args.json, not args.no_save, args.sessions_dir, say)
    if interrupted:
        return stopped_status()
    if not saved:
        return EXIT_NOT_SAVED
    return EXIT_RUN_FAILED if failed else 0


def print_text(traces: dict, name: str) -> None:
    """One strategy's generated text under a rule naming it (control characters shown)."""
    from specdeck.safe_text.plain import printable

    trace = traces.get(name)
    if trace is None:
        return
    print(visible(f"── {name}: {plural(len(trace.tokens), 'token')} " + "─" * 40, 80))
    print(printable(trace.text).rstrip("\n"))
    print("─" * 80)


def explain_run(name: str, result) -> list[str]:
    """What a reader wants under a strategy's figures (``engines.compare.CompareResult``):
    how its timed runs spread, whether its output equals plain's at temperature 0, tokens
    per pass and the cost model's why-line."""
    from specdeck.sessions.diff import first_divergence, quoted
    from specdeck.engines.core.stats import (
        compute_stats, cost_model, plain_step_seconds, speedup, speedup_noise, spread,
        within_noise,
    )

    traces, measured = result.traces, result.measured
    trace, plain = traces[name], traces.get("plain")
    stats = compute_stats(trace.events)
    lines = []
    runs = measured.get(name, [])
    if len(runs) > 1:
        how = ("timed again after the others" if name == "plain" and result.request.repeats == 1
               else f"median of {len(runs)} runs")
        lines.append(f"{how}: " + ", ".join(f"{v:.1f}" for v in runs)
                     + f" tok/s ({percent(spread(runs))} apart)")
    if name == "plain" or plain is None:
        return lines
    if result.request.settings.sampling.temperature == 0:
        at = first_divergence(plain.tokens, trace.tokens)
        if at is None:
            lines.append(f"identical to plain ({plural(len(plain.tokens), 'token')})")
        else:
            def piece(t):
                pieces = [p for r in t.rounds for p in r.pieces]
                return quoted(pieces[at]) if at < len(pieces) else "the end"
            lines.append(f"differs from plain at token {at}: {piece(plain)} vs {piece(trace)}")
    plain_speed = compute_stats(plain.events).tokens_per_s
    measured_speedup = speedup(stats.tokens_per_s, plain_speed)
    noise = speedup_noise(runs, measured.get("plain", []))
    if within_noise(measured_speedup, noise):
        lines.append(f"{times(measured_speedup)} is within the noise (runs spread "
                     f"{percent(noise)}): it cannot be told from plain")
    if stats.tokens_per_round is not None and stats.proposed:
        lines.append(f"{stats.tokens_per_round:.2f} tokens per target pass")
    lines += drafting_lines(trace.rounds, stats,
                            result.request.settings.sampling.temperature > 0)
    model = cost_model(stats, plain_step_seconds(plain_speed))
    if model is not None:
        lines.append("why: " + model.why(measured_speedup, stats.acceptance_rate))
    return lines


def drafting_lines(rounds: list, stats, sampled: bool) -> list[str]:
    """How a run drafted, where there is more to say than its acceptance: what its
    draft-length policy chose, who drafted for ``chain``, and (``sampled``: temperature
    > 0) what mlx-lm's exact-match rule would have kept of the same drafts."""
    from specdeck.engines.auto.explain import length_summary
    from specdeck.engines.core.strategies import DRAFTERS

    lines = []
    chosen = length_summary(rounds)
    if chosen:
        lines.append(chosen)
    drafters = [r.proposer for r in rounds if r.proposer]
    if len(set(drafters)) > 1:
        lines.append("drafted by " + ", ".join(
            f"{DRAFTERS[name].words} in {plural(drafters.count(name), 'round')}"
            for name in sorted(set(drafters))))
    shadow = stats.exact_match_acceptance_rate
    if sampled and shadow is not None:
        lines.append(f"mlx-lm's exact-match rule would have kept {percent(shadow)} of the "
                     f"same drafts (min(1, p/q) kept {percent(stats.acceptance_rate)})")
    return lines

