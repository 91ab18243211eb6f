"""``auto`` as it was at git 040ec39, whose tries from plain steps (no guesses to judge:
an MTP head, prompt lookup, temperature > 0) waited twice as long each time rather than
four times, for ``--variants bench/auto_tries_doubling.py`` of ``bench/auto_replay.py``
and ``bench/auto_vs_plain.py``: the figures of docs/auto-k.md, "Tries four times as
long"."""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from revisions import engines_at  # noqa: E402

_then = engines_at("040ec39", Path(tempfile.mkdtemp())).__name__
VARIANTS = {"doubling": importlib.import_module(f"{_then}.auto.adaptive").AutoLength}
