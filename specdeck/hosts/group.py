"""The playground's engine on a group of processes: a target split over them.

``GroupHost`` has ``ProcessHost``'s interface (submit, cancel, close) and sends the app
the same messages, but its engine is a group of ranks that ``mlx.launch`` starts
(``specdeck.hosts.launch``), each running ``rank_main`` below. Rank 0 talks to the app
over a local connection (``multiprocessing.connection``, authenticated with a key only
the two hold: mlx.launch starts ranks through a shell, which passes on the environment
but no file descriptors, so ``ProcessHost``'s pipe cannot reach it); it hands each
command to the other ranks through an mlx collective, every rank runs it
(``engines.distributed.group_compare``), and rank 0 alone streams events, saves the
session and answers. Rank 0 runs on this machine; other ranks anywhere mlx.launch
reaches.
"""

from __future__ import annotations

import os
import pickle
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from multiprocessing.connection import Client, Listener
from pathlib import Path
from typing import Any, Callable

from specdeck.hosts.engine import (
    ChildHost, EngineMessage, RunCommand, RunEnded, last_line, serve_run,
)
from specdeck.engines.core.errors import GroupError, SettingsError
from specdeck.engines.core.requests import STALL_SECONDS, GroupSpec

#: Where rank 0 finds the app, and the key that proves it is the app's own rank.
ADDRESS_VARIABLE = "SPECDECK_ENGINE_ADDRESS"
KEY_VARIABLE = "SPECDECK_ENGINE_KEY"
#: Seconds the ranks have to start, load mlx and reach the app.
CONNECT_SECONDS = 120.0


@dataclass(frozen=True)
class Cancel:
    """The app cancelled run ``run_id`` and any before it."""

    run_id: int


def group_size(spec: GroupSpec) -> str:
    """How many ranks on which hosts, for a status line: ``2 ranks``, ``2 hosts``."""
    if spec.hostfile:
        return Path(spec.hostfile).name
    if spec.hosts:
        return f"{len(spec.hosts)} hosts" + (f" x {spec.ranks // len(spec.hosts)}"
                                             if spec.ranks > len(spec.hosts) else "")
    return f"{spec.ranks} ranks"


def _local_addresses() -> set[str]:
    names = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
    try:
        names.update(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    return names


def require_local_lead(spec: GroupSpec) -> None:
    """Refuse a group whose rank 0 (its first host) is another machine: rank 0 reports
    to the app over this machine's loopback."""
    first = spec.hosts[0] if spec.hosts else None
    if spec.hostfile:
        from specdeck.hosts.launch import read_hostfile

        hosts = read_hostfile(spec.hostfile)
        try:
            hosts = hosts["hosts"] if isinstance(hosts, dict) else hosts
            first = str(hosts[0]["ssh"])
        except (KeyError, IndexError, TypeError) as exc:
            raise SettingsError(f"cannot read the hostfile {spec.hostfile}: {exc}") from None
    if first is not None and first not in _local_addresses():
        raise SettingsError(
            f"the playground runs rank 0 on this machine: list it first ({first} is not "
            "this machine's name or address)")


class GroupHost(ChildHost):
    """Runs the app's comparisons on a group (``spec``) started on the first run; its
    process is mlx.launch's (the ranks are its children)."""

    kind = log_name = "group"

    def __init__(self, deliver: Callable[[EngineMessage], None], spec: GroupSpec,
                 python: str | None = None) -> None:
        super().__init__(deliver)
        self.group = spec
        self._python = python
        self._sent: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def submit(self, command: RunCommand) -> None:
        """Hand ``command`` to the group, starting it first; a target the ranks could not
        split ends the run at once, no rank started."""
        from specdeck.engines.distributed.splittable import refuse_unsplittable

        try:
            refuse_unsplittable(command.request.target, self.group.shard)
        except GroupError as exc:
            self._deliver(RunEnded(command.run_id, str(exc)))
            return
        super().submit(command)

    def _running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _hand_over(self, command: RunCommand) -> None:
        self._sent.put(command)

    def cancel(self, run_id: int) -> None:
        """Stop run ``run_id`` and any before it (every rank after the same event)."""
        if self._process is not None:
            self._sent.put(Cancel(run_id))

    def _start(self) -> None:
        from specdeck.hosts.launch import launch_argv

        require_local_lead(self.group)
        key = secrets.token_bytes(32)
        listener = Listener(("127.0.0.1", 0), authkey=key)
        host, port = listener.address
        env = {**os.environ, ADDRESS_VARIABLE: f"{host}:{port}", KEY_VARIABLE: key.hex()}
        argv = launch_argv(self.group, ["-m", "specdeck.hosts.group", "--shard",
                                        self.group.shard], self._python)
        log = open(self._log, "wb")
        # Its own session: closing the app ends every local rank with mlx.launch.
        self._process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        log.close()
        self._sent = queue.SimpleQueue()
        threading.Thread(target=self._run, args=(listener, self._process, key), daemon=True,
                         name="specdeck-group").start()

    def _run(self, listener: Listener, process: subprocess.Popen, key: bytes) -> None:
        """Accept rank 0, then hand it commands and the app its messages."""
        accepted: list[Any] = []

        def accept() -> None:
            try:
                accepted.append(listener.accept())
            except (OSError, EOFError):
                pass

        waiter = threading.Thread(target=accept, daemon=True)
        waiter.start()
        deadline = time.monotonic() + CONNECT_SECONDS
        while waiter.is_alive() and process.poll() is None and time.monotonic() < deadline:
            waiter.join(timeout=0.2)
        if not accepted:  # wake the accept, whatever stopped the wait
            try:
                Client(listener.address, authkey=key).close()
            except (OSError, EOFError):
                pass
            waiter.join(timeout=2)
        listener.close()
        connection = accepted[0] if accepted and process.poll() is None else None
        if connection is None:
            self._ended_early(process, "the group did not start")
            return
        self._connection = connection
        threading.Thread(target=self._send_all, args=(connection,), daemon=True).start()
        if self._last_submitted > self._relay(connection, process.pid) and self._process is process:
            self._ended_early(process, "the group ended unexpectedly")  # not closed

    def _send_all(self, connection: Any) -> None:
        while (message := self._sent.get()) is not _STOP:
            try:
                connection.send(message)
            except (OSError, ValueError):
                return
            if message is None:
                return

    def _ended_early(self, process: subprocess.Popen, why: str) -> None:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._kill(process)
        last = last_line(self._log)
        self._deliver(RunEnded(self._last_submitted, why + (f": {last}" if last else "")))

    def close(self) -> None:
        """Ask the ranks to stop; end them (every local process) if they do not."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        self._sent.put(Cancel(self._last_submitted))
        self._sent.put(None)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill(process)
        self._sent.put(_STOP)
        self._log.unlink(missing_ok=True)

    @staticmethod
    def _kill(process: subprocess.Popen) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=3)
                return
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue


#: Ends the sender thread (None is the stop command the ranks receive).
_STOP = object()


# -- the ranks ---------------------------------------------------------------------------


def rank_main(shard: str) -> None:
    """One rank of the app's group: rank 0 takes the app's commands and shares each
    with the others; every rank runs it; rank 0 alone answers."""
    from specdeck.engines.distributed.split import FaultGuard, group_compare, split_store, start_group

    group = start_group(GroupSpec(shard=shard))
    connection = None
    commands: queue.SimpleQueue[Any] = queue.SimpleQueue()
    cancelled_through = [0]
    if group.lead:
        host, port = os.environ[ADDRESS_VARIABLE].rsplit(":", 1)
        connection = Client((host, int(port)), authkey=bytes.fromhex(os.environ[KEY_VARIABLE]))

        def read() -> None:
            while True:
                try:
                    message = connection.recv()
                except (EOFError, OSError):
                    message = None  # the app went away
                if isinstance(message, Cancel):
                    cancelled_through[0] = max(cancelled_through[0], message.run_id)
                    continue
                commands.put(message)
                if message is None:
                    return

        threading.Thread(target=read, daemon=True).start()
    send = connection.send if connection is not None else (lambda message: None)
    current: list[RunCommand] = []

    def give_up(reason: str) -> None:
        if group.lead and current:
            send(RunEnded(current[0].run_id, reason))

    stores: dict[str, Any] = {}
    with FaultGuard(give_up, STALL_SECONDS) as guard:
        while True:
            mine = commands.get() if group.lead else None
            if isinstance(mine, RunCommand) and cancelled_through[0] >= mine.run_id:
                send(RunEnded(mine.run_id))
                continue
            shared = group.share(pickle.dumps(mine))
            if shared is None:
                return
            command = pickle.loads(shared)
            if command is None:
                return
            if not group.lead:
                command = replace(command, save=False)
            target = command.request.target
            store = stores.get(target) or split_store(group, target)
            stores.clear()  # one target's share at a time
            stores[target] = store
            current[:] = [command]

            def compare(request: Any, store: Any, **hooks: Any) -> Any:
                loaded = hooks.pop("on_loaded")
                return group_compare(request, group, store, guard=guard,
                                     on_started=lambda result: loaded(result.models), **hooks)

            serve_run(command, store, send,
                      lambda run_id=command.run_id: cancelled_through[0] >= run_id,
                      time.perf_counter, compare)
            if group.lost is not None:
                return


if __name__ == "__main__":
    if "--shard" not in sys.argv:
        sys.exit("specdeck.hosts.group is started by the playground (specdeck compare --shard)")
    # The module's own copy, not __main__'s: the app's messages unpickle as its classes.
    from specdeck.hosts.group import rank_main as main

    main(sys.argv[sys.argv.index("--shard") + 1])
