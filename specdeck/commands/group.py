"""``specdeck compare --headless --shard ...`` and ``specdeck sweep --shard ...``: the
group started (``launch``), and each as one rank of a group that ``mlx.launch`` (or
``specdeck launch``) started.

Every rank runs the same comparison (``engines.distributed``); rank 0 alone prints,
saves and reports, the others are silent. A mistake on the command line, or a model
missing on one host, ends every rank with one line from rank 0 naming the rank. When
the group cannot go on (a rank lost or stuck, SIGTERM from mlx.launch), rank 0 ends
with one error line and saves what ran as a partial session.
"""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import replace
from typing import Any, Callable, TypeVar

from specdeck.commands.options import group_from, say
from specdeck.hosts.stopping import Stopping
from specdeck.commands.exit_status import EXIT_RUN_FAILED
from specdeck.engines.core.errors import ModelError, SettingsError, UserError
from specdeck.engines.core.requests import CompareRequest, SweepRequest

Request = TypeVar("Request", CompareRequest, SweepRequest)


def launch(args: argparse.Namespace, request: CompareRequest | SweepRequest) -> int:
    """Start the group ``request`` asks for (mlx.launch, this command again on every
    rank), after refusing here a target the ranks could not split; its exit status."""
    from specdeck.engines.distributed.splittable import refuse_unsplittable
    from specdeck.hosts.launch import relaunch

    refuse_unsplittable(request.target, request.group.shard)
    return relaunch(request.group, args.argv, args.python)


def _silent(message: str) -> None:
    """What a rank other than rank 0 says: nothing."""


def _join(args: argparse.Namespace, build: Callable[[], Request]) -> tuple[Any, Request]:
    """Join the group, then build the request on every rank: a mistake on one rank (a
    prompt file missing on its host) stops them all, rank 0 saying which."""
    from specdeck.engines.distributed.split import start_group
    from specdeck.hosts.launch import die_with_parent

    die_with_parent(signal.SIGTERM)  # mlx.launch gone: end cleanly (rank 0 saves)
    spec = group_from(args)
    if spec is None:
        raise UserError("a rank of a group needs --shard tensor (or --shard pipeline)")
    group = start_group(spec)
    request, error = None, None
    try:
        request = build()
    except (UserError, SettingsError, ModelError) as exc:
        error = str(exc)
    group.check(error)
    if group.lead and group.size == 1:
        say("one rank: the target runs whole (-n, --hosts or --hostfile start several)")
    return group, replace(request, group=group.spec)


def compare(args: argparse.Namespace, build: Callable[[], CompareRequest],
            report: Callable[[Any, argparse.Namespace, bool], int]) -> int:
    """Run the comparison on this rank; rank 0 reports it through ``report`` (``specdeck
    compare``'s own report)."""
    from specdeck.engines.distributed.split import group_compare, split_store
    from specdeck.sessions.session import result_document
    from specdeck.sessions.store import SaveFailed, save_session

    group, request = _join(args, build)
    started: list[Any] = []  # the result, once loading is over (its traces fill live)

    def give_up(reason: str) -> None:
        """Rank 0 ends a run the group cannot finish: one error line, what ran saved."""
        if not group.lead:
            return
        print(f"specdeck: error: {reason}", file=sys.stderr, flush=True)
        result = started[0] if started else None
        if result is None or not result.traces:
            say("nothing was measured yet: no session saved")
        elif args.no_save:
            say("not saved (--no-save)")
        else:
            try:
                outcome = save_session(result_document(result), args.sessions_dir)
            except SaveFailed as exc:
                say(f"error: the session was not saved: {exc}")
                return
            where = (f"{outcome.problem}; saved it to {outcome.path} instead"
                     if outcome.problem else f"saved {outcome.path}")
            say(f"{where} (partial)")

    def run(guard: Any, cancelled: Callable[[], bool]) -> Any:
        return group_compare(request, group, split_store(group, request.target),
                             progress=say if group.lead else _silent, cancelled=cancelled,
                             on_started=started.append, guard=guard)

    return _as_rank(group, args, give_up, run,
                    lambda result, interrupted: report(result, args, interrupted))


def sweep(args: argparse.Namespace, build: Callable[[], SweepRequest],
          finish: Callable[..., int], progress: Callable[[Any], None]) -> int:
    """Run the sweep on this rank; rank 0 ends it through ``finish`` (the sweep
    command's own ending, given the group's record), the others stay silent."""
    from specdeck.engines.distributed.split import group_sweep, split_store

    group, request = _join(args, build)
    talk = say if group.lead else _silent

    def give_up(reason: str) -> None:
        if group.lead:
            print(f"specdeck: error: {reason}", file=sys.stderr, flush=True)

    def run(guard: Any, cancelled: Callable[[], bool]) -> Any:
        return group_sweep(request, group, split_store(group, request.target),
                           progress=progress if group.lead else _silent, on_message=talk,
                           cancelled=cancelled, guard=guard)

    return _as_rank(group, args, give_up, run,
                    lambda ran, interrupted: finish(request, *ran, talk))


def _as_rank(group: Any, args: argparse.Namespace, give_up: Callable[[str], None],
             run: Callable[[Any, Callable[[], bool]], Any],
             report: Callable[[Any, bool], int]) -> int:
    """``run(guard, cancelled)`` on this rank under a fault guard and Ctrl+C; then rank 0
    reports what ran (``report(ran, interrupted)``), or gives up when the group was lost."""
    from specdeck.engines.distributed.split import FaultGuard

    with FaultGuard(give_up, args.stall_timeout) as guard, Stopping("cancel") as stop:
        ran = run(guard, stop.is_set)
        with guard.ending():
            if not group.lead:
                return 0  # rank 0 reports for the group (a failure here would stop it early)
            if group.lost is not None:
                give_up(group.lost)
                return EXIT_RUN_FAILED
            return report(ran, stop.is_set())
