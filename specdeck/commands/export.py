"""``specdeck export`` (a session as a web page, a cast or a picture; a sweep as a page)
and the page of ``specdeck diff --html``.

A file to export is read as ``specdeck replay`` reads it: a missing, corrupt or too large
one ends in one line and exit status 2. The output goes beside the input unless named,
written whole or not at all, and never over anything but a regular file.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

from specdeck.engines.core.errors import UserError
from specdeck.commands.exit_status import EXIT_NOT_SAVED
from specdeck.commands.sessions import add_size_limit
from specdeck.safe_text.plain import MESSAGE_CHARS, visible

#: ``--html`` (``--cast``, ``--svg``) given without OUT: beside the file, its suffix changed.
NEXT_TO = ""
FORMATS = ("html", "cast", "svg")


def terminal_size(value: str) -> tuple[int, int]:
    """``--size``: columns x rows, e.g. 120x30."""
    try:
        columns, rows = (int(part) for part in value.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected COLUMNSxROWS like 120x30, got {value!r}")
    if not (40 <= columns <= 1000 and 10 <= rows <= 500):
        raise argparse.ArgumentTypeError("a size from 40x10 to 1000x500")
    return columns, rows


def inspected(value: str) -> tuple[str, int | None]:
    """``--inspect``: a strategy, and a round number after a colon or none."""
    strategy, colon, number = value.rpartition(":") if ":" in value else (value, "", "")
    try:
        return strategy, int(number) if colon else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected STRATEGY or STRATEGY:ROUND, got {value!r}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    export = sub.add_parser(
        "export", help="share a session: one web page, a terminal recording or a picture",
        description="Write a session as one self-contained web page (it loads nothing: it "
        "opens from disk, offline), as an asciinema recording of its race as the app "
        "plays it, or as an SVG of the finished race; a sweep as a web page. OUT "
        "defaults to the file's name with the format's suffix, beside it.")
    export.set_defaults(run=run)
    export.add_argument("file", type=Path, help="a session or a sweep (sessions/*.json)")
    form = export.add_mutually_exclusive_group(required=True)
    for name, what in (("html", "one self-contained web page"),
                       ("cast", "an asciinema v2 recording of the race (asciinema play OUT)"),
                       ("svg", "a picture of the finished race")):
        form.add_argument(f"--{name}", nargs="?", const=NEXT_TO, metavar="OUT",
                          help=f"{what} (default OUT: FILE.{name})")
    export.add_argument("--size", type=terminal_size, metavar="COLSxROWS",
                        help="the terminal of --cast and --svg (default 160x45)")
    export.add_argument("--inspect", type=inspected, metavar="STRATEGY[:ROUND]",
                        help="--svg: that round open in the inspector (default ROUND: the "
                        "strategy's first with a rejected draft)")
    add_size_limit(export)


def _output(given: Path | str, default: Path) -> Path:
    """Where to write: ``given`` (``default``'s name in it when it is a directory), else
    ``default``. Refused when something other than a regular file (or a link, which is
    replaced, never written through) stands there."""
    path = default if given == NEXT_TO else Path(given)
    if path.is_dir():
        path = path / default.name
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise UserError(f"cannot write {path} ({exc.strerror or exc})") from None
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise UserError(f"{path} is not a regular file: not overwritten")
    return path


def _write(path: Path, content: bytes) -> int:
    """Write ``content`` to ``path`` whole or not at all; the exit status."""
    from specdeck.engines.core.atomic_files import write_atomic
    from specdeck.engines.core.formatting import byte_size
    from specdeck.sessions.store import why_not

    try:
        write_atomic(path, content)
    except OSError as exc:
        print(f"specdeck: error: cannot write {visible(str(path), MESSAGE_CHARS)} "
              f"({why_not(exc)})", file=sys.stderr)
        return EXIT_NOT_SAVED
    print(f"specdeck: wrote {visible(str(path), MESSAGE_CHARS)} ({byte_size(len(content))})",
          file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    from specdeck.sessions.session import read_document, session_from_document
    from specdeck.sessions.sweep_file import is_sweep, sweep_from_document

    form = next(name for name in FORMATS if getattr(args, name) is not None)
    document = read_document(args.file, args.max_file_size)
    out = _output(getattr(args, form), args.file.with_suffix(f".{form}"))
    title = f"specdeck: {args.file.name}"
    size = {"size": args.size} if args.size else {}
    if args.inspect is not None and form != "svg":
        raise UserError("--inspect opens a round in the picture: give --svg")
    if is_sweep(document):
        if form != "html":
            raise UserError(f"{args.file} is a sweep, which has no race: --html exports it")
        from specdeck.export.page import render_page
        from specdeck.export.page_data import sweep_page

        content = render_page(sweep_page(sweep_from_document(document, args.file), title),
                              title)
    elif form == "html":
        from specdeck.export.page import render_page
        from specdeck.export.page_data import session_page

        content = render_page(session_page(session_from_document(document, args.file), title),
                              title)
    elif form == "cast":
        from specdeck.export.cast import race_cast

        content = race_cast(session_from_document(document, args.file), title, **size)
    else:
        from specdeck.export.still import race_svg

        content = race_svg(session_from_document(document, args.file), **size,
                           inspect=args.inspect).encode()
    return _write(out, content)


def write_diff_page(report, a: Path, b: Path | None, given: Path | str) -> int:
    """``specdeck diff A [B] --html [OUT]``: the diff (``specdeck.sessions.diff.DiffReport``) as a
    page, by default beside A as ``A-vs-B.html`` (``A.diff.html`` for one session)."""
    from specdeck.export.page import render_page
    from specdeck.export.page_data import diff_page

    name = f"{a.stem}-vs-{b.stem}.html" if b is not None else f"{a.stem}.diff.html"
    out = _output(given, a.with_name(name))
    title = f"specdeck diff: {a.name}" + (f" vs {b.name}" if b is not None else "")
    return _write(out, render_page(diff_page(report, title), title))
