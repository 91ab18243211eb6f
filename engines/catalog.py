"""What models a user already has, described from their files alone.

Reads ``config.json``, the safetensors headers (an 8-byte little-endian length, then a
JSON table of dtype and shape per tensor) and ``tokenizer.json``: no weights are read,
nothing is imported from mlx, and nothing touches the network (the Hugging Face cache
is walked with ``huggingface_hub.scan_cache_dir``, never downloaded from). What it
reports is what ``specdeck models`` lists, what the memory estimate is built on, and how
draft models are suggested: two models with the same tokenizer fingerprint share token
ids, so one can draft for the other.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from specdeck.engines.errors import ModelError

#: Bytes per element of each safetensors dtype.
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}
#: Half-precision dtypes, which ``loading.prefer_fast_dtype`` casts to float32 on the CPU.
HALF_DTYPES = {"F16", "BF16"}
#: Model types whose layers keep a recurrent state (``ArraysCache``) next to attention.
HYBRID_TYPES = {
    "qwen3_next", "qwen3_5", "qwen3_5_moe", "falcon_h1", "granitemoehybrid", "nemotron_h",
    "lfm2", "lfm2_moe", "jamba", "mamba", "mamba2", "recurrent_gemma", "plamo2", "kimi_linear",
}
#: Hybrid types whose verify pass keeps every position's recurrent state instead of
#: restoring and replaying (``engines.capture``; mlx-optiq's Qwen3.5/3.6 layout).
CAPTURE_TYPES = {"qwen3_5", "qwen3_5_moe"}
#: Tensors on disk that mlx-lm's ``sanitize`` drops (vision towers; MTP heads, which
#: ``engines.mtp`` loads separately).
_DROPPED_PREFIXES = ("vision_tower.", "model.visual.", "visual.", "audio_tower.")
#: Where an MTP head lives, as mlx-optiq's ``artifacts.expected_mtp_file`` and
#: ``is_mtp_key`` look for it. Mirrored here (not imported): importing optiq imports
#: mlx and patches it process-wide, and this module must stay file-only. Keep in step
#: with ``engines.mtp``, which loads the head through optiq.
MTP_KEY_PREFIXES = ("mtp.", "language_model.mtp.")
MTP_SIDECARS = ("optiq/mtp.safetensors", "mtp.safetensors", "mtp/weights.safetensors",
                "model-mtp.safetensors")


@dataclass(frozen=True, slots=True)
class Tensor:
    """One tensor's header entry."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.elements * DTYPE_BYTES.get(self.dtype, 4)


@dataclass
class ModelInfo:
    """One usable model, described without loading it."""

    #: Hugging Face id for a cached model, the directory's name otherwise.
    name: str
    path: Path
    #: ``"hub"`` (from the Hugging Face cache) or ``"dir"`` (a directory the user named).
    source: str
    model_type: str
    architecture: str
    #: Parameters of the loaded model (quantized weights counted unpacked); None when
    #: the weights are not on disk (a cache entry holding only config and tokenizer).
    parameters: int | None
    #: Quantisation bits and group size, None when not quantized.
    bits: int | None
    group_size: int | None
    #: The most common floating dtype of the weights (scales included), e.g. ``BF16``.
    dtype: str | None
    size_on_disk: int
    hybrid: bool
    has_mtp_head: bool
    #: Short hash of the regular vocabulary: equal fingerprints share token ids.
    tokenizer: str | None
    vocab_size: int | None
    revision: str | None = None
    #: Bytes of the weights mlx-lm keeps (MTP head and vision tower left out), as stored.
    weight_bytes: int = 0
    #: Of those, bytes in float16/bfloat16 (doubled when cast to float32 on the CPU).
    half_weight_bytes: int = 0
    #: Parameters of the MTP head (quantized matrices counted unpacked).
    mtp_parameters: int = 0
    config: dict = field(default_factory=dict, repr=False)

    @property
    def text_config(self) -> dict:
        """The language model's settings (multimodal configs nest them)."""
        return self.config.get("text_config") or self.config

    @property
    def weights_present(self) -> bool:
        return self.parameters is not None

    def to_dict(self) -> dict:
        return {
            "name": self.name, "path": str(self.path), "source": self.source,
            "model_type": self.model_type, "architecture": self.architecture,
            "parameters": self.parameters, "bits": self.bits, "group_size": self.group_size,
            "dtype": self.dtype, "size_on_disk": self.size_on_disk, "hybrid": self.hybrid,
            "has_mtp_head": self.has_mtp_head, "tokenizer": self.tokenizer,
            "vocab_size": self.vocab_size, "revision": self.revision,
        }


def read_safetensors_header(path: Path) -> list[Tensor]:
    """The tensors a safetensors file holds, from its header only."""
    try:
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise ValueError("shorter than its 8-byte header length")
            (length,) = struct.unpack("<Q", raw)
            if length > 100 * 2**20:
                raise ValueError(f"implausible header length {length}")
            header = json.loads(f.read(length))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path} is not a readable safetensors file ({exc})") from exc
    return [
        Tensor(name, entry["dtype"], tuple(entry["shape"]))
        for name, entry in header.items()
        if name != "__metadata__"
    ]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc


def is_mtp_key(name: str) -> bool:
    return name.startswith(MTP_KEY_PREFIXES)


def declared_mtp_layers(config: dict) -> int:
    """MTP layers a config declares (as mlx-optiq reads them)."""
    text = config.get("text_config") or config
    return int(
        text.get("mtp_num_hidden_layers")
        or text.get("num_nextn_predict_layers")
        or config.get("num_nextn_predict_layers")
        or 0
    )


def mtp_sidecar(path: Path, config: dict) -> Path | None:
    """The separate file holding a model's MTP head, if it has one."""
    extra = config.get("mlx_lm_extra_tensors")
    names = [extra["mtp_file"]] if isinstance(extra, dict) and extra.get("mtp_file") else []
    for name in [*names, *MTP_SIDECARS]:
        if (path / name).is_file():
            return path / name
    return None


def _quantization(config: dict) -> dict:
    text = config.get("text_config") or {}
    for source in (config, text):
        for key in ("quantization", "quantization_config"):
            if isinstance(source.get(key), dict):
                return source[key]
    return {}


def _parameters(tensors: list[Tensor], quant: dict) -> int:
    """Parameters, counting a quantized matrix by its unpacked size."""
    names = {t.name for t in tensors}
    total = 0
    for t in tensors:
        base = t.name.rsplit(".", 1)[0]
        if t.name.endswith((".scales", ".biases")) and f"{base}.weight" in names:
            continue
        if f"{base}.scales" in names and t.dtype == "U32":
            layer = quant.get(base) or quant.get(base.removeprefix("language_model."))
            bits = (layer if isinstance(layer, dict) else quant).get("bits", 4)
            total += t.elements * 32 // int(bits)
        else:
            total += t.elements
    return total


def _tokenizer_fingerprint(path: Path) -> tuple[str | None, int | None]:
    """(fingerprint, vocabulary size) of the regular vocabulary, special tokens left out
    (as ``loading.vocabulary_mismatch`` compares them); a hash of the raw file for
    tokenizers without ``tokenizer.json``."""
    file = path / "tokenizer.json"
    if file.is_file():
        data = _read_json(file)
        model = data.get("model") or {}
        vocab = model.get("vocab") or {}
        if isinstance(vocab, list):  # Unigram: [piece, score] by id
            vocab = {entry[0]: i for i, entry in enumerate(vocab)}
        special = {t["content"] for t in data.get("added_tokens", []) if t.get("special")}
        regular = {t["id"]: t["content"] for t in data.get("added_tokens", [])
                   if not t.get("special")}
        pairs = {i: t for t, i in vocab.items() if t not in special}
        pairs.update(regular)
        digest = hashlib.sha256()
        for i in sorted(pairs):
            digest.update(f"{i}\t{pairs[i]}\n".encode("utf-8", "surrogatepass"))
        size = max([*vocab.values(), *(t["id"] for t in data.get("added_tokens", []))],
                   default=-1) + 1
        return digest.hexdigest()[:12], size
    for name in ("tokenizer.model", "tokenizer.tiktoken"):
        if (path / name).is_file():
            return hashlib.sha256((path / name).read_bytes()).hexdigest()[:12], None
    return None, None


def token_decoder(path: Path) -> Callable[[list[int]], str] | None:
    """Decode token ids with a model folder's ``tokenizer.json`` alone (no weights, no
    mlx: the app names the target's alternatives this way); None when it has none."""
    file = Path(path) / "tokenizer.json"
    if not file.is_file():
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(file))
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)


def _is_hybrid(text: dict, model_type: str) -> bool:
    if model_type in HYBRID_TYPES:
        return True
    kinds = set(text.get("layer_types") or [])
    return bool(kinds - {"full_attention", "sliding_attention", "attention"})


def require_model_dir(path: Path, label: str | None = None) -> Path:
    """``path`` when it is a model's folder (it holds config.json); else a ModelError that
    names ``label`` (default: the path) and what to point at instead."""
    label = label or str(path)
    if path.exists() and not path.is_dir():
        raise ModelError(f"{label} is a file, not a model directory")
    if not path.is_dir():
        raise ModelError(f"{label} is not a directory (point at a model's folder)")
    if not (path / "config.json").is_file():
        raise ModelError(
            f"{label} is not a model directory: it has no config.json (point at the folder "
            "that holds config.json and the *.safetensors files)"
        )
    return path


def describe_dir(
    path: Path | str, name: str | None = None, source: str = "dir",
    revision: str | None = None, size_on_disk: int | None = None,
) -> ModelInfo:
    """Describe the model in ``path``; ModelError when it is not one."""
    path = require_model_dir(Path(path).expanduser())
    config = _read_json(path / "config.json")
    if not isinstance(config, dict):
        raise ModelError(f"{path / 'config.json'} does not hold a JSON object")
    text = config.get("text_config") or config
    model_type = str(text.get("model_type") or config.get("model_type") or "unknown")
    architecture = (config.get("architectures") or [model_type])[0]
    shards = sorted(path.glob("model*.safetensors"))
    tensors = [t for shard in shards for t in read_safetensors_header(shard)]
    sidecar = mtp_sidecar(path, config)
    head = [t for t in tensors if is_mtp_key(t.name)]
    if sidecar is not None and sidecar not in shards:
        head += read_safetensors_header(sidecar)
    tied = bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    kept = [
        t for t in tensors
        if not is_mtp_key(t.name)
        and not t.name.startswith(_DROPPED_PREFIXES)
        and not t.name.endswith("rotary_emb.inv_freq")
        and not (tied and t.name.endswith("lm_head.weight"))
    ]
    quant = _quantization(config)
    floats = {}
    for t in kept:
        if t.dtype.startswith(("F", "BF")):
            floats[t.dtype] = floats.get(t.dtype, 0) + t.nbytes
    fingerprint, vocab = _tokenizer_fingerprint(path)
    if size_on_disk is None:
        size_on_disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return ModelInfo(
        name=name or path.name,
        path=path,
        source=source,
        model_type=model_type,
        architecture=architecture,
        parameters=_parameters(kept, quant) if kept else None,
        bits=int(quant["bits"]) if quant.get("bits") else None,
        group_size=int(quant["group_size"]) if quant.get("group_size") else None,
        dtype=max(floats, key=floats.get) if floats else None,
        size_on_disk=size_on_disk,
        hybrid=_is_hybrid(text, model_type),
        has_mtp_head=declared_mtp_layers(config) > 0 and bool(head),
        tokenizer=fingerprint,
        vocab_size=vocab or text.get("vocab_size"),
        revision=revision,
        weight_bytes=sum(t.nbytes for t in kept),
        half_weight_bytes=sum(t.nbytes for t in kept if t.dtype in HALF_DTYPES),
        mtp_parameters=_parameters(head, quant),
        config=config,
    )


def scan_hf_cache(cache_dir: Path | str | None = None) -> list[ModelInfo]:
    """Every model in the Hugging Face cache (its ``main`` revision, else the newest).

    Repositories that are not language models (no ``config.json``) are left out; an
    empty or missing cache gives an empty list. Reads the cache only, never the hub.
    """
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        cache = scan_cache_dir(cache_dir)
    except CacheNotFound:
        return []
    models = []
    for repo in sorted(cache.repos, key=lambda r: r.repo_id.lower()):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        revisions = sorted(repo.revisions, key=lambda r: ("main" in r.refs, r.last_modified))
        revision = revisions[-1]
        if not (revision.snapshot_path / "config.json").is_file():
            continue
        try:
            models.append(describe_dir(
                revision.snapshot_path, name=repo.repo_id, source="hub",
                revision=revision.commit_hash, size_on_disk=revision.size_on_disk,
            ))
        except ModelError:
            continue  # a half-downloaded or foreign repository: not usable, not listed
    return models


def find_models(dirs: Iterable[Path | str] = (), cache_dir: Path | str | None = None,
                hub: bool = True) -> list[ModelInfo]:
    """The models in each of ``dirs`` (a model directory, or a folder of them), then
    those in the Hugging Face cache; ModelError for a named path holding no model."""
    found = []
    for d in dirs:
        path = Path(d).expanduser()
        if (path / "config.json").is_file() or not path.is_dir():
            found.append(describe_dir(path))
            continue
        inner = [p for p in sorted(path.iterdir()) if (p / "config.json").is_file()]
        if not inner:
            raise ModelError(
                f"{d} is not a model directory and holds none: no config.json in it or "
                "its subfolders (point at the folder that holds config.json)"
            )
        found.extend(describe_dir(p) for p in inner)
    if hub:
        found.extend(scan_hf_cache(cache_dir))
    return found


def suggest_drafts(target: ModelInfo, candidates: Iterable[ModelInfo]) -> list[ModelInfo]:
    """Models that can draft for ``target``: same tokenizer, fewer parameters; smallest
    first (a draft pays off only while it is much cheaper than the target)."""
    if target.tokenizer is None or target.parameters is None:
        return []
    usable = [
        c for c in candidates
        if c.tokenizer == target.tokenizer and c.parameters is not None
        and c.parameters < target.parameters and c.path != target.path
    ]
    return sorted(usable, key=lambda c: c.parameters)
