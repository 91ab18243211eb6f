"""Finding and loading models: local directories or Hugging Face ids, each loaded once.

Errors a user can cause (a wrong path, an id that is not in the cache while offline, a
draft whose tokenizer differs from the target's) raise ``ModelError`` with a message that
names the problem and the fix; the tokenizer check runs before any weights are read.
A model folder is untrusted: before transformers or mlx-lm read it, its config is checked
(``catalog.read_config``) and a folder asking to run its own code is refused; every load
passes ``trust_remote_code=False`` besides.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map

from specdeck.engines.catalog import (
    read_config, refuse_custom_code, require_findable, require_model_dir,
)
from specdeck.engines.errors import ModelError

#: Files needed to read a model's configuration and tokenizer without its weights.
_TOKENIZER_PATTERNS = ["*.json", "tokenizer.model", "*.tiktoken", "*.txt", "*.jinja"]
#: Said to transformers on every tokenizer load: never run a model's own code, never ask.
_NO_REMOTE_CODE = {"trust_remote_code": False}


@dataclass
class LoadedModel:
    """A model and its tokenizer, ready to decode."""

    source: str
    path: Path
    model: nn.Module
    tokenizer: Any
    config: dict
    revision: str | None = None
    #: Arrays cast to float32 for the CPU backend (see ``prefer_fast_dtype``).
    upcast: bool = False

    @property
    def name(self) -> str:
        return self.path.name if Path(self.source).exists() else self.source


def resolve(source: str, revision: str | None = None) -> Path:
    """The local directory holding ``source``'s config and tokenizer (no weights yet),
    checked: a sane config, and no code of its own to run."""
    path = _find(source, revision)
    read_config(path)
    refuse_custom_code(path)
    return path


def _find(source: str, revision: str | None) -> Path:
    path = Path(source).expanduser()
    if path.exists():
        return require_model_dir(path, source)
    require_findable(source)
    from huggingface_hub import snapshot_download

    try:
        return Path(
            snapshot_download(source, revision=revision, allow_patterns=_TOKENIZER_PATTERNS)
        )
    except Exception as exc:  # the hub raises many kinds; all mean the same to a user
        raise ModelError(
            f"cannot fetch {source} from the Hugging Face hub and it is not in the local "
            f"cache ({type(exc).__name__}). Check the id and your network, or pass a local "
            "directory."
        ) from exc


def load_tokenizer(path: Path) -> Any:
    """mlx-lm's tokenizer wrapper for a resolved model directory."""
    from mlx_lm.utils import load_tokenizer as _load

    try:
        return _load(path, dict(_NO_REMOTE_CODE))
    except Exception as exc:
        raise ModelError(f"cannot read the tokenizer in {path}: {_short(exc)}") from exc


def _short(exc: Exception) -> str:
    """An exception's message cut to one readable line (mlx-lm lists every missing
    parameter of a broken model: megabytes)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:299] + "…"


def vocabulary_mismatch(a: Any, b: Any) -> str | None:
    """Why two tokenizers cannot share token ids, or None when they can.

    Added special tokens (chat markers) may differ between members of one family; the
    regular vocabulary must map every token to the same id.
    """
    special = set(getattr(a, "all_special_tokens", [])) | set(
        getattr(b, "all_special_tokens", [])
    )
    va = {t: i for t, i in a.get_vocab().items() if t not in special}
    vb = {t: i for t, i in b.get_vocab().items() if t not in special}
    if va == vb:
        return None
    differing = [t for t in va.keys() | vb.keys() if va.get(t) != vb.get(t)]
    example = sorted(differing, key=lambda t: (va.get(t, 1 << 30), t))[0]
    return (
        f"{len(differing)} of {max(len(va), len(vb))} tokens differ "
        f"(e.g. {example!r}: id {va.get(example)} vs {vb.get(example)})"
    )


def check_pair(
    target: str, draft: str, target_tokenizer: Any, draft_tokenizer: Any, role: str = "draft"
) -> None:
    """Refuse a ``role`` model (the draft, the MTP model) named ``draft`` that does not
    share the tokenizer of the target named ``target``, before loading weights."""
    reason = vocabulary_mismatch(target_tokenizer, draft_tokenizer)
    if reason:
        raise ModelError(
            f"the {role} model {draft} does not use the target {target}'s tokenizer: "
            f"{reason}. Pick a {role} model from the same model family (same tokenizer)."
        )


def prefer_fast_dtype(model: nn.Module) -> bool:
    """On the CPU backend, cast half-precision weights to float32.

    float16/bfloat16 matrix products do not go through BLAS on the CPU: a 1024x1024
    product took 20-40x as long as in float32 with OpenBLAS. Quantized weights stay as they are. Returns whether it cast.
    """
    if mx.default_device().type != mx.DeviceType.cpu:
        return False
    params = tree_flatten(model.parameters())
    halves = {mx.float16, mx.bfloat16}
    if not any(v.dtype in halves for _, v in params):
        return False
    model.update(
        tree_map(lambda v: v.astype(mx.float32) if v.dtype in halves else v, model.parameters())
    )
    return True


@dataclass
class ModelStore:
    """Finds, reads and loads each model once, however many strategies and runs use it."""

    _loaded: dict[tuple[str, str | None], LoadedModel] = field(default_factory=dict)
    #: Where each (source, revision) was found: a hub id asks the hub once, not per call.
    _paths: dict[tuple[str, str | None], Path] = field(default_factory=dict)
    #: Tokenizers read from a folder before (or without) its model being loaded.
    _tokenizers: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def resolve(self, source: str, revision: str | None = None) -> Path:
        """``resolve(source, revision)``, once per store."""
        key = (source, revision)
        with self._lock:
            path = self._paths.get(key)
        if path is None:
            path = resolve(source, revision)
            with self._lock:
                self._paths[key] = path
        return path

    def tokenizer(self, path: Path, revision: str | None = None) -> Any:
        """The tokenizer in the resolved folder ``path``: the loaded model's when it is
        loaded, else read from the files once."""
        key = str(path.resolve())
        with self._lock:
            loaded = self._loaded.get((key, revision))
            if loaded is not None:
                return loaded.tokenizer
            tokenizer = self._tokenizers.get(key)
        if tokenizer is None:
            tokenizer = load_tokenizer(path)
            with self._lock:
                self._tokenizers[key] = tokenizer
        return tokenizer

    def get(self, source: str, revision: str | None = None) -> LoadedModel:
        path = self.resolve(source, revision)
        key = (str(path.resolve()), revision)
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = self._load(source, path, revision)
                self._tokenizers.pop(key[0], None)  # the model's own serves from now on
            return self._loaded[key]

    def holds(self, path: Path, revision: str | None = None) -> bool:
        """Whether the model in the resolved directory ``path`` is loaded already."""
        with self._lock:
            return (str(path.resolve()), revision) in self._loaded

    @staticmethod
    def _load(source: str, path: Path, revision: str | None) -> LoadedModel:
        from mlx_lm import load

        target = str(path) if Path(source).expanduser().exists() else source
        try:
            model, tokenizer, config = load(
                target, revision=revision, return_config=True,
                tokenizer_config=dict(_NO_REMOTE_CODE), trust_remote_code=False,
            )
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"cannot load the model {source}: {_short(exc)}") from exc
        upcast = prefer_fast_dtype(model)
        return LoadedModel(source, path, model, tokenizer, config, revision, upcast)
