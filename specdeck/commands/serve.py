"""``specdeck serve``: the playground served to web browsers with textual-serve
(Textual's own way), for a classroom's projector; on this machine only unless told.

Each page opened runs ``specdeck`` (or ``specdeck replay FILE``) in a process of its own,
drawing through Textual's web driver.
"""

from __future__ import annotations

import argparse
import ipaddress
import shlex
import sys
from pathlib import Path

from specdeck.engines.core.errors import UserError
from specdeck.safe_text.plain import MESSAGE_CHARS, visible

#: Where ``specdeck serve`` listens unless ``--host`` says otherwise: this machine only.
LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8000


def add_parser(sub: argparse._SubParsersAction) -> None:
    from specdeck.commands.options import add_model_options

    serve = sub.add_parser(
        "serve", help="the playground in a web browser (textual-serve)",
        description="Serve the playground to web browsers: each page opened runs its own "
        "playground on this machine. Only this machine can connect unless --host says "
        "otherwise.")
    serve.set_defaults(run=run)
    add_model_options(serve, command=True)
    serve.add_argument("--host", default=LOOPBACK,
                       help="the address to listen on (0.0.0.0: every network of this machine)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="the port to listen on")
    serve.add_argument("--replay", type=Path, metavar="FILE",
                       help="serve a saved session (or sweep) instead of live runs")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def served_command(args: argparse.Namespace) -> list[str]:
    """What each browser's connection runs: the playground (live, with the models asked
    for), or ``specdeck replay`` of ``--replay``."""
    command = [sys.executable, "-m", "specdeck"]
    if args.replay is not None:
        return [*command, "replay", str(args.replay.resolve())]
    for option in ("family", "dtype"):
        if getattr(args, option, None):
            command += [f"--{option}", getattr(args, option)]
    return command


def run(args: argparse.Namespace) -> int:
    from textual_serve.server import Server

    if args.replay is not None:
        from specdeck.sessions.session import read_document, session_from_document
        from specdeck.sessions.sweep_file import is_sweep, sweep_from_document

        document = read_document(args.replay)  # a broken file fails here, in one line
        (sweep_from_document if is_sweep(document) else session_from_document)(
            document, args.replay)
    if not 0 < args.port < 65536:
        raise UserError(f"--port {args.port}: a port is 1..65535")
    host = visible(args.host, MESSAGE_CHARS)
    if not is_loopback(args.host):
        print(f"specdeck: warning: listening on {host}: anyone who can reach port "
              f"{args.port} can run models on this machine", file=sys.stderr)
    print(f"specdeck: open http://{host}:{args.port}/ in a browser (Ctrl+C stops)",
          file=sys.stderr, flush=True)
    try:
        Server(shlex.join(served_command(args)), host=args.host, port=args.port,
               title="specdeck").serve()
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{args.port} "
                        f"({exc.strerror or exc})") from None
    return 0
