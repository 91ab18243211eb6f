"""The built-in demo family: the models specdeck uses when none is named.

``scripts/train_demo.py`` trains them from the Python standard library's sources and
writes them under ``models/demo/`` in the repository (a wheel installs them under
``share/specdeck/models/demo`` of the environment), so the playground, ``compare`` and
``sweep`` work offline on any machine. The target is a hybrid Qwen3.5-style model that
carries its own MTP head (``target/optiq/mtp.safetensors``); the draft shares its
tokenizer. No mlx here: front ends call this to fill in defaults before loading.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path
from typing import NamedTuple

from specdeck.engines.models.catalog import require_findable
from specdeck.engines.core.errors import ModelError

#: Where ``scripts/train_demo.py`` writes the family: a checkout (or editable install).
CHECKOUT_DIR = Path(__file__).resolve().parents[2] / "models" / "demo"
#: Where a wheel puts it (``[tool.setuptools.data-files]`` in pyproject.toml).
INSTALLED_DIR = Path(sysconfig.get_path("data")) / "share" / "specdeck" / "models" / "demo"


class DemoModels(NamedTuple):
    """Directories of the demo target (with its MTP head) and its draft."""

    target: str
    draft: str


def demo_models(root: Path | None = None) -> DemoModels | None:
    """The demo family's directories in ``root`` (default ``DEMO_DIR``), or None."""
    root = DEMO_DIR if root is None else root
    target, draft = root / "target", root / "draft"
    if (target / "config.json").is_file() and (draft / "config.json").is_file():
        return DemoModels(str(target), str(draft))
    return None


#: The checkout's family when there is one, else the installed one.
DEMO_DIR = next((d for d in (CHECKOUT_DIR, INSTALLED_DIR) if demo_models(d)), CHECKOUT_DIR)


def require_demo_models(root: Path | None = None) -> DemoModels:
    """The demo family, or a ModelError that says how to get it or name other models."""
    found = demo_models(root)
    if found is None:
        where = root or f"{CHECKOUT_DIR} or {INSTALLED_DIR}"
        raise ModelError(
            f"no model named and no demo models in {where} (python scripts/train_demo.py "
            "makes them); name your own with --target PATH (and --draft PATH)"
        )
    return found


def default_models(target: str | None, draft: str | None) -> tuple[str, str | None]:
    """The (target, draft) a command runs: the demo family when no target is named (with
    the demo draft unless one is named); a named target keeps only the draft named with
    it, since the demo draft would not share its tokenizer. A named model that is not
    there is said first (before, say, that the draft strategy lacks a draft)."""
    for named in (target, draft):
        if named:
            require_findable(named)
    if target:
        return target, draft
    demo = require_demo_models()
    return demo.target, draft or demo.draft
