"""``specdeck sweep``: the grid of k / depth / n against plain decoding, as a table, a
chart and a JSON document. Progress and time remaining go to stderr; Ctrl+C keeps the
prompt groups finished so far."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specdeck.engines.errors import SettingsError

DEFAULT_PROMPTS = ("code", "prose")


def _ints(value: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}")


def _floats(value: str) -> list[float]:
    try:
        return [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {value!r}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    from specdeck.engines.families import FAMILIES

    p = sub.add_parser("sweep", help="sweep k / MTP depth / n-gram settings against plain")
    p.add_argument("--family", choices=list(FAMILIES),
                   help="a model family by name: its target and draft")
    p.add_argument("--target", help="target model: a directory or a Hugging Face id "
                   "(default: the built-in demo target)")
    p.add_argument("--draft", help="draft model (for sweeping the draft strategy; default "
                   "with the demo target: the demo draft)")
    p.add_argument("--mtp-model", help="model whose MTP head drafts (default: the target)")
    p.add_argument("--strategies", default="draft",
                   help="comma-separated speculative strategies to sweep: draft, mtp, ngram")
    p.add_argument("-k", "--num-draft-tokens", type=_ints, default=[1, 2, 4, 8, 16],
                   help="k values for draft (and ngram): default 1,2,4,8,16")
    p.add_argument("--depth", type=_ints, default=[1, 2, 3], help="MTP depths: default 1,2,3")
    p.add_argument("--ngram", type=_ints, default=[3], help="n-gram match lengths: default 3")
    p.add_argument("--temp", type=_floats, default=[0.0], help="temperatures: default 0")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per cell")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up runs per cell")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt", action="append",
                   help="prompt text, a prompt file, a folder of prompts or a JSONL file "
                   "(repeatable; default: the built-in code and prose prompts)")
    p.add_argument("--strict", action="store_true",
                   help="refuse to run when the memory estimate exceeds free memory")
    p.add_argument("--noisy-cv", type=float, default=0.05,
                   help="flag cells whose robust CV exceeds this (default 0.05)")
    p.add_argument("--json", type=Path, help="write the sweep here (default: sessions/)")
    p.add_argument("--chart", type=Path, help="write the chart SVG here (default: beside the JSON)")


def _prompts(values: list[str] | None):
    from specdeck.engines.sweep import SweepPrompt, read_prompt_set
    from specdeck.prompts import get_prompt

    if not values:
        return [SweepPrompt(key, get_prompt(key).text, key) for key in DEFAULT_PROMPTS]
    prompts = []
    for value in values:
        prompts.extend(read_prompt_set(value))
    return prompts


def print_sweep(cells: list[dict], recommendations: list[str]) -> None:
    """The sweep's table (``specdeck.sweep_file.cell_row``), its recommendations and each
    cell's why line: what ``specdeck sweep`` ends with and ``specdeck replay`` shows."""
    from rich.console import Console
    from rich.table import Table

    from specdeck.sweep_file import COLUMNS, cell_row

    table = Table(title="specdeck sweep", show_lines=False)
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("prompt", "setting") else "right")
    for cell in cells:
        table.add_row(*cell_row(cell))
    console = Console(markup=False, highlight=False)
    if not console.is_terminal:
        console = Console(width=160, markup=False, highlight=False)
    console.print(table)
    for line in recommendations:
        print(line)
    for cell in cells:
        if cell["strategy"] != "plain":
            print(f"  {cell['prompt']} {cell['label']}: {cell['why']}")


def run(args: argparse.Namespace) -> int:
    from datetime import datetime

    import orjson

    from specdeck.engines.config import Sampling
    from specdeck.engines.families import models_for
    from specdeck.engines.machine import describe_machine
    from specdeck.engines.sweep import SweepProgress, SweepRequest, run_sweep, sweep_document
    from specdeck.chart import speedup_chart_svg
    from specdeck.session import write_atomic

    target, draft = models_for(args.family, args.target, args.draft)
    request = SweepRequest(
        target=target, draft=draft, mtp_model=args.mtp_model,
        prompts=_prompts(args.prompt),
        strategies=[s.strip() for s in args.strategies.split(",") if s.strip()],
        ks=args.num_draft_tokens, depths=args.depth, ngram_ns=args.ngram,
        temperatures=args.temp, reps=args.reps, warmup=args.warmup,
        max_tokens=args.max_tokens, seed=args.seed, noisy_cv=args.noisy_cv,
        sampling=Sampling(seed=args.seed),
        strict_memory=args.strict,
    )
    if "draft" in request.strategies and not request.draft:
        raise SettingsError("sweeping the draft strategy needs a draft model (--draft PATH)")
    request.validate()

    def progress(p: SweepProgress) -> None:
        eta = "" if p.eta_seconds is None else f", about {p.eta_seconds:.0f}s left"
        print(f"\rspecdeck sweep: {p.done}/{p.total} runs ({p.label}){eta}\033[K",
              end="", file=sys.stderr, flush=True)

    def message(text: str) -> None:
        print(f"specdeck: {text}", file=sys.stderr, flush=True)

    cells, complete = run_sweep(request, progress=progress, on_message=message)
    print(file=sys.stderr)
    if not complete:
        message(f"interrupted: keeping the {len(cells)} cells finished")
    document = sweep_document(request, cells, complete, describe_machine())
    out = args.json or Path("sessions") / f"sweep-{datetime.now():%Y%m%d-%H%M%S}.json"
    write_atomic(out, orjson.dumps(document, option=orjson.OPT_INDENT_2))
    chart = args.chart or out.with_suffix(".svg")
    write_atomic(chart, speedup_chart_svg(document["cells"]).encode())
    print_sweep(document["cells"], document["recommendations"])
    message(f"wrote {out} and {chart}")
    return 1 if any(c.correct is False for c in cells) else 0
