"""A GGUF file's header checked before mlx reads it.

``mx.load`` trusts a GGUF header: a tensor count, a metadata count, a string length or
a dimension count that lies aborts or segfaults the process, with no Python exception
to catch. ``check_gguf`` walks the header (llama.cpp's ``gguf.md``: magic, version,
counts, each key and value, each tensor's name, dimensions, type and offset) and
refuses, in one ``ModelError``, anything that does not fit inside the file: a count
larger than the bytes left could hold, a string running past the end or not UTF-8, more
than four dimensions, a tensor type without a known size, a tensor's data outside the
file.
Pure Python on a memory map: no mlx, and no more of the file read than its header.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from specdeck.engines.core.errors import ModelError
from specdeck.engines.core.files import UnreadableFile, open_regular

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
#: ggml's GGML_MAX_DIMS.
MAX_DIMS = 4
#: Bytes of each fixed-size metadata value type (8 is a string, 9 an array).
_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
#: (values per block, bytes per block) of each ggml tensor type, by its number
#: (llama.cpp's ``GGML_QUANT_SIZES``).
TENSOR_TYPES = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
    14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98),
    19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1),
    25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
}
_DEFAULT_ALIGNMENT = 32


class _Header:
    """A cursor over the mapped file: each read checks that its bytes are there."""

    def __init__(self, data: mmap.mmap | bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int, what: str) -> int:
        if size < 0 or self.at + size > len(self.data):
            raise ValueError(f"{what} runs past the end of the file (byte {self.at:,})")
        start, self.at = self.at, self.at + size
        return start

    def unpack(self, form: str, what: str) -> int:
        return struct.unpack_from(form, self.data, self.take(struct.calcsize(form), what))[0]

    def count(self, what: str, least_bytes: int) -> int:
        """A u64 count of items each at least ``least_bytes`` long: no more than the
        bytes left can hold."""
        n = self.unpack("<Q", what)
        if n * least_bytes > len(self.data) - self.at:
            raise ValueError(f"{what} is {n:,}, more than the file can hold")
        return n

    def string(self, what: str) -> bytes:
        length = self.unpack("<Q", f"the length of {what}")
        raw = bytes(self.data[self.take(length, what):self.at])
        try:  # GGUF strings are UTF-8, and mlx decodes each (a failure may escape uncaught)
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{what} is not UTF-8 (byte {exc.start:,} of it)") from None
        return raw

    def value(self, kind: int, what: str, nested: bool = False) -> object:
        if kind in _SCALARS:
            start = self.take(_SCALARS[kind], what)
            return int.from_bytes(self.data[start:self.at], "little") if kind == 4 else None
        if kind == _STRING:
            self.string(what)
            return None
        if kind == _ARRAY and not nested:
            item = self.unpack("<I", f"the item type of {what}")
            n = self.count(f"the length of {what}", _SCALARS.get(item, 8))
            if item in _SCALARS:
                self.take(n * _SCALARS[item], what)
            else:
                for _ in range(n):
                    self.value(item, what, nested=True)
            return None
        raise ValueError(f"{what} has a value type {kind} that GGUF does not define"
                         + (" (or an array inside an array)" if kind == _ARRAY else ""))


def check_gguf(path: Path) -> None:
    """Refuse (ModelError, one line naming the problem) a GGUF file whose header mlx
    cannot read safely; return quietly when every count, length, dimension and offset
    fits inside the file."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise ValueError(f"it is {size} bytes, shorter than a GGUF header")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                _check(_Header(data), size)
    except (OSError, UnreadableFile, ValueError, struct.error) as exc:
        raise ModelError(f"cannot read {path} as a GGUF file: {exc}") from exc


def _check(header: _Header, size: int) -> None:
    if bytes(header.data[header.take(4, "the magic"):header.at]) != _MAGIC:
        raise ValueError("it does not start with GGUF")
    version = header.unpack("<I", "the version")
    if version not in _VERSIONS:
        raise ValueError(f"its version is {version}; versions {_VERSIONS} can be read")
    # Each tensor is at least a name length, a dimension count, one dimension, a type
    # and an offset; each key-value pair a key length, a type and one byte of value.
    tensors = header.count("the tensor count", 8 + 4 + 8 + 4 + 8)
    pairs = header.count("the metadata count", 8 + 4 + 1)
    alignment = _DEFAULT_ALIGNMENT
    for index in range(pairs):
        key = header.string(f"metadata key {index}")[:60].decode("utf-8", "replace")
        kind = header.unpack("<I", f"the type of metadata {index}")
        value = header.value(kind, f"metadata {key!r}")
        if key == "general.alignment":
            if kind != 4 or not value or value & (value - 1):
                raise ValueError("general.alignment is not a power of two")
            alignment = value
    spans = []
    for index in range(tensors):
        name = header.string(f"the name of tensor {index}")[:60].decode("utf-8", "replace")
        dims = header.unpack("<I", f"the dimension count of tensor {name!r}")
        if not 1 <= dims <= MAX_DIMS:
            raise ValueError(f"tensor {name!r} has {dims} dimensions (1 to {MAX_DIMS})")
        shape = [header.unpack("<Q", f"a dimension of tensor {name!r}") for _ in range(dims)]
        kind = header.unpack("<I", f"the type of tensor {name!r}")
        offset = header.unpack("<Q", f"the offset of tensor {name!r}")
        if kind not in TENSOR_TYPES:
            raise ValueError(f"tensor {name!r} has type {kind}, which has no known size")
        block, block_bytes = TENSOR_TYPES[kind]
        elements = 1
        for d in shape:
            elements *= d
        if elements == 0 or shape[0] % block or offset % alignment:
            raise ValueError(f"tensor {name!r} has shape {shape}, type {kind} and offset "
                             f"{offset:,}, which do not fit together")
        spans.append((name, offset, elements // block * block_bytes))
    data_start = -(-header.at // alignment) * alignment
    for name, offset, nbytes in spans:
        if data_start + offset + nbytes > size:
            raise ValueError(f"tensor {name!r} ({nbytes:,} bytes at {offset:,}) lies "
                             "outside the file")
