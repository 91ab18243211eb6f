"""Which models mlx-lm can split over ranks, and how: read from mlx-lm's own model
sources without importing mlx-lm (its import alone takes ~1 s, transformers' included),
so the command that starts a group refuses a target the ranks could not split at once."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from specdeck.engines.core.errors import GroupError, ModelError
from specdeck.engines.models.catalog import read_model_folder


def _model_sources() -> Path:
    """mlx-lm's ``models`` folder, found without running mlx-lm's ``__init__``."""
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None or spec.origin is None:
        raise ModelError("mlx-lm is not installed: pip install mlx-lm")
    return Path(spec.origin).parent / "models"


@functools.cache
def split_support() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The mlx-lm model types that split by tensor and by pipeline, read from the
    sources of mlx-lm's model classes (this version's, whatever it knows; read once a
    process: a refusal lists them again, the app's group host asks at every run)."""
    tensor, pipeline = [], []
    for path in sorted(_model_sources().glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "def shard(" in text:
            tensor.append(path.stem)
        if path.stem != "pipeline" and ("def pipeline(" in text or "(PipelineMixin" in text):
            pipeline.append(path.stem)
    return tuple(tensor), tuple(pipeline)


def refusal(name: str, kind: str, mode: str) -> str:
    """Why ``name`` (a ``kind`` model) cannot be split ``mode``-wise, and what can."""
    tensor, pipeline = split_support()
    other = "pipeline" if mode == "tensor" else "tensor"
    if kind in (pipeline if other == "pipeline" else tensor):
        return (f"{name} is a {kind} model, which mlx-lm cannot split by {mode}: "
                f"use --shard {other}")
    return (f"{name} is a {kind} model, which mlx-lm cannot split over machines; "
            f"--shard tensor splits {', '.join(tensor)}; --shard pipeline splits "
            f"{', '.join(pipeline)}")


def refuse_unsplittable(target: str, mode: str) -> None:
    """GroupError before any rank starts when ``target``'s mlx-lm module cannot split
    ``mode``-wise (the ranks would load it only to say so, seconds later). A target not
    on this machine, or a model type with no module of its own name (mlx-lm maps a few
    to another's: mistral to llama), is left to the ranks."""
    try:
        kind = str(read_model_folder(Path(target).expanduser()).get("model_type", ""))
        if not (kind.isidentifier() and (_model_sources() / f"{kind}.py").is_file()):
            return
    except (ModelError, OSError):
        return
    tensor, pipeline = split_support()
    if kind not in (tensor if mode == "tensor" else pipeline):
        raise GroupError(refusal(target, kind, mode))
