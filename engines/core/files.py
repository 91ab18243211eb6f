"""Bounded reads of files that come from others: sessions, sweeps, prompts, model configs.

A path may name anything: a symlink to ``/dev/zero`` (endless bytes: gigabytes, then a
MemoryError), a FIFO (a read that never returns), a directory. ``read_regular`` opens
without blocking, accepts only a regular file, and refuses one larger than its limit
before reading a byte, so each of these ends in one line instead.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from specdeck.engines.core.formatting import byte_size

#: The largest file read unless a caller allows more (``--max-file-size``): a
#: 20,000-token session with every alternative is ~25 MB, a large tokenizer ~35 MB.
MAX_FILE_BYTES = 256 * 2**20

_KINDS = {
    stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device (like /dev/zero)", stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class UnreadableFile(ValueError):
    """Not a regular file, or larger than allowed; the message says which (not the path:
    callers name the file their own way)."""


class TooLarge(UnreadableFile):
    """Larger than the limit (callers say how to allow more)."""


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (opening a FIFO this way
    never waits for a writer); UnreadableFile if it is anything else."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise UnreadableFile(f"is {kind}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def check_regular(path: str | os.PathLike, limit: int | None = MAX_FILE_BYTES) -> None:
    """What ``read_regular`` checks before reading a byte, for a file another program
    will read: UnreadableFile unless ``path`` is a regular file within ``limit``."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
    if limit is not None and size > limit:
        raise TooLarge(_too_large(size, limit))


def read_regular(path: str | os.PathLike, limit: int | None = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (None: no limit).

    UnreadableFile for anything else (a device, a FIFO, a directory, a file over the
    limit); OSError when the file cannot be opened (missing, no permission).
    """
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if limit is not None and size > limit:
            raise TooLarge(_too_large(size, limit))
        chunks, total = [], 0
        while True:  # the file may grow while it is read: stop past the limit
            chunk = f.read(1 << 24 if limit is None else min(1 << 24, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if limit is not None and total > limit:
                raise TooLarge(_too_large(total, limit))


def _too_large(size: int, limit: int) -> str:
    return f"is {byte_size(size)}, more than the {byte_size(limit)} allowed"


def read_text(path: Path, limit: int | None = MAX_FILE_BYTES) -> str:
    """``read_regular`` decoded as UTF-8 (UnicodeDecodeError when it is not)."""
    return read_regular(path, limit).decode("utf-8")
