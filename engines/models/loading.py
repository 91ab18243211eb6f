"""Finding and loading models: local directories or Hugging Face ids, each loaded once.

Errors a user can cause (a wrong path, an id that is not in the cache while offline, a
draft whose tokenizer differs from the target's) raise ``ModelError`` with a message that
names the problem and the fix; the tokenizer check runs before any weights are read.
A model folder is untrusted: before transformers or mlx-lm read it, its config is checked
and every file a loader reads in it is a regular file of a sane size
(``catalog.resolve``), and a folder asking to run its own code is refused; every load
passes ``trust_remote_code=False`` besides.
"""

from __future__ import annotations

import functools
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map

from specdeck.engines.models.catalog import resolve
from specdeck.engines.proposers.draft_vocab import DraftVocabulary, draft_vocabulary
from specdeck.engines.core.errors import ModelError

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
    #: The tokens it drafts from when its folder lists them (``engines.draft_vocab``).
    vocabulary: DraftVocabulary | None = None

    @property
    def name(self) -> str:
        return self.path.name if Path(self.source).exists() else self.source


#: Characters ``glob`` reads as a pattern.
GLOB_CHARACTERS = frozenset("*?[")


@contextmanager
def plain_named(path: Path) -> Iterator[Path]:
    """``path``, or, where it holds a glob character, a link to it under a plain name for
    as long as the load takes: mlx-lm finds a model's weights with ``glob``, which reads
    a folder named ``models [v2]`` as a pattern and finds none."""
    if not GLOB_CHARACTERS & set(str(path)):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="specdeck-load-") as scratch:
        link = Path(scratch) / "model"
        link.symlink_to(path.resolve(), target_is_directory=True)
        yield link


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


def _added(tokenizer: Any) -> set[str]:
    """Special and added tokens (chat markers and the like), which may differ between
    members of one family."""
    added = getattr(tokenizer, "get_added_vocab", lambda: {})()
    return set(getattr(tokenizer, "all_special_tokens", [])) | set(added)


def _ordinary(token: str) -> bool:
    """A token a person reads as a word piece (byte-level BPE marks a space with Ġ)."""
    return token.lstrip("Ġ▁").isalpha()


def vocabulary_mismatch(a: Any, b: Any) -> str | None:
    """Why two tokenizers cannot share token ids, or None when they can.

    Added and special tokens may differ between members of one family; the regular
    vocabulary must map every token to the same id. The message counts the tokens of
    both vocabularies together and names an ordinary word piece as the example.
    """
    special = _added(a) | _added(b)
    va = {t: i for t, i in a.get_vocab().items() if t not in special}
    vb = {t: i for t, i in b.get_vocab().items() if t not in special}
    if va == vb:
        return None
    differing = [t for t in va.keys() | vb.keys() if va.get(t) != vb.get(t)]
    example = min(differing, key=lambda t: (not _ordinary(t), va.get(t, 1 << 30), t))

    def where(vocab: dict[str, int]) -> str:
        return f"id {vocab[example]}" if example in vocab else "missing"

    return (
        f"{len(differing)} of the {len(va.keys() | vb.keys())} regular tokens in the two "
        f"vocabularies differ (e.g. {example!r}: {where(va)} vs {where(vb)})"
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
    product took 20-40x as long as in float32 with OpenBLAS. Quantized weights stay as
    they are. Returns whether it cast.
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


@functools.cache
def _ask_for_the_cpu_compiler() -> None:
    """mlx's CPU backend asks the shell whether g++ exists the first time a process fuses
    operations, through glibc's system(), which ignores Ctrl+C while it runs: in a run's
    first step, under load, a Ctrl+C was lost. Loading asks, once a process."""
    if mx.default_device().type == mx.DeviceType.cpu:
        mx.eval(mx.compile(lambda a: a * 2 + 1)(mx.zeros(1)))


@dataclass
class ModelStore:
    """Finds, reads and loads each model once per dtype policy (``config.DTYPES``),
    however many strategies and runs use it."""

    _loaded: dict[tuple[str, str | None, str], LoadedModel] = field(default_factory=dict)
    #: Where each (source, revision) was found: a hub id asks the hub once, not per call.
    _paths: dict[tuple[str, str | None], Path] = field(default_factory=dict)
    #: Tokenizers read from a folder before (or without) its model being loaded.
    _tokenizers: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: (source, split): ``split(model, config)`` runs on the model loaded from that
    #: source before its weights are read, to keep only this process's share of a
    #: target split over a group (``engines.distributed``). None: every model whole.
    split: tuple[str, Callable[[nn.Module, dict], None]] | None = None

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
            loaded = next((m for (folder, rev, _), m in self._loaded.items()
                           if folder == key and rev == revision), None)
            if loaded is not None:
                return loaded.tokenizer
            tokenizer = self._tokenizers.get(key)
        if tokenizer is None:
            tokenizer = load_tokenizer(path)
            with self._lock:
                self._tokenizers[key] = tokenizer
        return tokenizer

    def get(self, source: str, revision: str | None = None, dtype: str = "fast") -> LoadedModel:
        path = self.resolve(source, revision)
        key = (str(path.resolve()), revision, dtype)
        with self._lock:
            if key not in self._loaded:
                split = self.split[1] if self.split is not None and self.split[0] == source \
                    else None
                self._loaded[key] = self._load(source, path, revision, dtype, split)
                self._tokenizers.pop(key[0], None)  # the model's own serves from now on
            return self._loaded[key]

    def holds(self, path: Path, revision: str | None = None, dtype: str = "fast") -> bool:
        """Whether the model in the resolved directory ``path`` is loaded already."""
        with self._lock:
            return (str(path.resolve()), revision, dtype) in self._loaded

    @staticmethod
    def _load(source: str, path: Path, revision: str | None, dtype: str = "fast",
              split: Callable[[nn.Module, dict], None] | None = None) -> LoadedModel:
        from mlx_lm import load

        local = Path(source).expanduser().exists()
        try:
            with plain_named(path) as folder:
                model, tokenizer, config = load(
                    str(folder) if local else source, revision=revision, return_config=True,
                    lazy=split is not None, tokenizer_config=dict(_NO_REMOTE_CODE),
                    trust_remote_code=False,
                )
                if split is not None:  # before the weights are read: only a share is
                    split(model, config)
                    mx.eval(model.parameters())
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"cannot load the model {source}: {_short(exc)}") from exc
        _ask_for_the_cpu_compiler()
        upcast = prefer_fast_dtype(model) if dtype == "fast" else False
        return LoadedModel(source, path, model, tokenizer, config, revision, upcast,
                           draft_vocabulary(model, path))
