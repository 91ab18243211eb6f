"""Results measured on this machine for given models, kept in the user's cache.

What ``specdeck calibrate`` and ``specdeck models --rank-drafts`` measure holds only for
the machine and the model files they measured, so each result is one JSON file under
``<cache>/<kind>/`` (``engines.families.cache_root``: ``~/.cache/specdeck`` by default)
named by a hash of the machine's fingerprint (``engines.machine.machine_fingerprint``)
and the models' identities (``model_identity``): another machine, an upgrade of mlx or a
changed model file finds no result rather than a wrong one. The file is read back as
untrusted data: bounded, parsed, and handed to a validator; a file that is not what it
should be is ignored with one line through ``on_problem`` (measure again to replace it).
No mlx here: the app reads these files too.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Callable, TypeVar

from specdeck.engines.models.families import cache_root
from specdeck.engines.core.files import UnreadableFile, read_regular
from specdeck.engines.measure.machine import machine_fingerprint

#: A cached result is a few kilobytes; a larger file is not one of ours.
CACHED_BYTES = 1 << 20
#: Files of a model folder whose size and time of change make its identity.
_IDENTITY_SUFFIXES = (".safetensors", ".json")

T = TypeVar("T")


def model_identity(path: Path | str) -> str:
    """A short hash of a model folder: its resolved path and the name, size and time of
    change of its config, tokenizer and weight files (and an MTP sidecar in ``optiq/``).
    Rewriting the weights changes it; reading them is not needed."""
    root = Path(path).expanduser().resolve()
    parts = [str(root)]
    for folder in (root, root / "optiq"):
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(_IDENTITY_SUFFIXES) and entry.is_file():
                info = entry.stat()
                parts.append(f"{folder.name}/{entry.name}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def cache_file(kind: str, *models: Path | str | None) -> Path:
    """Where the ``kind`` result (``calibration``, ``draft-ranking``) for ``models`` on
    this machine lives; a model that is None (no draft) counts as ``-``."""
    key = [machine_fingerprint()] + [model_identity(m) if m else "-" for m in models]
    name = hashlib.sha256("\n".join(key).encode()).hexdigest()[:24]
    return cache_root() / kind / f"{name}.json"


def read_cached(path: Path, validate: Callable[[Any], T | None],
                on_problem: Callable[[str], None] = lambda line: None) -> T | None:
    """The result in ``path`` as ``validate`` makes it from the parsed JSON; None when
    there is none, or (said once through ``on_problem``) when the file is not readable
    JSON or ``validate`` refuses it."""
    import orjson

    try:
        data = orjson.loads(read_regular(path, CACHED_BYTES))
    except FileNotFoundError:
        return None
    except (OSError, UnreadableFile, orjson.JSONDecodeError) as exc:
        on_problem(f"ignoring the cached result {path}: not readable JSON ({exc})")
        return None
    result = validate(data)
    if result is None:
        on_problem(f"ignoring the cached result {path}: not a result this version "
                   "wrote (measure again to replace it)")
    return result


def write_cached(path: Path, document: dict) -> None:
    """Write ``document`` to ``path`` whole or not at all (OSError when it cannot)."""
    import orjson

    from specdeck.engines.core.atomic_files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, orjson.dumps(document, option=orjson.OPT_INDENT_2))
