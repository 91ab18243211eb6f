"""Options and output the commands share: which models, how to decode, a split target,
lines on stderr, results written."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Callable

from specdeck.engines.core.config import (
    MAX_ALTERNATIVES, MAX_DRAFT_TOKENS, MAX_MTP_DEPTH, DecodeSettings, DraftCount, Sampling,
    field_default, parse_draft_count,
)
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.core.strategies import names
from specdeck.engines.core.requests import (
    BACKENDS, MAX_REPEATS, SHARD_MODES, STALL_SECONDS, CompareRequest, GroupSpec,
    SweepRequest,
)
from specdeck.safe_text.plain import MESSAGE_CHARS, visible


#: The option defaults, from the dataclasses the options fill (written once, there).
SETTINGS, SAMPLING = DecodeSettings(), Sampling()


def add_model_options(p: argparse.ArgumentParser, *, command: bool) -> None:
    """Options that pick the models and how their weights are kept: on ``specdeck`` itself
    (the playground) and again on a ``command``, where they default to what was given
    before the command's name (``specdeck --family smollm2 compare`` runs smollm2: a
    default of the command's own would quietly put the demo models back)."""
    from specdeck.engines.core.config import DTYPES
    from specdeck.engines.models.families import FAMILIES

    p.add_argument("--family", choices=list(FAMILIES),
                   default=argparse.SUPPRESS if command else None,
                   help="a model family by name: its target and draft (smollm2 after "
                   "`specdeck fetch smollm2`)")
    p.add_argument("--dtype", choices=DTYPES, default=argparse.SUPPRESS if command else "fast",
                   help="fast (default): half-precision weights run as float32 on the CPU; "
                   "native: as stored, matching `mlx_lm generate` bit for bit")


def draft_count(value: str) -> DraftCount:
    """An option's draft count: a whole number or a policy (``auto``, ``grow``,
    ``pmin:P``)."""
    try:
        return parse_draft_count(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number, auto, grow or pmin:P, got {value!r}")


def add_run_options(p: argparse.ArgumentParser) -> None:
    from specdeck.engines.models.families import prompt_defaults

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
        help=f"comma-separated, run in this order ({names()}; chain: prompt lookup where "
        "the text repeats, the draft model or MTP head elsewhere); draft@grow, mtp@2, "
        "ngram@auto: that strategy with its own drafts per round, beside the others",
    )
    p.add_argument("--prompt",
                   help="prompt text, a built-in prompt's name (code, prose, chat_explain, ... in "
                   "prompts/), a prompt file, or a folder or JSONL file holding one "
                   "(default: the family's built-in prompt, as bare specdeck opens on: "
                   f"{prompt_defaults()}; another model: the demo family's)")
    p.add_argument("-k", "--num-draft-tokens", type=draft_count,
                   default=SETTINGS.num_draft_tokens,
                   help=f"drafts per round, 1..{MAX_DRAFT_TOKENS}, or a policy choosing each "
                   "round's: auto (from the acceptance and costs measured so far), grow "
                   "(transformers' +2 / -1), pmin:P (llama.cpp's: draft while the draft's top "
                   "probability is at least P) (default %(default)s)")
    p.add_argument("--depth", type=draft_count, default=SETTINGS.mtp_depth,
                   help=f"MTP drafts per cycle, 1..{MAX_MTP_DEPTH}, or auto, grow, pmin:P "
                   "(default %(default)s)")
    p.add_argument("--ngram", type=int, default=SETTINGS.ngram_n,
                   help="prompt lookup: tokens to match at least (default %(default)s)")
    p.add_argument("--ngram-k", type=draft_count, default=SETTINGS.ngram_k,
                   help=f"prompt lookup: most drafts per round, 1..{MAX_DRAFT_TOKENS}, or "
                   "auto, grow, pmin:P (default %(default)s)")
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
                   help="tokens of the untimed warm-up run per strategy, at most --max-tokens "
                   "(0: none; default %(default)s)")
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
    if not 0 < args.stall_timeout < math.inf:
        raise SettingsError(f"--stall-timeout must be a number of seconds > 0 "
                            f"(got {args.stall_timeout})")
    if args.shard is None:
        if args.ranks or hosts or args.hostfile:
            raise SettingsError("--ranks, --hosts and --hostfile split the target: add "
                                "--shard tensor (or --shard pipeline)")
        return None
    spec = GroupSpec(shard=args.shard, backend=args.backend, hosts=hosts,
                     hostfile=args.hostfile, ranks=args.ranks or len(hosts) or 1)
    spec.validate()
    return spec


def check_output(path: Path | None, flag: str) -> None:
    """Refuse, before the run, an output path nothing can be written to (a directory, a
    block device, a socket); a stream (/dev/stdout, a FIFO) is written through."""
    from specdeck.engines.core.atomic_files import NotWritable, check_writable

    if path is None:
        return
    try:
        check_writable(path)
    except NotWritable as exc:
        raise SettingsError(f"{flag} {path} is {exc.kind}: name a file to write") from None


def require_models(request: CompareRequest | SweepRequest) -> None:
    """Each model ``request`` names, found and its folder checked, before anything slower
    starts (the app, a group, mlx-lm's import: ~1 s): a wrong path is said at once."""
    from specdeck.engines.models.catalog import resolve

    revision = getattr(request, "revision", None)
    for source in (request.target, request.draft, request.mtp_model):
        if source:
            resolve(source, revision if source == request.target else None)


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


def say(message: str) -> None:
    """A line about the run, on stderr (stdout carries the results); its text may name
    files and models from others, so control characters are shown, never sent."""
    print(f"specdeck: {visible(message, MESSAGE_CHARS)}", file=sys.stderr, flush=True)


def write_results(document: dict, json_path: Path | None, save: bool,
                  sessions_dir: Path | None, say: Callable[[str], None]) -> bool:
    """Write ``--json`` (when asked) and save the session into ``sessions_dir`` (when
    ``save``), each independently: one failing never stops the other. A session its
    folder cannot take goes to a fallback place, named. False when anything did not land
    where it was asked to."""
    from specdeck.sessions.session import save_document
    from specdeck.sessions.store import SaveFailed, save_session, why_not

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
