"""How many threads OpenBLAS runs for the models loaded: one for a small model.

On Linux the command preloads the system's threaded OpenBLAS (``specdeck.blas``), which
starts a thread per core. For a model of a few million parameters a step is a chain of
small matrix products, and waking the other threads for each costs more than they give:
measured here (2 cores, ``bench/blas_threads.py``, a fresh process per run) the demo
family decodes 1.52x as fast on one thread as on two, while SmolLM2-135M runs 0.76x as
fast on one (its step takes 45 ms on two threads, 62 ms on one). So below
``SMALL_MODEL_BYTES`` of target weights OpenBLAS runs one thread, and its own count
otherwise; an ``OPENBLAS_NUM_THREADS`` the user set is left alone, and so is a process
without OpenBLAS (macOS's Accelerate, or the reference BLAS mlx bundles).
"""

from __future__ import annotations

import ctypes
import os
from functools import cache

from mlx.utils import tree_flatten

from specdeck.engines.models.loading import LoadedModel

#: Targets with fewer bytes of weights than this run OpenBLAS on one thread.
SMALL_MODEL_BYTES = 64 * 2**20


@cache
def _openblas() -> tuple[ctypes.CDLL, int] | None:
    """The OpenBLAS loaded in this process and the thread count it started with."""
    try:
        lib = ctypes.CDLL(None)
        get, _ = lib.openblas_get_num_threads, lib.openblas_set_num_threads
    except (AttributeError, OSError):
        return None
    return lib, int(get())


def blas_threads() -> int | None:
    """The threads OpenBLAS runs now; None without OpenBLAS."""
    found = _openblas()
    return None if found is None else int(found[0].openblas_get_num_threads())


def fit_blas_threads(target_bytes: int) -> int | None:
    """Run OpenBLAS on one thread for a target of fewer than ``SMALL_MODEL_BYTES`` of
    weights, on the count it started with otherwise; the count set, or None when it was
    left alone (no OpenBLAS, or ``OPENBLAS_NUM_THREADS`` set by the user)."""
    found = _openblas()
    if found is None or os.environ.get("OPENBLAS_NUM_THREADS"):
        return None
    lib, started = found
    threads = 1 if target_bytes < SMALL_MODEL_BYTES else started
    lib.openblas_set_num_threads(threads)
    return threads


def fit_blas_threads_to(target: LoadedModel) -> int | None:
    """``fit_blas_threads`` for the loaded ``target``'s weights, as it holds them. Every
    command that times or runs a target calls it before its first pass, so that a
    calibration and the runs it prices see the same threads."""
    weights = tree_flatten(target.model.parameters())
    return fit_blas_threads(sum(array.nbytes for _, array in weights))
