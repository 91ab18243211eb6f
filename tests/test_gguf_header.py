"""A GGUF file is untrusted input: its header is checked before mlx reads it (mlx trusts
it: a lying tensor count, metadata count, string length or dimension count crashed the
process). Headers with counts, lengths, dimensions, types and offsets rewritten by
hypothesis are refused in one ModelError, or are ones ``mx.load`` reads without
crashing: a crash here would end the test process."""

from __future__ import annotations

import struct
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdeck.engines.core.errors import ModelError
from specdeck.engines.models.gguf_convert import read_gguf
from specdeck.engines.models.gguf_header import check_gguf

gguf = pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[bytes, int]:
    """A small GGUF file (strings, arrays of strings and numbers, a float tensor and a
    quantized one) and where its header ends."""
    path = tmp_path_factory.mktemp("gguf") / "base.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.name", "tiny")
    writer.add_token_list(["a", "bb", "ccc", "<|im_end|>"])
    writer.add_array("numbers", [1, 2, 3])
    writer.add_uint32("llama.block_count", 1)
    writer.add_tensor("w", np.arange(64, dtype=np.float32).reshape(2, 32))
    blocks = gguf.quants.quantize(np.ones((2, 64), np.float32),
                                  gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("q", blocks, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes(), gguf.GGUFReader(str(path)).data_offset


def test_a_well_formed_file_passes_and_loads(base, tmp_path) -> None:
    path = tmp_path / "ok.gguf"
    path.write_bytes(base[0])
    check_gguf(path)
    tensors, meta = read_gguf(path)
    assert set(tensors) >= {"w", "q"} and meta["general.name"] == "tiny"


#: Values a lying header uses: zero, one, all ones, the sign bit, just past the file.
LIES = st.sampled_from([0, 1, 5, 9, 2**31, 2**32 - 1, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1)


@st.composite
def lies(draw, header_end: int) -> list[tuple[str, int, int]]:
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        width = draw(st.sampled_from(["Q", "I", "B"]))
        at = draw(st.integers(4, header_end - 1))
        value = draw(LIES) % (256 ** struct.calcsize(width))
        edits.append((width, at, value))
    return edits


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_lying_header_is_refused_or_read_without_a_crash(base, tmp_path, data) -> None:
    raw, header_end = base
    mutated = bytearray(raw)
    for width, at, value in data.draw(lies(header_end)):
        at = min(at, len(mutated) - struct.calcsize(width))
        struct.pack_into(f"<{width}", mutated, at, value)
    if data.draw(st.booleans()):
        mutated = mutated[:data.draw(st.integers(0, len(mutated)))]
    path = tmp_path / "lying.gguf"
    path.write_bytes(bytes(mutated))
    try:
        check_gguf(path)
    except ModelError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    try:
        mx.load(str(path), return_metadata=True)  # must not abort nor segfault
    except (RuntimeError, ValueError):
        pass


@pytest.mark.parametrize(("at", "value", "needle"), [
    (8, 2**62, "the tensor count is"),        # tensors
    (16, 2**40, "the metadata count is"),     # key-value pairs
    (24, 2**50, "runs past the end"),         # the first key's length
    (32, 0x80, "metadata key 0 is not UTF-8"),  # the first key's first byte
])
def test_each_lie_is_named(base, tmp_path, at, value, needle) -> None:
    mutated = bytearray(base[0])
    struct.pack_into("<Q", mutated, at, value)
    path = tmp_path / "lie.gguf"
    path.write_bytes(bytes(mutated))
    with pytest.raises(ModelError, match=needle):
        read_gguf(path)


def test_too_many_dimensions_are_refused(base, tmp_path) -> None:
    raw, header_end = base
    at = raw.index(b"w", raw.index(b"numbers") + 7, header_end) + 1  # tensor "w"'s n_dims
    mutated = bytearray(raw)
    struct.pack_into("<I", mutated, at, 5)
    path = tmp_path / "dims.gguf"
    path.write_bytes(bytes(mutated))
    with pytest.raises(ModelError, match="has 5 dimensions"):
        check_gguf(Path(path))
