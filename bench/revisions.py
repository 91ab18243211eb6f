"""The decoding core as it was at a git revision, importable beside this tree's: how a
benchmark compares a change with what came before it in one run."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def engines_at(revision: str, into: Path) -> ModuleType:
    """``engines/`` as it was at ``revision``, written under ``into`` and imported as
    ``specdeck_at_<commit>.engines`` (its imports of ``specdeck.engines`` renamed, so
    every module of it is the revision's own)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout

    package = f"specdeck_at_{git('rev-parse', '--short', revision).strip()}"
    folder = into / package / "engines"
    folder.mkdir(parents=True)
    (folder.parent / "__init__.py").write_text("")
    for path in git("ls-tree", "-r", "--name-only", revision, "engines/").split():
        if path.endswith(".py"):
            text = git("show", f"{revision}:{path}")
            module = folder / Path(path).relative_to("engines")
            module.parent.mkdir(parents=True, exist_ok=True)
            module.write_text(text.replace("specdeck.engines", f"{package}.engines"))
    sys.path.insert(0, str(into))
    return importlib.import_module(f"{package}.engines")
