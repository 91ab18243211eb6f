"""Files written whole or not at all, and new names claimed without overwriting anything.

A path a person names (``--json``, ``--chart``) may also be a stream: ``/dev/stdout``,
``/dev/null``, a FIFO. ``write_atomic`` writes through to those, as every command-line
tool does (a rename would replace the node with a regular file), and refuses a path that
is neither a regular file, nor absent, nor such a stream (a directory, a block device, a
socket).

Both write the bytes to a temporary file beside the target (flushed to disk), then make it
appear under its name in one step: ``write_atomic`` renames it over the target (a crash
leaves the old file or the new one), ``write_new`` hard-links it to the first free name of
a list (the kernel refuses a name that exists, so two processes saving in the same second
get two files). A process killed mid-save leaves its temporary file behind; every later
save into that directory removes the ones whose writer is gone.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import tempfile
import time
from itertools import chain
from pathlib import Path
from typing import Iterable

#: Temporary files are ``.<name>.<pid>-<random>.specdeck.tmp``: hidden, and naming the
#: process that writes them.
_SUFFIX = ".specdeck.tmp"
_TEMPORARY = re.compile(r"^\..*\.(\d+)-[^.]+" + re.escape(_SUFFIX) + r"$")
#: A temporary file is stale once this old and its writer is gone (a save takes well
#: under a second; the margin covers a directory shared by two machines)...
STALE_SECONDS = 60.0
#: ... or once this old whatever the process id says (ids are reused).
ABANDONED_SECONDS = 24 * 3600.0
#: errno values of a file system that cannot hard-link (FAT, some network shares).
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK,
             errno.ENOSYS}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _alive(pid: int) -> bool:
    if os.name == "nt":  # signal 0 is CTRL_C_EVENT there: go by age alone
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process, or not a pid we can ask about: keep it
    return True


def remove_stale_temporaries(directory: Path, now: float | None = None) -> list[Path]:
    """Delete temporary files that killed saves left in ``directory``; returns them.

    Only this module's own temporary files, and only stale ones: never a save another
    process is writing right now."""
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMPORARY.match(entry.name)
        if match is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        age = now - info.st_mtime
        if not entry.is_file(follow_symlinks=False) or age < STALE_SECONDS:
            continue
        if age >= ABANDONED_SECONDS or not _alive(int(match.group(1))):
            try:
                os.unlink(entry.path)
            except OSError:
                continue
            removed.append(Path(entry.path))
    return removed


def _sync_directory(directory: Path) -> None:
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _temporary(directory: Path, name: str, data: bytes) -> str:
    """``data`` in a new temporary file in ``directory``, on disk; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(directory)
    fd, tmp = tempfile.mkstemp(prefix=f".{name[:100]}.{os.getpid()}-", suffix=_SUFFIX,
                               dir=directory)
    try:
        # mkstemp makes the file private (0600); a saved session is an ordinary file.
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


#: Paths that name one of this process's open files (``/dev/stdout``, ``/dev/fd/3``):
#: written to that descriptor, where the shell's redirection points.
_OWN_DESCRIPTOR = re.compile(r"^/(?:dev/(?:fd/(\d+)|(stdout|stderr))|proc/self/fd/(\d+))$")
_STREAMS = {"stdout": 1, "stderr": 2}


class NotWritable(OSError):
    """A path that is neither a regular file, nor absent, nor a stream to write through;
    ``kind`` says what it is ("a directory")."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"it is {kind}, not a file to write", str(path))
        self.kind = kind


def _own_descriptor(path: Path) -> int | None:
    """The descriptor ``path`` names when it is one of this process's own streams."""
    own = _OWN_DESCRIPTOR.match(os.path.normpath(os.path.abspath(path)))
    if own is None:
        return None
    number, name, proc = own.groups()
    return _STREAMS[name] if name else int(number or proc)


def _stream_mode(path: Path) -> int | None:
    """``path``'s mode when it exists and is not a regular file (None otherwise);
    NotWritable when it is nothing to write to: a directory, a block device, a socket."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a block device"
                if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "not a regular file")
        raise NotWritable(path, kind)
    return mode


def check_writable(path: Path) -> None:
    """NotWritable now, before a long run, for a path ``write_atomic`` would refuse."""
    if _own_descriptor(path) is None:
        try:
            _stream_mode(path)
        except NotWritable:
            raise
        except OSError:
            pass  # a problem the write itself names (no permission to look, a loop)


def is_stream(path: Path) -> bool:
    """Whether ``write_atomic`` writes through to ``path`` (``/dev/stdout``, a FIFO, a
    character device) rather than giving it a file."""
    try:
        return _own_descriptor(path) is not None or _stream_mode(path) is not None
    except OSError:
        return False


def _write_through(path: Path, data: bytes) -> bool:
    """Write ``data`` to the stream ``path`` names and return True; False when ``path``
    is absent or a regular file (written atomically instead)."""
    descriptor = _own_descriptor(path)
    if descriptor is not None:
        for stream in (sys.stdout, sys.stderr):  # what was printed comes first
            if stream is not None and not stream.closed:
                stream.flush()
        _write_all(descriptor, data)
        return True
    if _stream_mode(path) is None:
        return False
    descriptor = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        _write_all(descriptor, data)
    finally:
        os.close(descriptor)
    return True


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old file or the new.

    The bytes go to a temporary file in the same directory, are flushed to disk, and the
    temporary file is renamed over ``path`` (atomic on POSIX and on Windows). A stream
    (``/dev/stdout``, ``/dev/null``, a FIFO) is written through instead; a directory, a
    block device or a socket is refused (NotWritable).
    """
    path = Path(path)
    if _write_through(path, data):
        return
    tmp = _temporary(path.parent, path.name, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    _sync_directory(path.parent)


def _claim(tmp: str, path: Path) -> bool:
    """Give the temporary file the name ``path`` unless that name is taken."""
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
    # No hard links here: claim the name with an exclusive create, then move the
    # written file onto the empty file this process owns.
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        return False
    os.replace(tmp, path)
    return True


def write_new(directory: Path, names: Iterable[str], data: bytes) -> Path:
    """Write ``data`` under the first of ``names`` not taken in ``directory``, never over
    an existing file (even one another process creates meanwhile); returns its path."""
    directory = Path(directory)
    names = iter(names)
    first = next(names)
    tmp = _temporary(directory, first, data)
    try:
        for name in chain([first], names):
            path = directory / name
            if _claim(tmp, path):
                _sync_directory(directory)
                return path
        raise FileExistsError(errno.EEXIST, "every name offered is taken", str(directory))
    finally:
        _unlink(tmp)
