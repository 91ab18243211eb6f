"""The ``specdeck`` command: the playground by default, headless subcommands for scripts.

Every user error (a wrong path, mismatched tokenizers, an out-of-range setting) ends in
one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from specdeck.engines.config import MAX_DRAFT_TOKENS, MAX_MTP_DEPTH, DecodeSettings, Sampling
from specdeck.engines.errors import ModelError, SettingsError
from specdeck import fetch_command, models_command, session_commands, sweep_command
from specdeck.diff import DiffError
from specdeck.session import SessionError

EXIT_USAGE = 2
EXIT_RUN_FAILED = 1
#: The shell's convention for a run ended by Ctrl+C (128 + SIGINT).
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """Something the user can fix; printed as one line."""


def read_prompt(value: str) -> str:
    """A prompt given as text or as the path of a text file. A file in the format of
    ``prompts/`` (name and description lines, ``---``, the text) gives only its text."""
    from specdeck.prompts import text_of

    path = Path(value).expanduser()
    try:
        is_file = len(value) < 4096 and path.is_file()
    except OSError:
        is_file = False
    if not is_file:
        return value
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the prompt file {value}: {exc}") from exc
    return text_of(path.stem, content)


def _add_model_options(p: argparse.ArgumentParser) -> None:
    """Options that pick the models and how their weights are kept (the playground and
    ``compare``)."""
    from specdeck.engines.config import DTYPES
    from specdeck.engines.families import FAMILIES

    p.add_argument("--family", choices=list(FAMILIES),
                   help="a model family by name: its target and draft (smollm2 after "
                   "`specdeck fetch smollm2`)")
    p.add_argument("--dtype", choices=DTYPES, default="fast",
                   help="fast (default): half-precision weights run as float32 on the CPU; "
                   "native: as stored, matching `mlx_lm generate` bit for bit")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    _add_model_options(p)
    p.add_argument("--target", help="target model: a directory or a Hugging Face id "
                   "(default: the built-in demo target)")
    p.add_argument("--draft", help="draft model for the draft strategy (same tokenizer; "
                   "default with the demo target: the demo draft)")
    p.add_argument("--mtp-model",
                   help="model whose own MTP head drafts for the mtp strategy "
                   "(default: the target)")
    p.add_argument("--revision", help="revision of the target on the Hugging Face hub")
    p.add_argument(
        "--strategies", default="plain,draft",
        help="comma-separated, run in this order (plain, draft, mtp, ngram)",
    )
    p.add_argument("--prompt", required=True, help="prompt text, or a file holding it")
    p.add_argument("-k", "--num-draft-tokens", type=int, default=2,
                   help=f"drafts per round, 1..{MAX_DRAFT_TOKENS} (default 2)")
    p.add_argument("--depth", type=int, default=1,
                   help=f"MTP drafts per cycle, 1..{MAX_MTP_DEPTH} (default 1)")
    p.add_argument("--ngram", type=int, default=3,
                   help="prompt lookup: tokens to match (default 3)")
    p.add_argument("--ngram-k", type=int, default=4,
                   help=f"prompt lookup: most drafts per round, 1..{MAX_DRAFT_TOKENS} "
                   "(default 4)")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temp", type=float, default=0.0, help="temperature; 0 is greedy")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--min-p", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-kv-size", type=int, help="bound the KV cache (rotating window)")
    p.add_argument("--alternatives", type=int, default=0,
                   help="record the target's top-N alternatives at each position")
    p.add_argument("--warmup-tokens", type=int, default=8,
                   help="tokens of the untimed warm-up run per strategy (0: none)")
    p.add_argument("--ignore-eos", action="store_true", help="always generate --max-tokens")
    p.add_argument("--strict", action="store_true",
                   help="refuse to run when the memory estimate exceeds free memory "
                   "(default: warn)")
    chat = p.add_mutually_exclusive_group()
    chat.add_argument("--chat", dest="chat", action="store_true", default=None,
                      help="wrap the prompt in the chat template")
    chat.add_argument("--raw", dest="chat", action="store_false",
                      help="feed the prompt as is (default when there is no chat template)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specdeck",
        description="Compare LLM decoding strategies side by side: plain, draft-model "
        "speculation, MTP and prompt lookup.",
    )
    _add_model_options(parser)  # for the playground, `specdeck` alone
    sub = parser.add_subparsers(dest="command")
    compare = sub.add_parser("compare", help="run strategies one after another on one prompt")
    _add_run_options(compare)
    compare.add_argument("--headless", action="store_true", help="no app: print a summary")
    compare.add_argument("--json", type=Path, help="write the result as JSON here")
    compare.add_argument("--sessions-dir", type=Path, default=None, metavar="DIR",
                         help="save every run here (default: $SPECDECK_SESSIONS_DIR, "
                         "else sessions/)")
    compare.add_argument("--no-save", action="store_true", help="do not save the session")
    sweep_command.add_parser(sub)
    session_commands.add_parsers(sub)
    models_command.add_parser(sub)
    fetch_command.add_parser(sub)
    return parser


def settings_from(args: argparse.Namespace) -> DecodeSettings:
    return DecodeSettings(
        max_tokens=args.max_tokens,
        sampling=Sampling(
            temperature=args.temp, top_p=args.top_p, top_k=args.top_k,
            min_p=args.min_p, seed=args.seed,
        ),
        num_draft_tokens=args.num_draft_tokens,
        mtp_depth=args.depth,
        ngram_n=args.ngram,
        ngram_k=args.ngram_k,
        alternatives=args.alternatives,
        stop_at_eos=not args.ignore_eos,
        max_kv_size=args.max_kv_size,
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from specdeck.engines.compare import CompareRequest, run_compare
    from specdeck.engines.families import models_for
    from specdeck.engines.machine import describe_machine
    from specdeck.session import build_document, compare_config, save_document
    from specdeck.session_store import autosave

    target, draft = models_for(args.family, args.target, args.draft)
    request = CompareRequest(
        target=target,
        draft=draft,
        mtp_model=args.mtp_model,
        revision=args.revision,
        strategies=[s.strip() for s in args.strategies.split(",") if s.strip()],
        prompt=read_prompt(args.prompt),
        settings=settings_from(args),
        chat=args.chat,
        warmup_tokens=args.warmup_tokens,
        strict_memory=args.strict,
        dtype=args.dtype,
    )
    request.validate()
    if not args.headless:
        return open_playground(request, args.sessions_dir, save=not args.no_save)

    def progress(message: str) -> None:
        print(f"specdeck: {message}", file=sys.stderr, flush=True)

    with first_interrupt_cancels() as stop:
        result = run_compare(request, progress=progress, cancelled=stop.is_set)
    if stop.is_set() and not result.traces:
        progress("interrupted before any strategy ran: nothing to save")
        return EXIT_INTERRUPTED
    document = build_document(compare_config(result), describe_machine(), result.traces)
    if not args.no_save:
        saved = autosave(document, args.sessions_dir)
        progress(f"saved {saved}" + (" (partial)" if document["partial"] else ""))
    if args.json:
        save_document(args.json, document)
        progress(f"wrote {args.json}")
    failed = False
    for name, entry in document["strategies"].items():
        stats, done = entry["stats"], entry["done"] or {}
        rate = stats["acceptance_rate"]
        speed = stats["speedup_vs_plain"]
        print(
            f"{name:>6}: {stats['generated_tokens']} tokens, "
            f"{(stats['tokens_per_s'] or 0):.1f} tok/s"
            + (f", acceptance {rate:.0%}" if rate is not None else "")
            + (f", {speed:.2f}x plain" if speed is not None and name != "plain" else "")
            + f", {done.get('reason', '?')}"
        )
        if done.get("reason") == "error":
            failed = True
            print(f"specdeck: {name} failed: {done.get('error')}", file=sys.stderr)
    if stop.is_set():
        return EXIT_INTERRUPTED
    return EXIT_RUN_FAILED if failed else 0


@contextmanager
def first_interrupt_cancels() -> Iterator[threading.Event]:
    """The first Ctrl+C asks the run to stop after the current round (what ran is kept and
    saved as partial); a second one quits at once."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_interrupt(signum: int, frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, previous)
        # os.write, not print: a signal handler may interrupt a print in progress.
        os.write(2, b"\nspecdeck: stopping after this round and saving what ran "
                    b"(Ctrl+C again to quit now)\n")

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def open_playground(request, sessions_dir: Path | None = None, save: bool = True,
                    hint: str | None = None) -> int:
    """Open the app on ``request``, refusing a missing model before the screen changes.
    Every run the app measures is saved as a session (into ``sessions_dir``) unless
    ``save`` is false; ``hint`` (a few words) leads the status line."""
    from specdeck.engines.loading import resolve
    from specdeck.tui import run_app

    for source in (request.target, request.draft, request.mtp_model):
        if source:
            resolve(source, request.revision if source == request.target else None)
    run_app(request, sessions_dir=sessions_dir, save_sessions=save, hint=hint)
    return 0


def cmd_playground(args: argparse.Namespace) -> int:
    """``specdeck`` alone: the smollm2 family once fetched (plain, draft, prompt lookup on
    a chat prompt), else the demo models (plain, draft, MTP on code), whose status bar
    says how to fetch the real one."""
    from specdeck.engines.compare import CompareRequest
    from specdeck.engines.families import FAMILIES, default_family, fetch_hint, require_family
    from specdeck.prompts import get_prompt

    family = FAMILIES[args.family or default_family()]
    models = require_family(family.name)
    request = CompareRequest(
        target=models.target, draft=models.draft, strategies=list(family.strategies),
        prompt=get_prompt(family.prompt).text, settings=DecodeSettings(max_tokens=200),
        dtype=args.dtype,
    )
    return open_playground(request, hint=fetch_hint() if family.name == "demo" else None)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args.command = "playground"
    try:
        return {
            "compare": cmd_compare, "playground": cmd_playground, "sweep": sweep_command.run,
            "replay": session_commands.cmd_replay, "diff": session_commands.cmd_diff,
            "models": models_command.run, "fetch": fetch_command.run,
        }[args.command](args)
    except (UserError, SettingsError, ModelError, SessionError, DiffError) as exc:
        print(f"specdeck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("specdeck: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def entry() -> None:
    """Console-script entry: use the system OpenBLAS on Linux, then run."""
    from specdeck.blas import reexec_with_openblas

    if not os.environ.get("PYTEST_CURRENT_TEST"):
        reexec_with_openblas(sys.argv[1:])
    sys.exit(main())
