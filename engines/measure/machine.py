"""What a run was measured on: recorded with every result so numbers can be compared."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
from importlib import metadata


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _chip() -> str:
    if platform.system() == "Darwin":
        try:
            import subprocess

            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True, text=True, timeout=2,
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_bytes() -> int | None:
    """This machine's physical memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def blas_library() -> str | None:
    """The BLAS preloaded into this process (OpenBLAS on Linux), if any."""
    for lib in os.environ.get("LD_PRELOAD", "").split(":"):
        if "blas" in os.path.basename(lib).lower():
            return lib
    return None


def describe_machine() -> dict:
    """Chip, OS, memory, backend and library versions of this process."""
    import mlx.core as mx

    return {
        "chip": _chip(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "memory_bytes": memory_bytes(),
        "cpu_count": os.cpu_count(),
        "device": str(mx.default_device()),
        "blas": blas_library(),
        "versions": {
            name: _version(name) for name in ("mlx", "mlx-lm", "mlx-optiq", "specdeck")
        },
    }


@functools.cache
def machine_fingerprint() -> str:
    """A short hash of what makes timings from this machine comparable with each other:
    chip, OS, architecture, cores, memory, the BLAS preloaded and the versions of mlx
    and mlx-lm. Timings cached under it (``engines.measured_cache``) are not reused on
    another machine or after an upgrade. Reads no mlx: the app calls it too. Worked
    out once per process."""
    parts = [_chip(), platform.system(), platform.release(), platform.machine(),
             str(os.cpu_count()), str(memory_bytes()), str(blas_library()),
             str(_version("mlx")), str(_version("mlx-lm"))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
