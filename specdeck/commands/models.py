"""``specdeck models``: the models specdeck can use, from the Hugging Face cache and the
directories named, with what matters for speculation (size, quantisation, hybrid, MTP
head, tokenizer) and which of them can draft for which. Reads files only: no network,
no weights. ``--rank-drafts TARGET`` is the exception: it loads the target and every
model sharing its tokenizer and probes each as a draft (``engines.draft_probe``), ranking
them by the speedup predicted on this machine, and caches the ranking for the model
picker."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specdeck.commands.options import say
from specdeck.engines.models.catalog import ModelInfo, find_models, suggest_drafts
from specdeck.engines.models.families import (
    FETCH_HINT, family_roots, is_shipped_draft, named_by_family,
)
from specdeck.engines.core.formatting import byte_size, parameters_text, percent, quant_text

if TYPE_CHECKING:
    from specdeck.engines.measure.draft_ranking import DraftRanking

#: The built-in prompts (``prompts/``) a draft is probed on: code, prose and chat.
PROBE_PROMPTS = ("code", "prose", "chat_explain")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list usable models (Hugging Face cache and directories)")
    p.set_defaults(run=run)
    p.add_argument("dirs", nargs="*", type=Path, metavar="DIR",
                   help="a model directory, or a folder of them (two levels deep), to list "
                   "too (default: the model families here: demo, and smollm2 once "
                   "fetched)")
    p.add_argument("--cache-dir", type=Path,
                   help="Hugging Face cache to scan (default: the hub's own, HF_HUB_CACHE)")
    p.add_argument("--no-cache", action="store_true", help="list only the directories named")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--rank-drafts", metavar="TARGET",
                   help="probe every listed model sharing TARGET's tokenizer as its draft "
                   "(a few prompts, a few tokens each, temperature 0) and rank them by the "
                   "speedup predicted on this machine; cached for the settings' model picker")


def tokenizer_text(m: ModelInfo) -> str:
    """The tokenizer's fingerprint and size, and how many of its tokens the model drafts
    from when its folder lists them (``engines.draft_vocab``)."""
    if not m.tokenizer:
        return "?"
    listed = f", drafts from {m.listed_tokens:,}" if m.listed_tokens else ""
    return f"{m.tokenizer} ({m.vocab_size}{listed})"


def _table(models: list[ModelInfo]) -> None:
    from rich.console import Console
    from rich.table import Table

    from specdeck.safe_text.rich_text import literal

    table = Table(title="specdeck models")
    for column in ("model", "arch", "params", "quant", "disk", "hybrid", "MTP",
                   "tokenizer", "drafts"):
        table.add_column(column, justify="right" if column in ("params", "disk") else "left")
    for m in models:
        drafts = suggest_drafts(m, models)
        row = (
            m.name, m.model_type, parameters_text(m.parameters), quant_text(m), byte_size(m.size_on_disk),
            "yes" if m.hybrid else "", "yes" if m.has_mtp_head else "",
            tokenizer_text(m),
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

    from specdeck.engines.core.errors import ModelError
    from specdeck.safe_text.plain import MESSAGE_CHARS, visible

    problems: list[ModelError] = []
    dirs = args.dirs or list(family_roots().values())
    for d in args.dirs:
        if is_shipped_draft(d):  # named as it is: say what it is
            problems.append(ModelError(
                f"{d} holds only the smollm2 draft's own layers, not a model to load: "
                f"`{FETCH_HINT}` assembles the draft from them"))
    models = named_by_family(find_models(dirs, args.cache_dir, hub=not args.no_cache,
                                         on_problem=problems.append))
    if args.rank_drafts:
        status = rank_drafts(args.rank_drafts, models, args.json)
        for problem in problems:
            print(f"specdeck: error: {visible(str(problem), MESSAGE_CHARS)}", file=sys.stderr)
        return 2 if problems else status
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


def rank_drafts(target: str, models: list[ModelInfo], as_json: bool) -> int:
    """Probe the models sharing ``target``'s tokenizer as its draft, print the ranking
    (progress on stderr) and cache it; UserError when there is nothing to rank."""
    import orjson
    from specdeck.engines.measure.blas_threads import fit_blas_threads_to
    from specdeck.engines.models.catalog import describe_dir
    from specdeck.engines.runs.compare import encode_prompt
    from specdeck.engines.measure.draft_probe import ProbeProgress, probe_drafts
    from specdeck.engines.measure.draft_ranking import save_ranking
    from specdeck.engines.core.errors import UserError
    from specdeck.engines.models.loading import ModelStore
    from specdeck.prompts import get_prompt
    from specdeck.commands.progress_line import ProgressLine
    from specdeck.sessions.store import why_not
    from specdeck.safe_text.plain import visible

    store = ModelStore()
    path = store.resolve(target)
    info = describe_dir(path, name=target)
    candidates = [m for m in models if m.tokenizer and m.tokenizer == info.tokenizer
                  and m.weights_present and m.path.resolve() != path.resolve()]
    if not candidates:
        raise UserError(f"no listed model shares {target}'s tokenizer: name the folders "
                        "holding its drafts (specdeck models DIR --rank-drafts TARGET)")
    say(f"loading {target}")
    loaded = store.get(target)
    fit_blas_threads_to(loaded)
    prompts = [encode_prompt(loaded.tokenizer, get_prompt(key).text) for key in PROBE_PROMPTS]

    line = ProgressLine()

    def progress(p: ProbeProgress) -> None:
        line.show(f"specdeck models: probing {p.done}/{p.total} ({visible(p.label, 60)})",
                  last=p.done == p.total)

    ranking = probe_drafts(loaded, candidates, prompts, progress=progress,
                           on_skip=lambda skipped: line.end() or say(skipped))
    line.end()
    try:
        say(f"cached in {save_ranking(ranking, path)}")
    except OSError as exc:
        say(f"warning: the ranking was not cached ({why_not(exc)})")
    if as_json:
        sys.stdout.write(orjson.dumps(ranking.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print_ranking(target, ranking)
    return 0


def print_ranking(target: str, ranking: DraftRanking) -> None:
    """The ranking as a table, best first, one line a draft."""
    from specdeck.safe_text.plain import visible

    print(visible(f"drafts for {target}, best first ({ranking.probe}; predicted on this "
                  "machine from the probe's acceptance and costs)"))
    for place, draft in enumerate(ranking.drafts, 1):
        survival = " ".join(percent(s) for s in draft.survival)
        print(visible(f"{place:>3}. {draft.name}: {draft.summary()}; draft step "
                      f"{draft.draft_step:.2f} target steps; survival by position {survival}"))
