"""Starting a group of processes for a target split over them: ``mlx.launch``'s command
line for a ``GroupSpec``, and running it.

``specdeck compare --headless`` and ``specdeck sweep`` asked for several processes
(``--ranks``, ``--hosts``, ``--hostfile``) start themselves again through
``mlx.launch``, one process per rank; the playground's group engine starts its ranks
the same way. mlx.launch does the rest (ssh to other hosts, the backend's setup); this
module only writes its command line, checks its hostfile (a FIFO there hung it), and
reads its warnings for the ranks' exit statuses, since mlx.launch itself exits 0
whatever they were (its own failures, a broken hostfile, a missing backend, exit
non-zero, and that status is the command's). mlx.launch and the ranks run in a process
group of their own: a stopping signal (Ctrl+C, SIGTERM, SIGHUP) is passed to all of
them, and on Linux mlx.launch is ended when specdeck dies. No mlx imports.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from specdeck.hosts.stopping import STOPPING, record, stopped_status
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.core.files import UnreadableFile, read_text
from specdeck.engines.core.requests import HOSTS_VARIABLE, GroupSpec
from specdeck.safe_text.plain import printable

#: mlx.launch's warning about a rank that failed: "Node with rank 1 exited with code 3".
_RANK_ENDED = re.compile(r"Node with rank (\d+) (?:exited with code (-?\d+)|was killed)")


def mlx_launch() -> list[str]:
    """How to run ``mlx.launch``: its function, without its busy wait (``mlx_launcher``)."""
    return [sys.executable, "-m", "specdeck.hosts.mlx_launcher"]


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive ports free on this machine: a local ring group
    listens on one per rank, and the default (32323) may be taken by another group."""
    for _ in range(64):
        base = random.randrange(20000, 60000 - count)
        sockets = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise OSError(f"no {count} consecutive free ports found for the group")


def launch_argv(spec: GroupSpec, python_args: list[str], python: str | None = None) -> list[str]:
    """``mlx.launch``'s command line running ``python PYTHON_ARGS`` on every rank of
    ``spec`` (this Python unless ``python`` names the one on the hosts)."""
    argv = [*mlx_launch(), "--backend", spec.backend, "--python", python or sys.executable]
    if spec.hostfile:
        argv += ["--hostfile", spec.hostfile]
    elif spec.hosts:
        argv += ["--hosts", ",".join(spec.hosts), "-n", str(spec.ranks // len(spec.hosts))]
    else:
        argv += ["-n", str(spec.ranks)]
        if spec.backend == "ring":
            argv += ["--starting-port", str(free_port_run(spec.ranks))]
    if spec.hosts:
        argv += ["--env", f"{HOSTS_VARIABLE}={','.join(spec.hosts)}"]
    return [*argv, "--", *python_args]


#: A hostfile names a few hosts: a few kilobytes.
HOSTFILE_BYTES = 2**20
#: Colour and other SGR sequences, which mlx.launch adds to its warnings.
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def read_hostfile(path: str) -> Any:
    """A hostfile's JSON; SettingsError, in one line, for one that is not a small
    regular file of JSON (a FIFO there hung mlx.launch)."""
    try:
        return json.loads(read_text(Path(path), HOSTFILE_BYTES))
    except (OSError, UnreadableFile, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SettingsError(f"--hostfile {path}: {getattr(exc, 'strerror', None) or exc}"
                            ) from None


def die_with_parent(signum: int) -> None:
    """On Linux, have ``signum`` sent to this process when its parent dies, even of
    SIGKILL (elsewhere the signals a parent can catch are passed on instead)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signum)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _launcher_starts() -> None:
    """In mlx.launch before it starts: the stopping signals are specdeck's to pass on to
    the ranks, while mlx.launch stays to relay what they say as they end; it dies with
    specdeck."""
    for signum in STOPPING:
        signal.signal(signum, signal.SIG_IGN)
    die_with_parent(signal.SIGKILL)


def rank_status(warnings: list[tuple[int, int | None]]) -> int:
    """The group's exit status from mlx.launch's warnings ((rank, code); None: killed):
    rank 0's status when it exited with one, else the first rank's that did, else 1
    when a rank was killed (mlx.launch stops the others so), else 0."""
    if not warnings:
        return 0
    exited = sorted((rank, code) for rank, code in warnings if code is not None and code > 0)
    return exited[0][1] if exited else 1


def _relay(stream: IO[bytes], warnings: list[tuple[int, int | None]]) -> None:
    """Copy mlx.launch's stderr through, its colours left out and control characters
    shown, noting the ranks it says failed."""
    for raw in iter(stream.readline, b""):
        line = printable(_SGR.sub("", raw.decode("utf-8", "replace")))
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except OSError:
            pass  # the terminal is gone (SIGHUP): the ranks still end and save
        found = _RANK_ENDED.search(line)
        if found:
            code = found.group(2)
            warnings.append((int(found.group(1)), None if code is None else int(code)))


def relaunch(spec: GroupSpec, command: list[str], python: str | None = None) -> int:
    """Run ``specdeck COMMAND`` on every rank of ``spec`` through mlx.launch and return
    the group's exit status: mlx.launch's own when it failed, else the ranks'. A
    stopping signal is passed to mlx.launch and the ranks (they stop together after the
    current round and rank 0 saves); the status is then the signal's."""
    if spec.hostfile:
        read_hostfile(spec.hostfile)
    argv = launch_argv(spec, ["-m", "specdeck", *command], python)
    where = ", ".join(spec.hosts) or spec.hostfile or "this machine"
    print(f"specdeck: starting {spec.ranks if not spec.hostfile else 'the'} ranks on "
          f"{where} ({spec.backend}): {shlex.join(argv)}", file=sys.stderr, flush=True)
    warnings: list[tuple[int, int | None]] = []
    signalled: list[int] = []
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True, preexec_fn=_launcher_starts)

    def pass_on(signum: int, frame: object) -> None:
        """Ctrl+C to every rank as Ctrl+C; SIGTERM and SIGHUP as SIGTERM, which the
        ranks turn into a clean end (rank 0 saving what ran)."""
        signalled.append(signum)
        try:
            os.killpg(process.pid, signal.SIGINT if signum == signal.SIGINT
                      else signal.SIGTERM)
        except OSError:
            pass  # the group has ended already

    previous = {signum: signal.signal(signum, pass_on) for signum in STOPPING}
    try:
        relay = threading.Thread(target=_relay, args=(process.stderr, warnings), daemon=True)
        relay.start()
        process.wait()
        relay.join(timeout=5)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if signalled:
        record(signalled[0])
        return stopped_status()
    if process.returncode:
        if not warnings:
            print(f"specdeck: error: mlx.launch ended with status {process.returncode} "
                  "before the ranks did (its own message is above)", file=sys.stderr)
        return process.returncode if process.returncode > 0 else 128 - process.returncode
    return rank_status(warnings)

