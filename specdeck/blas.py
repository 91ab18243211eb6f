"""Use the system OpenBLAS on Linux: mlx's CPU wheel bundles a reference BLAS ~30x slower.

``LD_PRELOAD`` only works from process start, so the command re-executes itself once with
it set, and so does the test session (``tests/conftest.py``). ``SPECDECK_NO_OPENBLAS=1``
turns this off.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

_MARK = "SPECDECK_BLAS_CHECKED"
#: Debian/Ubuntu's package of the threaded OpenBLAS, and the line that installs it.
OPENBLAS_PACKAGE = "libopenblas0-pthread"
INSTALL_OPENBLAS = f"sudo apt-get install {OPENBLAS_PACKAGE}"


def blas_advice() -> str | None:
    """How to make matrix products fast, where this Linux process runs them through
    mlx's bundled reference BLAS (~30x slower); None where it does not."""
    if sys.platform != "linux" or _preloaded():
        return None
    if openblas_path() is not None:
        return ("OpenBLAS is installed but not loaded (~30x faster matrix products): start "
                "specdeck with its own command, SPECDECK_NO_OPENBLAS unset")
    return (f"matrix products use mlx's reference BLAS, ~30x slower: {INSTALL_OPENBLAS}, "
            "then start specdeck again (it loads OpenBLAS itself)")


def _preloaded() -> bool:
    """Whether a BLAS is preloaded already (this re-execution, or the user's own)."""
    return "blas" in os.environ.get("LD_PRELOAD", "").lower()


def openblas_path() -> Path | None:
    """Debian/Ubuntu's threaded OpenBLAS (package libopenblas0-pthread), if installed."""
    arch = platform.machine()
    for candidate in (
        Path(f"/usr/lib/{arch}-linux-gnu/openblas-pthread/libopenblas.so.0"),
        Path("/usr/lib64/libopenblas.so.0"),
        Path("/usr/lib/libopenblas.so.0"),
    ):
        if candidate.exists():
            return candidate
    return None


def openblas_environment() -> dict[str, str] | None:
    """The environment to re-execute this process in with OpenBLAS preloaded, or None
    where that would not help (not Linux, already done, turned off, none installed)."""
    if sys.platform != "linux" or os.environ.get(_MARK) or os.environ.get("SPECDECK_NO_OPENBLAS"):
        return None
    if _preloaded():
        return None
    preload = os.environ.get("LD_PRELOAD", "")
    lib = openblas_path()
    if lib is None:
        return None
    env = dict(os.environ)
    env[_MARK] = "1"
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else str(lib)
    return env


def reexec_with_openblas(argv: list[str]) -> None:
    """Replace this process with ``python argv`` with OpenBLAS preloaded, when that helps."""
    env = openblas_environment()
    if env is not None:
        os.execve(sys.executable, [sys.executable, *argv], env)
