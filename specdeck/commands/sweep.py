"""``specdeck sweep``: the grid of k / depth / n against plain decoding, as a table, a
chart and a JSON document. Progress and time remaining go to stderr; Ctrl+C keeps the
prompt groups finished so far."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from specdeck.commands.options import (
    add_group_options, add_model_options, check_output, group_from, require_models, say,
)
from specdeck.engines.core.config import Sampling, field_default, parse_draft_count
from specdeck.engines.core.formatting import plural
from specdeck.engines.core.requests import SweepRequest
from specdeck.commands.progress_line import ProgressLine
from specdeck.hosts.stopping import Stopping, stopped_status
from specdeck.safe_text.plain import visible

if TYPE_CHECKING:
    from specdeck.engines.runs.sweep import SweepProgress

DEFAULT_PROMPTS = ("code", "prose")


def _default(name: str):
    """A default of the sweep request (each is written once, there)."""
    return field_default(SweepRequest, name)


def _listed(name: str) -> str:
    return ",".join(f"{v:g}" for v in _default(name))


def _listed_values(parse: Callable[[str], object], what: str) -> Callable[[str], list]:
    """An option's type: comma-separated values, at least one (an empty list would
    quietly sweep nothing of it)."""
    def values(value: str) -> list:
        try:
            parsed = [parse(v) for v in value.split(",") if v.strip()]
        except ValueError:
            parsed = []
        if not parsed:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {value!r}")
        return parsed
    return values


_ints = _listed_values(int, "integers")
#: k values: whole numbers, and policies (``auto``, ``grow``, ``pmin:P``) that choose
#: each round's.
_counts = _listed_values(parse_draft_count, "whole numbers, auto, grow or pmin:P")
_floats = _listed_values(float, "numbers")


def add_parser(sub: argparse._SubParsersAction) -> None:

    p = sub.add_parser("sweep", help="sweep k / MTP depth / n-gram settings against plain")
    p.set_defaults(run=run)
    add_model_options(p, command=True)
    p.add_argument("--target", help="target model: a directory or a Hugging Face id "
                   "(default: the built-in demo target)")
    p.add_argument("--draft", help="draft model (for sweeping the draft strategy; default "
                   "with the demo target: the demo draft)")
    p.add_argument("--mtp-model", help="model whose MTP head drafts (default: the target)")
    p.add_argument("--strategies", default=",".join(_default("strategies")),
                   help="comma-separated speculative strategies to sweep: draft, mtp, ngram "
                   "(default %(default)s)")
    p.add_argument("-k", "--num-draft-tokens", type=_counts, default=_default("ks"),
                   help=f"k values for draft (and ngram), policies among them (auto, grow, "
                   f"pmin:P) for the length chosen each round: default {_listed('ks')}")
    p.add_argument("--depth", type=_counts, default=_default("depths"),
                   help=f"MTP depths (policies too): default {_listed('depths')}")
    p.add_argument("--ngram", type=_ints, default=_default("ngram_ns"),
                   help=f"n-gram match lengths: default {_listed('ngram_ns')}")
    p.add_argument("--temp", type=_floats, default=_default("temperatures"),
                   help=f"temperatures: default {_listed('temperatures')}")
    p.add_argument("--reps", type=int, default=_default("reps"),
                   help="timed repetitions per cell (default %(default)s)")
    p.add_argument("--warmup", type=int, default=_default("warmup"),
                   help="untimed warm-up runs per cell (default %(default)s)")
    p.add_argument("--max-tokens", type=int, default=_default("max_tokens"),
                   help="tokens per run (default %(default)s)")
    p.add_argument("--seed", type=int, default=Sampling().seed,
                   help="seed of each cell's first repetition; repetition r adds r "
                   "(default %(default)s)")
    p.add_argument("--prompt", action="append",
                   help="prompt text, a built-in prompt's name (code, chat_explain, ...), a prompt "
                   "file, a folder of prompts or a JSONL file "
                   "(repeatable; default: the built-in code and prose prompts)")
    p.add_argument("--strict", action="store_true",
                   help="refuse to run when the memory estimate exceeds free memory")
    p.add_argument("--force", action="store_true",
                   help="run even when the memory estimate is beyond this machine's whole "
                   "memory (default: refuse)")
    p.add_argument("--noisy-cv", type=float, default=_default("noisy_cv"),
                   help="flag cells whose robust CV exceeds this (default %(default)s)")
    p.add_argument("--json", type=Path, help="write the sweep here (default: a new file "
                   "in the sessions folder: $SPECDECK_SESSIONS_DIR, else sessions/)")
    p.add_argument("--chart", type=Path, help="write the chart SVG here (default: beside the JSON)")

    add_group_options(p)


def _prompts(values: list[str] | None):
    from specdeck.engines.core.requests import SweepPrompt
    from specdeck.prompts import get_prompt, read_prompts

    if not values:
        prompts = [get_prompt(key) for key in DEFAULT_PROMPTS]
    else:
        prompts = [p for value in values for p in read_prompts(value)]
    return [SweepPrompt(p.key, p.text, p.kind) for p in prompts]


def print_sweep(cells: list[dict], recommendations: list[str]) -> None:
    """The sweep's table (``specdeck.sessions.sweep_file.cell_row``), its recommendations and each
    cell's why line: what ``specdeck sweep`` ends with and ``specdeck replay`` shows."""
    from rich.console import Console
    from rich.table import Table

    from specdeck.safe_text.rich_text import literal
    from specdeck.sessions.sweep_file import COLUMNS, cell_row, why_lines

    table = Table(title="specdeck sweep", show_lines=False)
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("prompt", "setting") else "right")
    for cell in cells:
        table.add_row(*(literal(value, one_line=True) for value in cell_row(cell)))
    console = Console(markup=False, highlight=False)
    if not console.is_terminal:
        console = Console(width=160, markup=False, highlight=False)
    console.print(table)
    for line in recommendations:
        print(visible(line))
    for line in why_lines(cells):
        print(visible(f"  {line}"))


def write_sweep(document: dict, json_path: Path | None, chart_path: Path | None,
                say: Callable[[str], None]) -> bool:
    """The sweep's JSON (``json_path``, else a new name in the sessions folder) and its
    chart (``chart_path``, else beside the JSON). A JSON its place cannot take goes to a
    fallback place, named; False when anything did not land where it was asked to."""
    import orjson

    from specdeck.engines.core.atomic_files import is_stream, write_atomic
    from specdeck.sessions.chart import speedup_chart_svg
    from specdeck.sessions.store import (
        SaveFailed, SaveOutcome, fall_back, save_session, session_names, why_not,
    )

    try:
        if json_path is None:
            outcome = save_session(document)
        else:
            data = orjson.dumps(document)
            try:
                write_atomic(json_path, data)
                outcome = SaveOutcome(json_path)
            except OSError as exc:
                outcome = fall_back(lambda: session_names(document), data,
                                    f"cannot write {json_path} ({why_not(exc)})")
    except SaveFailed as failed:
        say(f"error: the sweep was not saved: {failed}")
        return False
    out = outcome.path
    if outcome.problem:
        say(f"error: {outcome.problem}: wrote the sweep to {out} instead")
    if chart_path is None and is_stream(out):
        say(f"wrote {out} (no chart: nothing is beside a stream; --chart FILE draws it)")
        return True
    chart = chart_path or out.with_suffix(".svg")
    try:
        write_atomic(chart, speedup_chart_svg(document["cells"]).encode())
    except OSError as exc:
        say(f"error: cannot write the chart {chart} ({why_not(exc)})")
        return False
    say(f"wrote {out} and {chart}")
    return outcome.problem is None


def run(args: argparse.Namespace) -> int:
    from specdeck.engines.core.requests import launched

    line = ProgressLine(every=0.0)  # a line a run in a log: each is seconds or more

    def progress(p: SweepProgress) -> None:
        eta = "" if p.eta_seconds is None else f", about {p.eta_seconds:.0f} s left"
        line.show(f"specdeck sweep: {p.done}/{p.total} runs ({visible(p.label, 80)}){eta}",
                  last=p.done == p.total)

    finish = lambda *ran: line.end() or _finish(args, *ran)  # noqa: E731
    if launched():  # one rank of a group mlx.launch started: every rank builds the request
        from specdeck.commands import group as group_command

        return group_command.sweep(args, lambda: sweep_request(args), finish, progress)
    request = sweep_request(args)
    require_models(request)
    if request.group is not None:
        from specdeck.commands import group as group_command

        if request.group.wants_launch:
            return group_command.launch(args, request)
        return group_command.sweep(args, lambda: request, finish, progress)
    from specdeck.engines.runs.sweep import run_sweep  # mlx-lm: ~1 s, for runs alone

    # The first signal stops the measuring at once (the prompt groups already finished
    # are kept); while the files are written, one only says so: what finished always
    # lands in valid files.
    with Stopping("interrupt") as stopping:
        cells, complete = run_sweep(request, progress=progress,
                                    on_message=lambda message: line.end() or say(message))
        stopping.mode = "hold"
        return finish(request, cells, complete, None, say)


def sweep_request(args: argparse.Namespace) -> SweepRequest:
    """The sweep the command line asks for, checked."""
    from specdeck.engines.models.families import models_for

    target, draft = models_for(args.family, args.target, args.draft)
    request = SweepRequest(
        target=target, draft=draft, mtp_model=args.mtp_model,
        prompts=_prompts(args.prompt),
        strategies=[s.strip() for s in args.strategies.split(",") if s.strip()],
        ks=args.num_draft_tokens, depths=args.depth, ngram_ns=args.ngram,
        temperatures=args.temp, reps=args.reps, warmup=args.warmup,
        max_tokens=args.max_tokens, noisy_cv=args.noisy_cv,
        sampling=Sampling(seed=args.seed),
        strict_memory=args.strict, force=args.force,
        group=group_from(args), dtype=args.dtype,
    )
    request.validate()
    check_output(args.json, "--json")
    check_output(args.chart, "--chart")
    return request


def _finish(args: argparse.Namespace, request: SweepRequest, cells: list, complete: bool,
            group: dict | None, message: Callable[[str], None]) -> int:
    """Print the sweep, save it (with the group it ran on, if any) and draw its chart;
    the command's exit status."""
    from specdeck.engines.measure.machine import describe_machine
    from specdeck.engines.runs.sweep import recommendations
    from specdeck.commands.exit_status import EXIT_NOT_SAVED
    from specdeck.sessions.session import sweep_document

    if not complete:
        message(f"interrupted: keeping the {plural(len(cells), 'cell')} finished")
    document = sweep_document(request, cells, recommendations(cells), complete,
                              describe_machine())
    if group is not None:
        document["config"]["group"] = group
    print_sweep(document["cells"], document["recommendations"])
    sys.stdout.flush()
    written = write_sweep(document, args.json, args.chart, message)
    if not complete:
        return stopped_status()
    if not written:
        return EXIT_NOT_SAVED
    return 1 if any(c.correct is False for c in cells) else 0
