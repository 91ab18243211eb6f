"""``mlx.launch`` without its busy wait.

mlx.launch (mlx 0.30) relays each rank's output from a thread whose ``select`` also
watches the rank's stdin for writing: a pipe is nearly always writable, so every such
thread spins a core for as long as the ranks run, taking the processor from the ranks
themselves (a two-rank launch on this machine: 7.5 processor-seconds, 3.5 without the
spin); its main loop spins too once its own stdin ends (/dev/null, a closed pipe).
specdeck never sends a rank anything on stdin (the playground talks to rank 0 over a
socket), so here that ``select`` is given the reads alone and stdin is a pipe that never
ends. Run as ``python -m specdeck.hosts.mlx_launcher ARGS``: mlx.launch's own arguments.
"""

from __future__ import annotations

import os
import select
import sys


def _reads_only(reads: list, writes: list, errors: list, timeout: float | None = None):
    """``select`` that waits on ``reads`` and never reports a write ready."""
    ready, _, failed = select.select(reads, [], errors, timeout)
    return ready, [], failed


def main() -> int:
    from mlx._distributed_utils import launch

    if hasattr(launch, "select"):  # a later mlx that waits otherwise runs as it is
        launch.select = _reads_only
    never_written, _ = os.pipe()  # the write end stays open: no end of input
    os.dup2(never_written, 0)
    sys.argv[0] = "mlx.launch"
    return launch.main()


if __name__ == "__main__":
    sys.exit(main())
