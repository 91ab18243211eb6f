"""The ``specdeck`` command: the playground by default, headless subcommands for scripts.

Every user error (a wrong path, mismatched tokenizers, an out-of-range setting) ends in
one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from specdeck.commands import (
    calibrate, compare, export, fetch, models, playground, serve, sessions, sweep,
)
from specdeck.commands.options import add_model_options
from specdeck.commands.exit_status import (
    EXIT_BROKEN_PIPE, EXIT_RUN_FAILED, EXIT_USAGE,
)
from specdeck.hosts.stopping import stopped_status
from specdeck.engines.core.errors import (
    AppCrashed, GroupError, ModelError, SettingsError, UserError,
)
from specdeck.engines.core.requests import RANK_VARIABLE
from specdeck.safe_text.plain import MESSAGE_CHARS, visible
from specdeck.sessions.diff import DiffError
from specdeck.sessions.session import SessionError

#: Each command module adds its parser (``add_parser``), which names its ``run``.
COMMANDS = (compare, sweep, sessions, models, calibrate, fetch, export, serve)


class DefaultsShown(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it names it already or has
    none to name."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or "default" in text
                or any(action.default is none for none in (None, False, argparse.SUPPRESS))):
            return text
        return f"{text} (default: %(default)s)".lstrip()


class Parser(argparse.ArgumentParser):
    """specdeck's parsers (the subcommands' too): defaults shown in ``--help``, and a
    command's option given before any command named as that command's."""

    def __init__(self, *args, formatter_class: type = DefaultsShown, **kwargs) -> None:
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        self._words = list(sys.argv[1:] if args is None else args)  # for _check_value
        return super().parse_known_args(args, namespace)

    def _check_value(self, action: argparse.Action, value: str) -> None:
        # argparse checks a command's name here: `specdeck --prompt x.txt` takes x.txt
        # for one, and "invalid choice: 'x.txt'" reads as if the file were wrong.
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            hint = self._misplaced_option(value, action.choices)
            if hint is not None:
                self.error(visible(hint, MESSAGE_CHARS))
        super()._check_value(action, value)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # argparse's own says only "unrecognized arguments: --headless" for a command's
        # flag given before the command's name (or with none).
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            hint = self._flag_before_command(extras[0], getattr(namespace, "command", None))
            self.error(visible(hint, MESSAGE_CHARS) if hint
                       else f"unrecognized arguments: {' '.join(extras)}")
        return namespace

    def _commands(self) -> dict[str, argparse.ArgumentParser]:
        return next((action.choices for action in self._actions
                     if isinstance(action, argparse._SubParsersAction)), {})

    def _flag_before_command(self, word: str, command: str | None) -> str | None:
        """How to write a command's option that was given before the command's name
        (``command``, or none); None when no command has it."""
        option, _, value = word.partition("=")
        if not option.startswith("-"):
            return None
        owners = [name for name, parser in self._commands().items()
                  if option in parser._option_string_actions]
        owners.sort(key=lambda name: name != command)
        return self._command_option_hint(option, [word] if value else [option], owners)

    def _misplaced_option(self, rejected: str,
                          commands: dict[str, argparse.ArgumentParser]) -> str | None:
        """Which commands have the option whose value ``rejected`` is, and how to write
        it; None when it follows no such option (it is then just no command's name)."""
        words = self._words
        option = next((option for option, word in zip(words, words[1:])
                       if word == rejected and option.startswith("-")
                       and option not in self._option_string_actions), None)
        owners = [name for name, parser in commands.items()
                  if getattr(parser._option_string_actions.get(option), "nargs", 0) != 0]
        return self._command_option_hint(option, [option, rejected], owners)

    def _command_option_hint(self, option: str | None, written: list[str],
                             owners: list[str]) -> str | None:
        if not owners:
            return None
        others = f" (or {', '.join(owners[1:])})" if owners[1:] else ""
        return (f"{option} is an option of a command: "
                f"{shlex.join([self.prog, owners[0], *written])}{others}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("specdeck")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="specdeck",
        description="Compare LLM decoding strategies side by side: plain, draft-model "
        "speculation, MTP and prompt lookup. Bare specdeck opens the playground: on the "
        "smollm2 family once `specdeck fetch smollm2` has run, else on the built-in demo "
        "models (plain, draft and MTP on the default prompt); the commands below run your "
        "own models, headless or in the playground.",
    )
    add_model_options(parser, command=False)  # for the playground, `specdeck` alone
    parser.add_argument("--version", action="version", version=f"specdeck {_version()}")
    sub = parser.add_subparsers(dest="command")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what the ranks run again
    try:
        status = args.run(args) if args.command else playground.run(args)
        sys.stdout.flush()  # here, where a broken pipe is caught, not at exit
        return status
    except (UserError, SettingsError, ModelError, SessionError, DiffError) as exc:
        if isinstance(exc, GroupError) and os.environ.get(RANK_VARIABLE, "0") != "0":
            # Rank 0 says it for the group; failing here would make mlx.launch stop rank 0
            # before it has.
            return 0
        print(f"specdeck: error: {visible(str(exc), MESSAGE_CHARS)}", file=sys.stderr)
        return EXIT_USAGE
    except AppCrashed as exc:  # Textual printed the traceback above
        print(f"specdeck: error: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED
    except KeyboardInterrupt:
        print("specdeck: interrupted", file=sys.stderr)
        return stopped_status()
    except BrokenPipeError:
        # The reader left (specdeck ... | head): stop quietly. What is still buffered
        # goes nowhere, so flushing it at exit raises nothing either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def entry() -> None:
    """Console-script entry: use the system OpenBLAS on Linux, then run."""
    from specdeck.blas import reexec_with_openblas

    reexec_with_openblas(["-m", "specdeck", *sys.argv[1:]])
    sys.exit(main())
