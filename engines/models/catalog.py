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
import os
import struct
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Callable, Iterable

from specdeck.engines.models.draft_vocab_file import read_listed_tokens
from specdeck.engines.core.errors import ModelError
from specdeck.engines.core.files import UnreadableFile, check_regular, open_regular, read_regular

#: Files needed to read a model's configuration and tokenizer without its weights.
_TOKENIZER_PATTERNS = ["*.json", "tokenizer.model", "*.tiktoken", "*.txt", "*.jinja"]
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
#: The most a config may claim of each size: more than any real model has. A config
#: beyond them is broken or hostile, and is refused before anything is built from it
#: (100,000 layers took 112 s and 9 GB to fail).
CONFIG_LIMITS = {
    "num_hidden_layers": 1024, "hidden_size": 131_072, "intermediate_size": 1 << 20,
    "moe_intermediate_size": 1 << 20, "vocab_size": 1 << 22, "num_attention_heads": 1024,
    "num_key_value_heads": 1024, "head_dim": 8192, "num_experts": 4096,
    "num_local_experts": 4096, "num_experts_per_tok": 1024, "max_position_embeddings": 1 << 27,
    "mtp_num_hidden_layers": 64, "num_nextn_predict_layers": 64,
    "linear_num_key_heads": 1024, "linear_num_value_heads": 1024,
    "linear_key_head_dim": 8192, "linear_value_head_dim": 8192,
    "linear_conv_kernel_dim": 1024, "full_attention_interval": 1024,
}
#: What a model's own files may ask for that would run its code: transformers'
#: ``auto_map`` (asks ``[y/N]`` on the terminal unless told no) and mlx-lm's
#: ``model_file``.
CUSTOM_CODE_KEYS = {"config.json": ("auto_map", "model_file"),
                    "tokenizer_config.json": ("auto_map",)}
#: The files of a model folder that transformers, mlx-lm and optiq read, by name, and
#: the most bytes each may hold. A tokenizer's own files can be tens of MB (a 256k
#: vocabulary's tokenizer.json is ~35 MB); every other text file is small. Weights may
#: be any size, but must be regular files like the rest: a FIFO hangs its reader, and
#: /dev/zero or a huge file exhausts memory.
TOKENIZER_BYTES = 64 * 2**20
TEXT_BYTES = 8 * 2**20
_TOKENIZER_FILES = ("tokenizer*", "vocab*", "merges*", "spiece*", "*.model", "*.tiktoken")
_TEXT_FILES = ("*.json", "*.jinja", "*.txt", "*.jsonl", *_TOKENIZER_FILES)
_WEIGHT_FILES = ("*.safetensors",)
#: The small JSON files transformers and mlx-lm parse (besides the tokenizer's own).
_LOADER_JSON = ("generation_config.json", "tokenizer_config.json", "special_tokens_map.json",
                "added_tokens.json", "chat_template.json")
#: How deep below a model's folder those files are looked for (``optiq/mtp.safetensors``,
#: ``additional_chat_templates/*.jinja``).
_FOLDER_DEPTH = 2


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
    #: Tokens its folder lists to draft from (``engines.draft_vocab``): the rows a loaded
    #: model copies out of its output layer. 0: it drafts from the whole vocabulary.
    listed_tokens: int = 0
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
            "listed_tokens": self.listed_tokens,
        }


def read_safetensors_header(path: Path) -> list[Tensor]:
    """The tensors a safetensors file holds, from its header only."""
    try:
        with open_regular(path) as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise ValueError("shorter than its 8-byte header length")
            (length,) = struct.unpack("<Q", raw)
            if length > 100 * 2**20:
                raise ValueError(f"implausible header length {length}")
            header = json.loads(f.read(length), parse_constant=_no_constant)
        return [
            Tensor(name, str(entry["dtype"]), tuple(int(d) for d in entry["shape"]))
            for name, entry in header.items()
            if name != "__metadata__"
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelError(f"{path} is not a readable safetensors file ({exc})") from exc


def _no_constant(word: str) -> Any:
    """JSON has no NaN or infinity (Python's json reads them): name one where it stands."""
    raise ValueError(f"{word} is not a number JSON allows")


def file_limit(name: str) -> int | None:
    """The most bytes a model folder's file named ``name`` may hold (None: any number)."""
    if any(fnmatch(name, pattern) for pattern in _TOKENIZER_FILES):
        return TOKENIZER_BYTES
    return None if any(fnmatch(name, pattern) for pattern in _WEIGHT_FILES) else TEXT_BYTES


def check_model_files(path: Path) -> None:
    """Refuse a model folder any file of which that a loader reads is not a regular file
    (a FIFO, a device, a folder, a link loop) or is larger than ``file_limit`` allows,
    before anything reads it: ModelError naming the file."""
    def check(folder: Path, depth: int) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise ModelError(f"cannot read the folder {folder}: {exc.strerror or exc}") from exc
        for entry in entries:
            file = Path(entry.path)
            if any(fnmatch(entry.name, p) for p in (*_TEXT_FILES, *_WEIGHT_FILES)):
                try:
                    check_regular(file, file_limit(entry.name))
                except UnreadableFile as exc:
                    raise ModelError(f"{file} {exc}") from exc
                except OSError as exc:
                    raise ModelError(f"{file} cannot be read ({exc.strerror or exc})") from exc
                if entry.name in _LOADER_JSON:
                    _read_json(file)  # a broken one is named here, not left to a loader
            elif depth and entry.is_dir(follow_symlinks=False):
                check(file, depth - 1)

    check(path, _FOLDER_DEPTH)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(read_regular(path, file_limit(path.name)).decode("utf-8"),
                          parse_constant=_no_constant)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # UnreadableFile, JSON errors
        raise ModelError(f"cannot read {path}: {exc}") from exc


def check_config(config: dict, where: str) -> None:
    """Refuse a config whose sizes no real model has (``CONFIG_LIMITS``) or that names a
    file outside its folder, before anything is allocated from it."""
    text = config.get("text_config")
    for section in (config, text) if isinstance(text, dict) else (config,):
        for key, most in CONFIG_LIMITS.items():
            value = section.get(key)
            if value is not None and (type(value) is not int or not 0 <= value <= most):
                shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
                raise ModelError(f"{where}: {key} is {shown}, not a whole number from 0 to "
                                 f"{most:,}; no model is that large (a broken config?)")
    extra = config.get("mlx_lm_extra_tensors")
    mtp_file = extra.get("mtp_file") if isinstance(extra, dict) else None
    if mtp_file is not None and (
        not isinstance(mtp_file, str) or Path(mtp_file).is_absolute()
        or ".." in Path(mtp_file).parts
    ):
        raise ModelError(f"{where}: mlx_lm_extra_tensors.mtp_file must name a file inside "
                         "the model's folder")


def read_model_folder(path: Path) -> dict:
    """The config of the model folder ``path``, after every file a loader reads in it is
    checked (``check_model_files``): ``config.json`` read (bounded), parsed and checked
    (``check_config``)."""
    check_model_files(path)
    file = path / "config.json"
    config = _read_json(file)
    if not isinstance(config, dict):
        raise ModelError(f"{file} does not hold a JSON object")
    check_config(config, str(file))
    return config


def refuse_custom_code(path: Path) -> None:
    """specdeck never runs code a model ships: a folder whose config or tokenizer config
    names its own Python classes (``CUSTOM_CODE_KEYS``) is refused, before transformers
    or mlx-lm read it."""
    for name, keys in CUSTOM_CODE_KEYS.items():
        file = path / name
        if not file.exists():
            continue
        data = _read_json(file)
        found = [key for key in keys if isinstance(data, dict) and data.get(key)]
        if found:
            raise ModelError(
                f"{file} asks to run code shipped with the model ({found[0]}); specdeck "
                "never runs a model's own code: use a model that needs none"
            )


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


def missing_mtp_head(info: "ModelInfo", who: str) -> str:
    """Why ``info`` (``who``: the target...) has no MTP head to draft with, read from its
    folder ('' when it has one, or may have: its weights are not downloaded yet)."""
    if declared_mtp_layers(info.config) <= 0:
        return f"{who} has no MTP head (its config declares no MTP layers)"
    if info.weights_present and not info.has_mtp_head:
        return f"{who} has no MTP head (its files hold no mtp.* weights)"
    return ""


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
        try:
            return _vocabulary_fingerprint(data)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ModelError(f"{file} is not a tokenizer specdeck can read "
                             f"({type(exc).__name__}: {exc})") from exc
    for name in ("tokenizer.model", "tokenizer.tiktoken"):
        if (path / name).is_file():
            try:
                data = read_regular(path / name, TOKENIZER_BYTES)
            except (OSError, UnreadableFile) as exc:
                raise ModelError(f"cannot read {path / name}: {exc}") from exc
            return hashlib.sha256(data).hexdigest()[:12], None
    return None, None


def _vocabulary_fingerprint(data: Any) -> tuple[str, int]:
    """(fingerprint, vocabulary size) of a parsed ``tokenizer.json``."""
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


def token_decoder(path: Path) -> Callable[[list[int]], str] | None:
    """Decode token ids with a model folder's ``tokenizer.json`` alone (no weights, no
    mlx: the app names the target's alternatives this way); None when it has none."""
    file = Path(path) / "tokenizer.json"
    if not file.is_file():
        return None
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_str(read_regular(file, TOKENIZER_BYTES).decode("utf-8"))
    except Exception:  # unreadable, or tokenizers' own error: alternatives go unnamed
        return None
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)


def _is_hybrid(text: dict, model_type: str) -> bool:
    if model_type in HYBRID_TYPES:
        return True
    kinds = set(text.get("layer_types") or [])
    return bool(kinds - {"full_attention", "sliding_attention", "attention"})


def looks_like_hub_id(source: str) -> bool:
    """``org/name``, as the Hugging Face hub names models (not a path)."""
    parts = source.split("/")
    return len(parts) == 2 and all(parts) and not source.startswith((".", "/", "~"))


def require_findable(source: str) -> None:
    """A ModelError when ``source`` is neither an existing path nor a hub id: said first,
    before anything else about a run that names it."""
    if not looks_like_hub_id(source) and not Path(source).expanduser().exists():
        raise ModelError(
            f"model not found: {source} (no such directory; a Hugging Face id looks like "
            "mlx-community/Qwen3-0.6B-4bit)"
        )


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


def resolve(source: str, revision: str | None = None) -> Path:
    """The local directory holding ``source``'s config and tokenizer (no weights yet),
    checked: a sane config, and no code of its own to run."""
    path = _find(source, revision)
    read_model_folder(path)
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


def describe_dir(
    path: Path | str, name: str | None = None, source: str = "dir",
    revision: str | None = None, size_on_disk: int | None = None,
) -> ModelInfo:
    """Describe the model in ``path``; ModelError when it is not one (a config or header
    of the wrong shape included)."""
    path = require_model_dir(Path(path).expanduser())
    config = read_model_folder(path)
    try:
        return _describe(path, config, name, source, revision, size_on_disk)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ModelError(f"{path / 'config.json'} is not a model description specdeck "
                         f"can read ({type(exc).__name__}: {exc})") from exc


def _size_on_disk(path: Path) -> int:
    """Bytes of the files under ``path`` (links to folders not followed: no loops)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


def _describe(path: Path, config: dict, name: str | None, source: str,
              revision: str | None, size_on_disk: int | None) -> ModelInfo:
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
        size_on_disk = _size_on_disk(path)
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
        listed_tokens=_listed_tokens(path, text),
        config=config,
    )


def _listed_tokens(path: Path, text: dict) -> int:
    """How many tokens ``path`` lists to draft from; 0 for none, and for a list that
    cannot be used (loading the model names that problem and its fix)."""
    try:
        tokens = read_listed_tokens(path, int(text.get("vocab_size") or 0))
    except ModelError:
        return 0
    return len(tokens or ())


def _scan_repository(folder: Path) -> Any:
    """huggingface_hub's scan of one repository folder of the cache: (repository, its
    ``main`` or newest revision, that revision's folder), None for none; ModelError when
    the folder cannot be read. (The scan reads a whole cache at once: one broken folder,
    a link loop, made it raise for all.)"""
    import tempfile

    from huggingface_hub import scan_cache_dir

    with tempfile.TemporaryDirectory(prefix="specdeck-scan-") as alone:
        scanned = Path(alone).resolve()
        try:
            os.stat(folder)  # a link loop in its own name: the scan would pass it over
            (scanned / folder.name).symlink_to(folder.absolute(), target_is_directory=True)
            (repo,) = scan_cache_dir(scanned).repos or (None,)
        except Exception as exc:  # whatever a broken folder makes the scan raise
            why = f"{type(exc).__name__}: {exc}".replace(str(scanned), str(folder.parent))
            raise ModelError(f"skipped {folder} in the Hugging Face cache: it cannot be "
                             f"read ({why})") from exc
        if repo is None:
            return None
        revisions = sorted(repo.revisions, key=lambda r: ("main" in r.refs, r.last_modified))
        if not revisions:
            return None
        newest = revisions[-1]
        return (repo, newest, folder.parent / newest.snapshot_path.relative_to(scanned))


def scan_hf_cache(cache_dir: Path | str | None = None,
                  on_problem: Callable[[ModelError], None] = lambda error: None,
                  ) -> list[ModelInfo]:
    """Every model in the Hugging Face cache (its ``main`` revision, else the newest).

    Repositories that are not language models (no ``config.json``) are left out; one
    the scan cannot read (a link loop) is left out and handed to ``on_problem``; an
    empty or missing cache gives an empty list. Reads the cache only, never the hub.
    """
    from huggingface_hub.constants import HF_HUB_CACHE

    root = Path(cache_dir or HF_HUB_CACHE).expanduser()
    try:
        folders = sorted(p for p in root.iterdir() if p.name.startswith("models--"))
    except OSError:
        return []
    found = []
    for folder in folders:
        try:
            scanned = _scan_repository(folder)
        except ModelError as exc:
            on_problem(exc)
            continue
        if scanned is not None:
            found.append(scanned)
    models = []
    for repo, revision, snapshot in sorted(found, key=lambda r: r[0].repo_id.lower()):
        if repo.repo_type != "model":
            continue
        if not (snapshot / "config.json").is_file():
            continue
        try:
            models.append(describe_dir(
                snapshot, name=repo.repo_id, source="hub",
                revision=revision.commit_hash, size_on_disk=revision.size_on_disk,
            ))
        except ModelError:
            continue  # a half-downloaded or foreign repository: not usable, not listed
    return models


def model_dirs_in(folder: Path) -> list[Path]:
    """The model folders (holding config.json) among ``folder``'s subfolders and theirs:
    a family folder (``models/demo`` holds ``target`` and ``draft``) is found from its
    parent too. Unreadable folders are passed over."""
    found = []

    def subfolders(path: Path) -> list[Path]:
        try:
            return sorted(p for p in path.iterdir() if p.is_dir())
        except OSError:
            return []

    for child in subfolders(folder):
        if (child / "config.json").is_file():
            found.append(child)
        else:
            found += [g for g in subfolders(child) if (g / "config.json").is_file()]
    return found


def find_models(dirs: Iterable[Path | str] = (), cache_dir: Path | str | None = None,
                hub: bool = True,
                on_problem: Callable[[ModelError], None] | None = None) -> list[ModelInfo]:
    """The models in each of ``dirs`` (a model directory, or a folder of them), then
    those in the Hugging Face cache. A named path holding no usable model raises
    ModelError, or, given ``on_problem``, is handed to it and the others still listed."""
    found: list[ModelInfo] = []

    def problem(error: ModelError) -> None:
        if on_problem is None:
            raise error
        on_problem(error)

    def add(path: Path) -> None:
        try:
            found.append(describe_dir(path))
        except ModelError as exc:
            problem(exc)

    for d in dirs:
        path = Path(d).expanduser()
        if (path / "config.json").is_file() or not path.is_dir():
            add(path)
            continue
        inner = model_dirs_in(path)
        if not inner:
            problem(ModelError(
                f"{d} is not a model directory and holds none: no config.json in it, its "
                "subfolders or theirs (point at the folder that holds config.json)"
            ))
        for p in inner:
            add(p)
    if hub:
        found.extend(scan_hf_cache(cache_dir, problem))
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
