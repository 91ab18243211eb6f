"""Model families specdeck knows by name: a target and a draft that shares its tokenizer.

- ``demo``: the built-in toy family (``engines.demo``), in the repository or the wheel;
  always there, instant to load, what tests run on.
- ``smollm2``: SmolLM2-135M-Instruct, a real pretrained chat model, fetched once by
  ``specdeck fetch smollm2`` into the user's cache (``cache_root()``), with the draft
  the project trained for it. The repository ships only the draft's own layers
  (``models/smollm2-draft/``); the fetch assembles the full draft from them and the
  target's embedding, which the draft shares.

No mlx here: front ends call this to fill in defaults before loading anything.
"""

from __future__ import annotations

import os
import sysconfig
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from specdeck.engines.models import demo
from specdeck.engines.models.catalog import ModelInfo
from specdeck.engines.models.demo import DemoModels, demo_models
from specdeck.engines.core.errors import ModelError


@dataclass(frozen=True, slots=True)
class Family:
    """A family's name and what bare ``specdeck`` runs on it."""

    name: str
    #: The strategies the playground opens with (the demo target has an MTP head;
    #: smollm2 has none, so prompt lookup takes its pane).
    strategies: tuple[str, ...]
    #: The built-in prompt (``prompts/``) it opens on.
    prompt: str


FAMILIES = {
    "demo": Family("demo", ("plain", "draft", "mtp"), "code"),
    "smollm2": Family("smollm2", ("plain", "draft", "ngram"), "chat_rewrite"),
}
#: The command that makes the smollm2 family, for messages.
FETCH_HINT = "specdeck fetch smollm2"
#: The draft's own weights as the repository ships them (``scripts/train_smollm2_draft.py``).
SHIPPED_DRAFT_CHECKOUT = Path(__file__).resolve().parents[2] / "models" / "smollm2-draft"
SHIPPED_DRAFT_INSTALLED = (
    Path(sysconfig.get_path("data")) / "share" / "specdeck" / "models" / "smollm2-draft"
)


#: Where fetched models (and cached timings) live, as help texts and guides say it.
CACHE_RULE = "$SPECDECK_CACHE_DIR, else $XDG_CACHE_HOME/specdeck, else ~/.cache/specdeck"


def cache_root() -> Path:
    """Where fetched models live (``CACHE_RULE``)."""
    if os.environ.get("SPECDECK_CACHE_DIR"):
        return Path(os.environ["SPECDECK_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "specdeck"


def family_dir(name: str) -> Path:
    """The folder a fetched family is assembled in (``target/``, ``draft/``)."""
    return cache_root() / "families" / name


def shipped_draft_dir() -> Path:
    """The smollm2 draft's shipped layers: the checkout's, else the installed ones."""
    for d in (SHIPPED_DRAFT_CHECKOUT, SHIPPED_DRAFT_INSTALLED):
        if (d / "draft.safetensors").is_file():
            return d
    return SHIPPED_DRAFT_CHECKOUT


def smollm2_fetched() -> bool:
    """Whether ``specdeck fetch smollm2`` has finished (target and draft assembled)."""
    return demo_models(family_dir("smollm2")) is not None


def require_family(name: str, need_draft: bool = True) -> DemoModels:
    """The directories of family ``name``; ModelError naming the fix when it is missing.

    ``need_draft=False`` accepts a fetched target without its draft (what the draft's
    training script needs before there is a draft)."""
    if name == "demo":
        return demo.require_demo_models()
    if name not in FAMILIES:
        raise ModelError(f"unknown model family {name!r} (choose from {', '.join(FAMILIES)})")
    root = family_dir(name)
    found = demo_models(root)
    if found is not None:
        return found
    if not need_draft and (root / "target" / "config.json").is_file():
        return DemoModels(str(root / "target"), str(root / "draft"))
    raise ModelError(f"the {name} family is not fetched yet (no {root}): run `{FETCH_HINT}`")


def default_family() -> str:
    """What bare ``specdeck`` opens: smollm2 once fetched, else the demo family."""
    return "smollm2" if smollm2_fetched() else "demo"


def family_of(family: str | None, target: str | None) -> Family:
    """The family whose defaults (prompt, strategies) a command takes: the one named,
    else the one ``target`` belongs to, else the demo family (whose defaults stand for
    any other model too)."""
    if family:
        return FAMILIES[family]
    member = member_of(target) if target else None
    return FAMILIES[member[0] if member else "demo"]


def prompt_defaults() -> str:
    """Each family's built-in prompt, as help texts say it."""
    return ", ".join(f"{f.name}: {f.prompt!r}" for f in FAMILIES.values())


def models_for(family: str | None, target: str | None, draft: str | None
               ) -> tuple[str, str | None]:
    """The (target, draft) a command runs: family ``family``'s pair (a named draft
    replaces its draft), else the models named, else the demo family."""
    if family:
        if target:
            raise ModelError("--family and --target both name the target model: give one")
        pair = require_family(family)
        return pair.target, draft or pair.draft
    return demo.default_models(target, draft)


def fetch_hint() -> str | None:
    """The status line's pointer to a real model while only the toy family is there."""
    if smollm2_fetched():
        return None
    return f"toy models; a real one: {FETCH_HINT}"


def family_roots() -> dict[str, Path]:
    """Each family that is there, by name: the folder holding its target and draft."""
    roots = {"demo": demo.DEMO_DIR} if demo_models() is not None else {}
    if smollm2_fetched():
        roots["smollm2"] = family_dir("smollm2")
    return roots


def named_by_family(models: Iterable[ModelInfo]) -> list[ModelInfo]:
    """Each model once, a family's members named by family (``smollm2 target``), and
    others whose folders share a name told apart by their parent (``a/target``); the
    shipped draft-only folder (``is_shipped_draft``) left out."""
    unique: list[ModelInfo] = []
    for m in models:
        member = member_of(m.path)
        if member is not None:
            m = replace(m, name=" ".join(member))
        if not is_shipped_draft(m.path) and all(
                m.path.resolve() != u.path.resolve() for u in unique):
            unique.append(m)
    counts = Counter(m.name for m in unique)
    return [replace(m, name=f"{m.path.parent.name}/{m.path.name}")
            if counts[m.name] > 1 and m.source != "hub" and m.name == m.path.name else m
            for m in unique]


def is_shipped_draft(path: Path | str) -> bool:
    """Whether ``path`` is the smollm2 draft's own layers as shipped: not a model to
    load (``specdeck fetch smollm2`` assembles the draft from them)."""
    return Path(path).expanduser().resolve() == shipped_draft_dir().resolve()


def member_of(path: Path | str) -> tuple[str, str] | None:
    """(family, ``target`` or ``draft``) when ``path`` is a member of a family here."""
    path = Path(path).expanduser().resolve()
    for name, root in family_roots().items():
        for role in ("target", "draft"):
            if path == (root / role).resolve():
                return name, role
    return None
