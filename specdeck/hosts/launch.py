"""Starting a group of processes for a target split over them: ``mlx.launch``'s command
line for a ``GroupSpec``, and running it.

``specdeck compare --headless`` and ``specdeck sweep`` asked for several processes
(``--ranks``, ``--hosts``, ``--hostfile``) start themselves again through
``mlx.launch``, one process per rank; the playground's group engine starts its ranks
the same way. mlx.launch does the rest (ssh to other hosts, the backend's setup); this
module only writes its command line, and reads its warnings for the ranks' exit
statuses, since mlx.launch itself exits 0 whatever they were. No mlx imports.
"""

from __future__ import annotations

import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from specdeck.engines.core.requests import HOSTS_VARIABLE, GroupSpec
#: mlx.launch's warning about a rank that failed: "Node with rank 1 exited with code 3".
_RANK_ENDED = re.compile(r"Node with rank (\d+) (?:exited with code (-?\d+)|was killed)")


def mlx_launch() -> list[str]:
    """How to run ``mlx.launch``: its script beside this Python or on the PATH, else
    the function that script calls."""
    beside = Path(sys.executable).with_name("mlx.launch")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("mlx.launch")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from mlx._distributed_utils.launch import "
            "main; sys.argv[0] = 'mlx.launch'; sys.exit(main())"]


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


def rank_status(warnings: list[tuple[int, int | None]]) -> int:
    """The group's exit status from mlx.launch's warnings ((rank, code); None: killed):
    rank 0's status when it exited with one, else the first rank's that did, else 1
    when a rank was killed (mlx.launch stops the others so), else 0."""
    if not warnings:
        return 0
    exited = sorted((rank, code) for rank, code in warnings if code is not None and code > 0)
    return exited[0][1] if exited else 1


def _relay(stream: IO[bytes], warnings: list[tuple[int, int | None]]) -> None:
    """Copy mlx.launch's stderr through, noting the ranks it says failed."""
    for line in iter(stream.readline, b""):
        sys.stderr.buffer.write(line)
        sys.stderr.buffer.flush()
        found = _RANK_ENDED.search(line.decode("utf-8", "replace"))
        if found:
            code = found.group(2)
            warnings.append((int(found.group(1)), None if code is None else int(code)))


def relaunch(spec: GroupSpec, command: list[str], python: str | None = None) -> int:
    """Run ``specdeck COMMAND`` on every rank of ``spec`` through mlx.launch and return
    the group's exit status. Ctrl+C reaches the ranks from the terminal (they stop
    together after the current round and rank 0 saves); mlx.launch ignores it."""
    argv = launch_argv(spec, ["-m", "specdeck", *command], python)
    where = ", ".join(spec.hosts) or spec.hostfile or "this machine"
    print(f"specdeck: starting {spec.ranks if not spec.hostfile else 'the'} ranks on "
          f"{where} ({spec.backend}): {shlex.join(argv)}", file=sys.stderr, flush=True)
    warnings: list[tuple[int, int | None]] = []
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        relay = threading.Thread(target=_relay, args=(process.stderr, warnings), daemon=True)
        relay.start()
        process.wait()
        relay.join(timeout=5)
    finally:
        signal.signal(signal.SIGINT, previous)
    return rank_status(warnings)

