"""The ``specdeck`` command: the playground by default, headless subcommands for scripts.

Every user error (a wrong path, mismatched tokenizers, an out-of-range setting) ends in
one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from specdeck.engines.config import (
    MAX_ALTERNATIVES, MAX_DRAFT_TOKENS, MAX_MTP_DEPTH, DecodeSettings, DraftCount, Sampling,
    field_default, parse_draft_count,
)
from specdeck.engines.errors import GroupError, ModelError, SettingsError, UserError
from specdeck.engines.formatting import percent, plural, rate, times
from specdeck.engines.group_costs import PassCosts
from specdeck.engines.requests import (
    BACKENDS, MAX_REPEATS, RANK_VARIABLE, SHARD_MODES, STALL_SECONDS, CompareRequest, GroupSpec,
    launched,
)
from specdeck.prompts import DEFAULT_PROMPT
from specdeck import (
    calibrate_command, fetch_command, models_command, session_commands, sweep_command,
)
from specdeck.exit_status import (
    EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_NOT_SAVED, EXIT_RUN_FAILED, EXIT_USAGE,
)
from specdeck.diff import DiffError
from specdeck.session import SessionError
from specdeck.visible import MESSAGE_CHARS, visible


#: The option defaults, from the dataclasses the options fill (written once, there).
SETTINGS, SAMPLING = DecodeSettings(), Sampling()


def add_model_options(p: argparse.ArgumentParser, *, command: bool) -> None:
    """Options that pick the models and how their weights are kept: on ``specdeck`` itself
    (the playground) and again on a ``command``, where they default to what was given
    before the command's name (``specdeck --family smollm2 compare`` runs smollm2: a
    default of the command's own would quietly put the demo models back)."""
    from specdeck.engines.config import DTYPES
    from specdeck.engines.families import FAMILIES

    p.add_argument("--family", choices=list(FAMILIES),
                   default=argparse.SUPPRESS if command else None,
                   help="a model family by name: its target and draft (smollm2 after "
                   "`specdeck fetch smollm2`)")
    p.add_argument("--dtype", choices=DTYPES, default=argparse.SUPPRESS if command else "fast",
                   help="fast (default): half-precision weights run as float32 on the CPU; "
                   "native: as stored, matching `mlx_lm generate` bit for bit")


def draft_count(value: str) -> DraftCount:
    """An option's draft count: a whole number or ``auto``."""
    try:
        return parse_draft_count(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {value!r}")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    add_model_options(p, command=True)
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
        help="comma-separated, run in this order (plain, draft, mtp, ngram, chain: "
        "prompt lookup where the text repeats, the draft model or MTP head elsewhere)",
    )
    p.add_argument("--prompt",
                   help="prompt text, a built-in prompt's name (code, prose, chat_explain, ... in "
                   "prompts/), a prompt file, or a folder or JSONL file holding one "
                   f"(default: the built-in {DEFAULT_PROMPT!r} prompt, as bare specdeck)")
    p.add_argument("-k", "--num-draft-tokens", type=draft_count,
                   default=SETTINGS.num_draft_tokens,
                   help=f"drafts per round, 1..{MAX_DRAFT_TOKENS}, or auto: chosen each round "
                   "from the acceptance and costs measured so far (default %(default)s)")
    p.add_argument("--depth", type=draft_count, default=SETTINGS.mtp_depth,
                   help=f"MTP drafts per cycle, 1..{MAX_MTP_DEPTH}, or auto "
                   "(default %(default)s)")
    p.add_argument("--ngram", type=int, default=SETTINGS.ngram_n,
                   help="prompt lookup: tokens to match (default %(default)s)")
    p.add_argument("--ngram-k", type=draft_count, default=SETTINGS.ngram_k,
                   help=f"prompt lookup: most drafts per round, 1..{MAX_DRAFT_TOKENS}, or "
                   "auto (default %(default)s)")
    p.add_argument("--max-tokens", type=int, default=SETTINGS.max_tokens,
                   help="tokens to generate at most (default %(default)s)")
    p.add_argument("--temp", type=float, default=SAMPLING.temperature,
                   help="temperature; 0 is greedy (default %(default)s)")
    p.add_argument("--top-p", type=float, default=SAMPLING.top_p,
                   help="sample from the most likely tokens holding this much probability "
                   "(1.0: all)")
    p.add_argument("--top-k", type=int, default=SAMPLING.top_k,
                   help="sample from the k most likely tokens (0: all)")
    p.add_argument("--min-p", type=float, default=SAMPLING.min_p,
                   help="drop tokens less likely than this share of the likeliest (0: none)")
    p.add_argument("--seed", type=int, default=SAMPLING.seed,
                   help="0 to 2**64 - 1 (default %(default)s)")
    p.add_argument("--max-kv-size", type=int, default=SETTINGS.max_kv_size,
                   help="bound the KV cache (rotating window; default: unbounded)")
    p.add_argument("--alternatives", type=int, default=SETTINGS.alternatives,
                   help="record the target's top-N alternatives at each position "
                   f"(0..{MAX_ALTERNATIVES}; default %(default)s; the app records at "
                   "least 5, which its inspector shows)")
    p.add_argument("--warmup-tokens", type=int,
                   default=field_default(CompareRequest, "warmup_tokens"),
                   help="tokens of the untimed warm-up run per strategy (0: none; "
                   "default %(default)s)")
    p.add_argument("--repeats", type=int, default=field_default(CompareRequest, "repeats"),
                   help=f"timed runs of each strategy, 1..{MAX_REPEATS}, taking turns; each "
                   "keeps its median run and the spread says how much is noise (with 1, "
                   "plain is timed again after the others; default %(default)s)")
    p.add_argument("--ignore-eos", action="store_true", help="always generate --max-tokens")
    p.add_argument("--strict", action="store_true",
                   help="refuse to run when the memory estimate exceeds free memory "
                   "(default: warn)")
    p.add_argument("--force", action="store_true",
                   help="run even when the memory estimate is beyond this machine's whole "
                   "memory (default: refuse)")
    add_group_options(p)
    chat = p.add_mutually_exclusive_group()
    chat.add_argument("--chat", dest="chat", action="store_true", default=None,
                      help="wrap the prompt in the chat template")
    chat.add_argument("--raw", dest="chat", action="store_false",
                      help="feed the prompt as is (default when there is no chat template)")


def add_group_options(p: argparse.ArgumentParser) -> None:
    """Options of a run whose target is split over a group of processes."""
    g = p.add_argument_group(
        "a target split over several processes or machines (mlx.distributed)")
    g.add_argument("--shard", choices=SHARD_MODES,
                   help="split the target: tensor (mlx-lm's shard) or pipeline (whole "
                   "layers per rank, where the model offers it). With -n, --hosts or "
                   "--hostfile, specdeck starts the ranks through mlx.launch; started by "
                   "mlx.launch, it is one of them; else it runs as a group of one")
    g.add_argument("-n", "--ranks", type=int, metavar="N",
                   help="processes in all: on this machine, or spread over --hosts")
    g.add_argument("--hosts", metavar="H1,H2",
                   help="the machines, comma-separated (IP addresses for the ring backend)")
    g.add_argument("--hostfile", metavar="FILE",
                   help="an mlx.launch hostfile (JSON: each host's ssh name and ips)")
    g.add_argument("--backend", choices=BACKENDS, default=field_default(GroupSpec, "backend"),
                   help="mlx.distributed backend (default %(default)s; jaccl: Thunderbolt 5 RDMA)")
    g.add_argument("--python", metavar="PATH",
                   help="the Python with specdeck on every host (default: this one's path)")
    g.add_argument("--stall-timeout", type=float, default=STALL_SECONDS, metavar="SECONDS",
                   help="end a split run (saving what ran) when nothing moves for this "
                   "long, a rank being stuck (default %(default)g)")


def group_from(args: argparse.Namespace) -> GroupSpec | None:
    """The group the options ask for; None when the target runs whole in this process."""
    hosts = tuple(h.strip() for h in (args.hosts or "").split(",") if h.strip())
    if args.shard is None:
        if args.ranks or hosts or args.hostfile:
            raise SettingsError("--ranks, --hosts and --hostfile split the target: add "
                                "--shard tensor (or --shard pipeline)")
        return None
    if args.stall_timeout <= 0:
        raise SettingsError("--stall-timeout must be > 0 seconds")
    spec = GroupSpec(shard=args.shard, backend=args.backend, hosts=hosts,
                     hostfile=args.hostfile, ranks=args.ranks or len(hosts) or 1)
    spec.validate()
    return spec


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
    compare = sub.add_parser("compare", help="run strategies one after another on one prompt")
    _add_run_options(compare)
    compare.add_argument("--headless", action="store_true", help="no app: print a summary")
    compare.add_argument("--json", type=Path, help="write the result as JSON here")
    compare.add_argument("--sessions-dir", type=Path, default=None, metavar="DIR",
                         help="save every run here (default: $SPECDECK_SESSIONS_DIR, "
                         "else sessions/)")
    compare.add_argument("--no-save", action="store_true", help="do not save the session")
    compare.add_argument("--quiet", action="store_true",
                         help="--headless: one line per strategy (no text, lossless check "
                         "or why-line)")
    compare.add_argument("--show-text", metavar="STRATEGY",
                         help="--headless: print this strategy's text (default: the first's)")
    sweep_command.add_parser(sub)
    session_commands.add_parsers(sub)
    models_command.add_parser(sub)
    calibrate_command.add_parser(sub)
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
    from specdeck.engines.compare import run_compare

    if launched():  # one rank of a group mlx.launch started: every rank builds the request
        if not args.headless:
            raise UserError("under mlx.launch, run compare --headless (the playground "
                            "starts its own group: specdeck compare --shard tensor -n 2)")
        from specdeck import group_command

        return group_command.compare(args, lambda: compare_request(args))
    request = compare_request(args)
    if not args.headless:
        return open_playground(request, args.sessions_dir, save=not args.no_save)
    if request.group is not None:
        from specdeck import group_command, group_launch

        if request.group.wants_launch:
            return group_launch.relaunch(request.group, args.argv, args.python)
        return group_command.compare(args, lambda: request)
    with first_interrupt_cancels() as stop:
        result = run_compare(request, progress=say, cancelled=stop.is_set)
    return report_compare(result, args, stop.is_set())


def compare_request(args: argparse.Namespace) -> CompareRequest:
    """The comparison the command line asks for, checked."""
    from specdeck.engines.families import models_for
    from specdeck.prompts import get_prompt, read_prompt

    target, draft = models_for(args.family, args.target, args.draft)
    request = CompareRequest(
        target=target,
        draft=draft,
        mtp_model=args.mtp_model,
        revision=args.revision,
        strategies=[s.strip() for s in args.strategies.split(",") if s.strip()],
        prompt=get_prompt().text if args.prompt is None else read_prompt(args.prompt),
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
    if args.json is not None and args.json.is_dir():
        raise UserError(f"--json {args.json} is a directory: name a file to write")
    return request


def say(message: str) -> None:
    """A line about the run, on stderr (stdout carries the results); its text may name
    files and models from others, so control characters are shown, never sent."""
    print(f"specdeck: {visible(message, MESSAGE_CHARS)}", file=sys.stderr, flush=True)


def report_compare(result, args: argparse.Namespace, interrupted: bool) -> int:
    """Save the comparison (``engines.compare.CompareResult``) as a session, write
    ``--json`` and print one line per strategy; the command's exit status."""
    from specdeck.session import result_document

    if interrupted and not result.traces:
        say("interrupted before any strategy ran: nothing to save")
        return EXIT_INTERRUPTED
    document = result_document(result)
    costs = PassCosts.from_dict((result.group or {}).get("pass_costs"))
    if not args.quiet:
        print_text(result.traces, args.show_text or next(iter(result.traces)))
    failed = False
    for name, entry in document["strategies"].items():
        stats, done = entry["stats"], entry["done"] or {}
        accepted = stats["acceptance_rate"]
        speed = stats["speedup_vs_plain"]
        print(
            f"{name:>6}: {plural(stats['generated_tokens'], 'token')}, "
            f"{rate(stats['tokens_per_s'] or 0)}"
            + (f", acceptance {percent(accepted)}" if accepted is not None else "")
            + (f", {times(speed)} plain" if speed is not None and name != "plain" else "")
            + f", {done.get('reason', '?')}"
        )
        if not args.quiet:
            for line in explain_run(name, result):
                print(f"        {visible(line, MESSAGE_CHARS)}")
        if costs is not None and name != "plain":
            print(f"        {costs.line(result.request.settings.max_drafts(name))}")
        if done.get("reason") == "error":
            failed = True
            error = visible(str(done.get("error")), MESSAGE_CHARS)
            print(f"specdeck: {name} failed: {error}", file=sys.stderr)
    sys.stdout.flush()
    saved = write_results(document, args.json, not args.no_save, args.sessions_dir, say)
    if interrupted:
        return EXIT_INTERRUPTED
    if not saved:
        return EXIT_NOT_SAVED
    return EXIT_RUN_FAILED if failed else 0


def print_text(traces: dict, name: str) -> None:
    """One strategy's generated text under a rule naming it (control characters shown)."""
    from specdeck.visible import printable

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
    from specdeck.diff import first_divergence, quoted
    from specdeck.engines.stats import (
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
    """How a run drafted, where there is more to say than its acceptance: what ``auto``
    chose, who drafted for ``chain``, and (``sampled``: temperature > 0) what mlx-lm's
    exact-match rule would have kept of the same drafts."""
    from specdeck.engines.draft_length import auto_summary
    from specdeck.engines.events import DRAFTER_WORDS

    lines = []
    auto = auto_summary(rounds)
    if auto:
        lines.append(auto)
    drafters = [r.proposer for r in rounds if r.proposer]
    if len(set(drafters)) > 1:
        lines.append("drafted by " + ", ".join(
            f"{DRAFTER_WORDS[name]} in {plural(drafters.count(name), 'round')}"
            for name in sorted(set(drafters))))
    shadow = stats.exact_match_acceptance_rate
    if sampled and shadow is not None:
        lines.append(f"mlx-lm's exact-match rule would have kept {percent(shadow)} of the "
                     f"same drafts (min(1, p/q) kept {percent(stats.acceptance_rate)})")
    return lines


def write_results(document: dict, json_path: Path | None, save: bool,
                  sessions_dir: Path | None, say: Callable[[str], None]) -> bool:
    """Write ``--json`` (when asked) and save the session into ``sessions_dir`` (when
    ``save``), each independently: one failing never stops the other. A session its
    folder cannot take goes to a fallback place, named. False when anything did not land
    where it was asked to."""
    from specdeck.session import save_document
    from specdeck.session_store import SaveFailed, save_session, why_not

    ok = True
    if json_path is not None:
        try:
            save_document(json_path, document)
            say(f"wrote {json_path}")
        except OSError as exc:
            ok = False
            say(f"error: cannot write --json {json_path} ({why_not(exc)})")
    if save:
        partial = " (partial)" if document["partial"] else ""
        try:
            outcome = save_session(document, sessions_dir)
        except SaveFailed as exc:
            say(f"error: the session was not saved: {exc}")
            return False
        if outcome.problem:
            ok = False
            say(f"error: {outcome.problem}; saved it to {outcome.path} instead{partial}")
        else:
            say(f"saved {outcome.path}{partial}")
    return ok


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
        # A rank that mlx.launch started may inherit Ctrl+C ignored: the second quits.
        signal.signal(signal.SIGINT, signal.default_int_handler
                      if previous is signal.SIG_IGN else previous)
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
    if request.group is not None:
        from specdeck.group_host import require_local_lead

        require_local_lead(request.group)
    problems = run_app(request, sessions_dir=sessions_dir, save_sessions=save, hint=hint)
    for line in problems:
        print(f"specdeck: error: {visible(line, MESSAGE_CHARS)}", file=sys.stderr)
    return EXIT_NOT_SAVED if problems else 0


def cmd_playground(args: argparse.Namespace) -> int:
    """``specdeck`` alone: the smollm2 family once fetched (plain, draft, prompt lookup on
    a chat prompt), else the demo models (plain, draft, MTP on code), whose status bar
    says how to fetch the real one."""
    from specdeck.engines.families import FAMILIES, default_family, fetch_hint, require_family
    from specdeck.prompts import get_prompt

    family = FAMILIES[args.family or default_family()]
    models = require_family(family.name)
    request = CompareRequest(
        target=models.target, draft=models.draft, strategies=list(family.strategies),
        prompt=get_prompt(family.prompt).text, dtype=args.dtype,
    )
    return open_playground(request, hint=fetch_hint() if family.name == "demo" else None)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what the ranks run again
    if args.command is None:
        args.command = "playground"
    try:
        status = {
            "compare": cmd_compare, "playground": cmd_playground, "sweep": sweep_command.run,
            "replay": session_commands.cmd_replay, "diff": session_commands.cmd_diff,
            "models": models_command.run, "fetch": fetch_command.run,
            "calibrate": calibrate_command.run,
        }[args.command](args)
        sys.stdout.flush()  # here, where a broken pipe is caught, not at exit
        return status
    except (UserError, SettingsError, ModelError, SessionError, DiffError) as exc:
        if isinstance(exc, GroupError) and os.environ.get(RANK_VARIABLE, "0") != "0":
            # Rank 0 says it for the group; failing here would make mlx.launch stop rank 0
            # before it has.
            return 0
        print(f"specdeck: error: {visible(str(exc), MESSAGE_CHARS)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("specdeck: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader left (specdeck ... | head): stop quietly. What is still buffered
        # goes nowhere, so flushing it at exit raises nothing either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def entry() -> None:
    """Console-script entry: use the system OpenBLAS on Linux, then run."""
    from specdeck.blas import reexec_with_openblas

    if not os.environ.get("PYTEST_CURRENT_TEST"):
        reexec_with_openblas(sys.argv[1:])
    sys.exit(main())
