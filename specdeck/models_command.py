"""``specdeck models``: the models specdeck can use, from the Hugging Face cache and the
directories named, with what matters for speculation (size, quantisation, hybrid, MTP
head, tokenizer) and which of them can draft for which. Reads files only: no network,
no weights."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specdeck.engines.catalog import ModelInfo, find_models, suggest_drafts
from specdeck.engines.demo import DEMO_DIR, demo_models
from specdeck.engines.formatting import byte_size, parameters_text, quant_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list usable models (Hugging Face cache and directories)")
    p.add_argument("dirs", nargs="*", type=Path, metavar="DIR",
                   help="a model directory, or a folder of them (two levels deep), to list "
                   "too (default: the built-in demo family)")
    p.add_argument("--cache-dir", type=Path,
                   help="Hugging Face cache to scan (default: the hub's own, HF_HUB_CACHE)")
    p.add_argument("--no-cache", action="store_true", help="list only the directories named")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _table(models: list[ModelInfo]) -> None:
    from rich.console import Console
    from rich.table import Table

    from specdeck.literal import literal

    table = Table(title="specdeck models")
    for column in ("model", "arch", "params", "quant", "disk", "hybrid", "MTP",
                   "tokenizer", "drafts"):
        table.add_column(column, justify="right" if column in ("params", "disk") else "left")
    for m in models:
        drafts = suggest_drafts(m, models)
        row = (
            m.name, m.model_type, parameters_text(m.parameters), quant_text(m), byte_size(m.size_on_disk),
            "yes" if m.hybrid else "", "yes" if m.has_mtp_head else "",
            f"{m.tokenizer} ({m.vocab_size})" if m.tokenizer else "?",
            ", ".join(d.name for d in drafts[:3]),
        )
        table.add_row(*(literal(value, one_line=True) for value in row))
    console = Console(markup=False, highlight=False)
    if not console.is_terminal:
        console = Console(width=200, markup=False, highlight=False)
    console.print(table)


def run(args: argparse.Namespace) -> int:
    """List the models; a directory that holds none (or a broken one) is named on stderr,
    one line each, the others still listed, and the exit status is 2 (bad input)."""
    import orjson

    from specdeck.engines.errors import ModelError
    from specdeck.visible import MESSAGE_CHARS, visible

    problems: list[ModelError] = []
    dirs = args.dirs or ([DEMO_DIR] if demo_models() is not None else [])
    models = find_models(dirs, args.cache_dir, hub=not args.no_cache,
                         on_problem=problems.append)
    if args.json:
        rows = [{**m.to_dict(), "drafts": [d.name for d in suggest_drafts(m, models)]}
                for m in models]
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif models:
        _table(models)
    elif not problems:
        print("specdeck: no models found (name a directory: specdeck models PATH)",
              file=sys.stderr)
    sys.stdout.flush()
    for problem in problems:
        print(f"specdeck: error: {visible(str(problem), MESSAGE_CHARS)}", file=sys.stderr)
    return 2 if problems else 0
