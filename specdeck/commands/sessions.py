"""``specdeck replay`` and ``specdeck diff``: saved sessions on any machine, no mlx needed.

The data comes from ``specdeck.sessions.session`` and ``specdeck.sessions.diff``; this module only turns it
into terminal output (rich tables) or JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specdeck.engines.core.errors import UserError
from specdeck.engines.core.files import MAX_FILE_BYTES
from specdeck.engines.core.formatting import (
    MISSING, format_stat, plural, setting_text, stats_table,
)
from specdeck.engines.distributed.costs import PassCosts, describe_group

#: ``specdeck diff`` exit statuses besides errors (2): like diff(1).
EXIT_SAME, EXIT_DIFFERENT = 0, 1
#: Token edits printed before "... and N more" (``--json`` has them all).
SHOWN_EDITS = 12


def file_size(value: str) -> int | None:
    """``--max-file-size``: bytes with an optional K, M or G (powers of 1024); 0 or
    ``none`` for no limit."""
    text = value.strip().upper().removesuffix("B").removesuffix("I")
    if text in ("0", "NONE"):
        return None
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    try:
        size = int(float(text[:-1] if scale > 1 else text) * scale)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"expected a size like 512M or 2G (0: no limit), got {value!r}") from None
    if size < 0:
        raise argparse.ArgumentTypeError(f"a size cannot be negative (got {value!r})")
    return size


def add_size_limit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-file-size", type=file_size, default=MAX_FILE_BYTES, metavar="SIZE",
                   help="read files up to this size: 512M, 2G, 0 for no limit "
                   f"(default {MAX_FILE_BYTES // 2**20}M: a file from elsewhere may be "
                   "endless)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    replay = sub.add_parser(
        "replay", help="open a saved session (no model and no mlx needed)",
        description="Open a saved session in the playground, or print it with --headless.",
    )
    replay.set_defaults(run=cmd_replay)
    replay.add_argument("file", type=Path, help="a session file (sessions/*.json)")
    replay.add_argument("--headless", action="store_true",
                        help="no app: print each strategy's text and the statistics")
    replay.add_argument("--json", action="store_true",
                        help="no app: print each strategy's statistics as JSON (with "
                        "--conventions: named as another engine names them)")
    _add_conventions(replay)
    add_size_limit(replay)

    diff = sub.add_parser(
        "diff", help="compare two sessions, or two strategies of one",
        description="Where the outputs first diverge, a token-level diff, the settings "
        "that differ and the statistics side by side (b / a). With one file, its first "
        "strategy is compared with each of the others (at temperature 0 they must be "
        "identical: speculation is lossless). Exit status: 0 identical outputs, "
        "1 different, 2 error.",
    )
    diff.set_defaults(run=cmd_diff)
    diff.add_argument("a", type=Path, help="a session file")
    diff.add_argument("b", type=Path, nargs="?", help="a second session (default: the same)")
    which = diff.add_mutually_exclusive_group()
    which.add_argument("--strategy", metavar="NAME",
                       help="compare only this strategy of both sessions")
    which.add_argument("--pair", nargs=2, metavar=("A_NAME", "B_NAME"),
                       help="compare strategy A_NAME of a with B_NAME of b (or of a)")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON")
    diff.add_argument("--html", nargs="?", const="", metavar="OUT",
                      help="write the diff as one self-contained web page (default OUT: "
                      "A-vs-B.html beside A)")
    _add_conventions(diff)
    add_size_limit(diff)


def _add_conventions(p: argparse.ArgumentParser) -> None:
    from specdeck.engines.core.conventions import CONVENTIONS, help_text

    p.add_argument("--conventions", choices=CONVENTIONS, default="specdeck",
                   help="name and compute the speculation statistics as this engine does "
                   f"(default %(default)s). {help_text()}. Shares are from 0 to 1")


# --- formatting -----------------------------------------------------------------------


def _model(config: dict, role: str) -> str | None:
    model = config.get(role)
    return model.get("source") if isinstance(model, dict) else None


def _console():
    """Markup off: prompts, texts and strategy names come from files and may hold '['."""
    from rich.console import Console

    console = Console(markup=False, highlight=False, soft_wrap=True)
    if not console.is_terminal:  # piped or captured: wide enough for the wide tables
        console = Console(markup=False, highlight=False, soft_wrap=True, width=160)
    return console


# --- replay ---------------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace) -> int:
    from specdeck.sessions.session import read_document, session_from_document
    from specdeck.sessions.sweep_file import is_sweep, sweep_from_document

    document = read_document(args.file, args.max_file_size)
    if is_sweep(document):
        if args.json:
            raise UserError(f"{args.file} is a sweep, already JSON: --json prints a "
                            "session's statistics")
        sweep = sweep_from_document(document, args.file)
        if not args.headless:
            return _open_sweep_view(sweep)
        print_sweep_file(sweep)
        return 0
    session = session_from_document(document, args.file)
    if args.json:
        return print_stats_json(session, args.conventions)
    if not args.headless:
        return _open_app(session)
    print_session(session, args.conventions)
    return 0


def print_stats_json(session, conventions: str) -> int:
    """Each strategy's statistics as JSON, in ``conventions``' names (the export other
    engines' numbers can be checked against)."""
    import orjson

    stats = convention_stats(session, conventions)
    sys.stdout.buffer.write(orjson.dumps({"conventions": conventions, "strategies": stats},
                                         option=orjson.OPT_INDENT_2) + b"\n")
    return 0


def convention_stats(session, conventions: str) -> dict[str, dict]:
    """Each strategy's statistics (``Session.stats``) named as ``conventions`` names them."""
    from specdeck.engines.core.conventions import in_convention

    return {name: in_convention(stats, session.traces[name].rounds, conventions)
            for name, stats in session.stats().items()}


def _import_tui(what: str):
    """The ``tui`` package, or a UserError saying to print with --headless instead."""
    try:
        from specdeck import tui
    except ImportError as exc:
        raise UserError(
            f"the playground cannot start here ({exc}); add --headless to print the {what}"
        ) from None
    return tui


def _open_app(session) -> int:
    tui = _import_tui("session")
    tui.run_app(tui.ReplaySource.of(session), title=session.replay_title)
    return 0


def _open_sweep_view(sweep) -> int:
    _import_tui("sweep")
    from specdeck.tui.sweep_view import run_sweep_view

    run_sweep_view(sweep)
    return 0


def print_sweep_file(sweep) -> None:
    """A saved sweep: where and when it ran, then the table and recommendations as
    ``specdeck sweep`` printed them."""
    from specdeck.safe_text.rich_text import literal
    from specdeck.commands.sweep import print_sweep

    console = _console()
    console.print(literal(f"{sweep.path or 'sweep'}  {sweep.created}  sweep"
                          + ("  partial: the sweep was interrupted" if sweep.partial else ""),
                          one_line=True))
    machine = sweep.machine
    if machine.get("chip") or machine.get("os"):
        console.print(literal(f"on {machine.get('chip', '?')}, {machine.get('os', '?')}",
                              one_line=True))
    print_sweep(sweep.cells, sweep.recommendations)


def print_session(session, conventions: str = "specdeck") -> None:
    """Each strategy's text, then its statistics side by side (speculation statistics
    named as ``conventions`` names them)."""
    from rich.rule import Rule
    from rich.table import Table
    from rich.text import Text

    from specdeck.safe_text.rich_text import literal

    console = _console()
    config, machine = session.config, session.machine
    models = ", ".join(
        f"{role} {name}" for role in ("target", "draft")
        if (name := _model(config, role))
    )
    console.print(Text.assemble(
        literal(session.path or "session", "bold", one_line=True),
        literal(f"  {session.created}  {session.kind}", one_line=True),
        ("  partial: the run was cut short" if session.partial else "", "yellow"),
    ))
    if models:
        console.print(literal(models, one_line=True))
    if machine.get("chip") or machine.get("os"):
        console.print(literal(f"on {machine.get('chip', '?')}, {machine.get('os', '?')}",
                              one_line=True))
    group = describe_group(config.get("group"))
    costs = PassCosts.from_dict((config.get("group") or {}).get("pass_costs")) \
        if group else None
    if group:
        console.print(literal(group, one_line=True))
    if isinstance(config.get("prompt"), str):
        console.print(Rule("prompt"))
        console.print(literal(config["prompt"]))
    for name, trace in session.traces.items():
        done = trace.done
        status = done.reason if done else "no end recorded"
        console.print(Rule(literal(f"{name} ({plural(len(trace.tokens), 'token')}, {status})",
                                   one_line=True)))
        console.print(literal(trace.text))
        if done and done.error:
            console.print(literal(f"error: {done.error}", "red"))
        drafts = session.settings.max_drafts(name) if session.settings else 0
        if costs is not None and drafts:
            console.print(literal(costs.line(drafts)))

    stats = convention_stats(session, conventions)
    title = "statistics" + ("" if conventions == "specdeck" else f" ({conventions} names)")
    table = Table(title=title, title_justify="left")
    table.add_column("")
    for name in stats:
        table.add_column(literal(name, one_line=True), justify="right")
    keys = list(next(iter(stats.values()), {}))
    for key in keys:
        table.add_row(key, *(format_stat(key, s.get(key)) for s in stats.values()))
    console.print(table)


# --- diff -----------------------------------------------------------------------------


def cmd_diff(args: argparse.Namespace) -> int:
    import orjson

    from specdeck.sessions.diff import DiffError, diff_sessions
    from specdeck.sessions.session import read_document, session_from_document
    from specdeck.sessions.sweep_file import is_sweep, sweep_from_document

    document = read_document(args.a, args.max_file_size)
    if is_sweep(document):
        if args.html is not None:
            raise DiffError("--html diffs two sessions; a sweep diff prints (or --json)")
        if args.b is None:
            raise DiffError("a sweep is compared with another sweep: specdeck diff A.json B.json")
        other = read_document(args.b, args.max_file_size)
        return diff_sweep_files(sweep_from_document(document, args.a),
                                sweep_from_document(other, args.b), args.json)
    a = session_from_document(document, args.a)
    same = args.b is None or args.b.resolve() == args.a.resolve()
    b = a if same else session_from_document(read_document(args.b, args.max_file_size), args.b)
    if args.strategy and same:
        raise DiffError("--strategy compares two sessions; for two strategies of one "
                        "session use --pair A_NAME B_NAME")
    if args.strategy:
        pairs = [(args.strategy, args.strategy)]
    elif args.pair:
        pairs = [tuple(args.pair)]
    else:
        pairs = None
    report = diff_sessions(
        a, b, pairs, a_label=str(args.a), b_label=str(args.b if not same else args.a),
        conventions=args.conventions,
    )
    if args.html is not None:
        from specdeck.commands.export import write_diff_page

        written = write_diff_page(report, args.a, None if same else args.b, args.html)
        if written:
            return written
    elif args.json:
        sys.stdout.buffer.write(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2))
        sys.stdout.buffer.write(b"\n")
    else:
        print_diff(report)
    return EXIT_SAME if report.identical else EXIT_DIFFERENT


def diff_sweep_files(a, b, as_json: bool) -> int:
    """Two sweeps cell by cell; exit 1 when a cell is missing on one side or its
    correctness differs (timings always differ a little)."""
    from dataclasses import asdict

    import orjson
    from rich.table import Table

    from specdeck.sessions.diff import setting_changes
    from specdeck.safe_text.rich_text import literal
    from specdeck.sessions.sweep_file import diff_sweeps

    rows = diff_sweeps(a, b)
    changes = setting_changes(a, b)
    differs = any(
        row["a"] is None or row["b"] is None or row["a"]["correct"] != row["b"]["correct"]
        for row in rows
    )
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(
            {"a": str(a.path), "b": str(b.path), "changes": [asdict(c) for c in changes],
             "cells": rows}, option=orjson.OPT_INDENT_2) + b"\n")
        return EXIT_DIFFERENT if differs else EXIT_SAME

    def value(side: dict | None, name: str, fmt: str) -> str:
        if side is None:
            return "missing"
        v = side[name]
        return MISSING if v is None else format(v, fmt)

    table = Table(title=literal(f"a: {a.path}\nb: {b.path}", "table.title"),
                  title_justify="left")
    for column in ("prompt", "temp", "setting", "tok/s a", "tok/s b", "speedup a",
                   "speedup b", "b / a", "accept a", "accept b", "check"):
        table.add_column(column, justify="left" if column in ("prompt", "setting") else "right")
    for row in rows:
        ca, cb = row["a"], row["b"]
        if ca is None or cb is None:
            check = f"missing in {'a' if ca is None else 'b'}"
        else:
            check = "ok" if ca["correct"] == cb["correct"] else "DIFFERS"
        table.add_row(
            literal(row["prompt"], one_line=True), f"{row['temperature']:g}",
            literal(row["label"], one_line=True),
            value(ca, "median_tokens_per_s", ".1f"), value(cb, "median_tokens_per_s", ".1f"),
            value(ca, "speedup", ".2f"), value(cb, "speedup", ".2f"),
            MISSING if row["speedup_ratio"] is None else f"{row['speedup_ratio']:.2f}",
            value(ca, "acceptance_rate", ".0%"), value(cb, "acceptance_rate", ".0%"), check,
        )
    console = _console()
    print_changes(console, changes)
    console.print(table)
    return EXIT_DIFFERENT if differs else EXIT_SAME


def print_diff(report) -> None:
    from rich.table import Column, Table

    from specdeck.sessions.diff import quoted
    from specdeck.safe_text.rich_text import literal

    console = _console()
    console.print(literal(f"a: {report.a_label}", one_line=True))
    console.print(literal(f"b: {report.b_label}", one_line=True))
    if report.conventions != "specdeck":
        console.print(f"speculation statistics named and computed as {report.conventions} "
                      "does (specdeck diff --help says how)")
    print_changes(console, report.changes)
    for pane in report.panes:
        console.print()
        console.print(literal(pane.summary(), "bold" if pane.identical else ""))
        for edit in pane.edits[:SHOWN_EDITS]:
            console.print(literal(
                f"  token {edit.a_start} (b {edit.b_start}) {edit.op}: "
                f"- {quoted(edit.a_text)}  + {quoted(edit.b_text)}",
            ))
        if len(pane.edits) > SHOWN_EDITS:
            console.print(f"  ... and {len(pane.edits) - SHOWN_EDITS} more (--json lists all)")
        columns, rows = stats_table(f"a {pane.a_strategy}", f"b {pane.b_strategy}", pane.stats)
        table = Table(*(Column(literal(title, one_line=True), justify=justify)
                        for title, justify in columns))
        for row in rows:
            table.add_row(*row)
        console.print(table)


def print_changes(console, changes) -> None:
    """The settings and machine values that differ (``specdeck.sessions.diff.Change``s), if any."""
    from rich.table import Table

    from specdeck.safe_text.rich_text import literal

    from specdeck.sessions.diff import shown_changes

    if not changes:
        return
    shown, folded = shown_changes(changes)
    table = Table(title="settings that differ", title_justify="left")
    for column in ("", "a", "b"):
        table.add_column(column)
    for change in shown:
        table.add_row(literal(change.path, one_line=True),
                      literal(setting_text(change.path, change.a)),
                      literal(setting_text(change.path, change.b)))
    if shown:
        console.print(table)
    if folded:
        console.print(f"{folded}: --json lists them")
