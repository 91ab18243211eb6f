"""Where specdeck writes a path a person names (``--json``, ``--chart``): a regular file
or a new one atomically; a stream (``/dev/stdout``, ``/dev/null``, a FIFO, a character
device) written through, the node kept; anything else (a directory, a block device, a
socket) refused, before a run starts."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from helpers.sessions import document, sample_traces
from specdeck.cli import main
from specdeck.commands.options import write_results
from specdeck.engines.core.atomic_files import NotWritable, check_writable, write_atomic

DATA = b'{"a": 1}'


def made_node(path: Path, kind: int, device: tuple[int, int]) -> bool:
    """Whether a device node could be made at ``path`` (it takes root)."""
    try:
        os.mknod(path, kind | 0o666, os.makedev(*device))
    except PermissionError:
        return False
    return True


def char_device(path: Path) -> Path:
    """A copy of /dev/null made with mknod (root), else a link to /dev/null."""
    if not made_node(path, stat.S_IFCHR, (1, 3)):
        path.symlink_to("/dev/null")
    return path


def test_a_regular_path_is_written_whole(tmp_path) -> None:
    path = tmp_path / "out.json"
    write_atomic(path, DATA)
    write_atomic(path, DATA + b" ")
    assert path.read_bytes() == DATA + b" " and stat.S_ISREG(path.lstat().st_mode)


def test_a_fifo_is_written_through_and_kept(tmp_path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, DATA)
    reader.join(timeout=10)
    assert got == [DATA] and stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_character_device_is_written_through_and_kept(tmp_path) -> None:
    node = char_device(tmp_path / "null")
    before = os.stat(node)
    write_atomic(node, DATA)
    after = os.stat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    write_atomic(Path("/dev/null"), DATA)  # and the real one
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_dev_stdout_writes_to_this_process_s_standard_output(capfd) -> None:
    print("before")
    write_atomic(Path("/dev/stdout"), DATA)
    write_atomic(Path("/dev/fd/2"), b"to stderr")
    out, err = capfd.readouterr()
    assert out == "before\n" + DATA.decode() and err == "to stderr"


def _block_device(path: Path) -> Path:
    if not made_node(path, stat.S_IFBLK, (7, 0)):
        pytest.skip("making a block device needs root")
    return path


def _socket(path: Path) -> Path:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    return path


@pytest.mark.parametrize(("make", "kind"), [
    (lambda p: p.mkdir() or p, "a directory"),
    (_block_device, "a block device"),
    (_socket, "a socket"),
])
def test_what_is_neither_a_file_nor_a_stream_is_refused(tmp_path, make, kind) -> None:
    path = make(tmp_path / "node")
    with pytest.raises(NotWritable, match=kind):
        check_writable(path)
    with pytest.raises(NotWritable, match=kind):
        write_atomic(path, DATA)
    assert not stat.S_ISREG(os.lstat(path).st_mode)  # left as it was


@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_the_commands_refuse_such_a_path_before_running(tmp_path, capsys, command) -> None:
    path = _socket(tmp_path / "sock")
    code = main([command, "--strategies", "draft", "--prompt", "x", "--json", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == (
        f"specdeck: error: --json {path} is a socket: name a file to write")


def test_results_to_a_character_device_say_wrote_and_keep_the_node(tmp_path) -> None:
    node = char_device(tmp_path / "null")
    said: list[str] = []
    assert write_results(document(sample_traces()), node, False, None, said.append)
    assert said == [f"wrote {node}"] and not stat.S_ISREG(os.stat(node).st_mode)
