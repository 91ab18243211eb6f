"""The sessions directory: where every run is saved, and what the session browser lists,
renames and deletes. Pure file operations; the app and the CLI put faces on them."""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from itertools import count
from pathlib import Path
from typing import Callable, Iterator

import orjson

from specdeck.engines.core.atomic_files import write_new
from specdeck.engines.core.config import DecodeSettings
from specdeck.sessions.session import SessionError, migrate, read_document
from specdeck.sessions.sweep_file import Sweep, is_sweep, sweep_from_document

SUFFIX = ".json"
#: The example sessions of a checkout (or an editable install).
CHECKOUT_EXAMPLES = Path(__file__).resolve().parents[2] / "sessions" / "examples"


def default_sessions_dir() -> Path:
    """``$SPECDECK_SESSIONS_DIR`` when set (tests point it at a temporary directory),
    else ``sessions/`` in the working directory."""
    return Path(os.environ.get("SPECDECK_SESSIONS_DIR") or "sessions")


#: The most characters of strategy names in a session's file name.
NAMES_CHARS = 120


def session_filename(document: dict) -> str:
    """``20261129-101711_plain-draft.json`` (``_partial`` before the suffix when cut short),
    ``sweep-20261129-101711.json`` for a sweep: sorts by time, and says what ran."""
    try:
        created = datetime.fromisoformat(document["created"])
        stamp = created.strftime("%Y%m%d-%H%M%S")
    except (KeyError, TypeError, ValueError):
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    partial = "_partial" if document.get("partial") else ""
    if document.get("kind") == "sweep":
        return f"sweep-{stamp}{partial}{SUFFIX}"
    names = "-".join(document.get("strategies", {})) or "empty"
    # Only characters every file system keeps (``draft@pmin:0.6`` holds a colon), and
    # short of the 255-byte limit on a name.
    names = re.sub(r"[^A-Za-z0-9@.+-]", "_", names)[:NAMES_CHARS]
    return f"{stamp}_{names}{partial}{SUFFIX}"


def _names(base: str) -> Iterator[str]:
    """``base``, then ``base`` with -2, -3, ... before the suffix."""
    yield base
    stem = base[: -len(SUFFIX)]
    for n in count(2):
        yield f"{stem}-{n}{SUFFIX}"


def fallback_dirs() -> list[Path]:
    """Where a session goes when its folder cannot take it, in order: the user's state
    folder (``$XDG_STATE_HOME/specdeck/sessions``, else
    ``~/.local/state/specdeck/sessions``), then a private folder in the temp dir."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join("~", ".local", "state")
    dirs = [Path(state).expanduser() / "specdeck" / "sessions"]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    dirs.append(Path(tempfile.gettempdir()) / f"specdeck-sessions-{uid}")
    return dirs


def _private(directory: Path) -> Path:
    """``directory`` (in a temp dir others can write) made or checked: a real folder of
    this user's, not a link another user planted there."""
    directory.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or (hasattr(os, "getuid") and info.st_uid != os.getuid()):
        raise PermissionError(errno.EPERM, "not a folder of this user's", str(directory))
    return directory


@dataclass(frozen=True)
class SaveOutcome:
    """Where a run was saved; ``problem`` says why it is not where it was asked to go."""

    path: Path
    problem: str | None = None


class SaveFailed(OSError):
    """The session could be saved nowhere; the message says why, place by place."""


def why_not(exc: OSError) -> str:
    """What an OSError says in a one-line message ("No space left on device")."""
    if isinstance(exc, FileExistsError) and exc.filename and Path(exc.filename).is_file():
        return "a file is in the way of the folder"  # mkdir's own word is "File exists"
    return exc.strerror or str(exc) or type(exc).__name__


def session_names(document: dict) -> Iterator[str]:
    """The names a document may be saved under, in order of preference."""
    return _names(session_filename(document))


def save_session(document: dict, directory: Path | None = None) -> SaveOutcome:
    """Save a run under ``directory`` (default: ``default_sessions_dir()``) with a fresh
    name, never over another file: the name is claimed atomically, so processes saving
    in the same second get one file each. When the folder cannot take it (full disk,
    read-only, missing permission, a file in the way, a size limit) the run goes to
    ``fallback_dirs``: a finished run is never lost to a failed save. SaveFailed when
    no place took it."""
    directory = Path(directory) if directory is not None else default_sessions_dir()
    data = orjson.dumps(document)
    try:
        return SaveOutcome(write_new(directory, session_names(document), data))
    except OSError as exc:
        problem = f"cannot save in {directory} ({why_not(exc)})"
    return fall_back(lambda: session_names(document), data, problem, directory)


def fall_back(names: Callable[[], Iterator[str]], data: bytes, problem: str,
              tried: Path | None = None) -> SaveOutcome:
    """Write ``data`` under a new name (the first free one of ``names()``) in the first
    of ``fallback_dirs`` that takes it (``tried`` left out), after ``problem`` kept it
    from where it was asked to go. SaveFailed, naming every place, when none takes it."""
    reasons = [problem]
    temp = fallback_dirs()[-1]
    for place in fallback_dirs():
        if place == tried:
            continue
        try:
            return SaveOutcome(write_new(_private(place) if place == temp else place,
                                         names(), data), problem)
        except OSError as exc:
            reasons.append(f"nor in {place} ({why_not(exc)})")
    raise SaveFailed("; ".join(reasons))



@dataclass
class SessionSummary:
    """What a browser shows before opening a file: read from the document's header and
    saved statistics, without rebuilding its events."""

    path: Path
    size_bytes: int
    created: str | None = None
    partial: bool = False
    prompt: str | None = None
    target: str | None = None
    draft: str | None = None
    #: Per strategy: ``generated_tokens``, ``tokens_per_s``, ``acceptance_rate``,
    #: ``speedup_vs_plain`` and ``finish_reason`` as saved (missing ones left out).
    strategies: dict[str, dict] = field(default_factory=dict)
    #: Why the file cannot be opened, or None when it looks like a readable session.
    problem: str | None = None
    #: The settings the run recorded (k, MTP depth, n...), None when it lacks them.
    settings: DecodeSettings | None = None
    #: A sweep file (``specdeck sweep``'s), loaded: the browser opens it in the sweep
    #: view; None for a session.
    sweep: Sweep | None = None

    @property
    def name(self) -> str:
        return self.path.stem


_PREVIEW_STATS = ("generated_tokens", "tokens_per_s", "acceptance_rate",
                  "speedup_vs_plain", "finish_reason")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def summarize_session(path: Path) -> SessionSummary:
    """A short summary of one file; an unreadable file gets ``problem`` instead of raising."""
    path = Path(path)
    try:
        summary = SessionSummary(path=path, size_bytes=path.stat().st_size)
        document = read_document(path)
        if is_sweep(document):
            summary.sweep = sweep_from_document(document, path)
            summary.created, summary.partial = summary.sweep.created, summary.sweep.partial
            return summary
        document = migrate(document)
    except SessionError as exc:
        summary.problem = str(exc)
        return summary
    except OSError as exc:
        return SessionSummary(path=path, size_bytes=0, problem=f"cannot read it ({exc})")
    config = document["config"] if isinstance(document.get("config"), dict) else {}
    summary.created = _text(document.get("created"))
    summary.partial = document.get("partial") is True
    summary.prompt = _text(config.get("prompt"))
    summary.settings = DecodeSettings.from_dict(config.get("settings"))
    for role in ("target", "draft"):
        model = config.get(role)
        if isinstance(model, dict):
            setattr(summary, role, _text(model.get("source")))
    strategies = document["strategies"]
    if not isinstance(strategies, dict):
        summary.problem = "strategies must be an object"
        return summary
    for name, entry in strategies.items():
        stats = entry.get("stats") if isinstance(entry, dict) else None
        stats = stats if isinstance(stats, dict) else {}
        summary.strategies[name] = {k: stats[k] for k in _PREVIEW_STATS if k in stats}
    return summary


def examples_dir(directory: Path | None = None) -> Path | None:
    """Example sessions to list beside ``directory``'s own: its ``examples`` folder, else
    the checkout's ``sessions/examples`` (the runs the README describes), else None."""
    directory = Path(directory) if directory is not None else default_sessions_dir()
    return next((d for d in (directory / "examples", CHECKOUT_EXAMPLES) if d.is_dir()), None)


def list_sessions(directory: Path | None = None) -> list[SessionSummary]:
    """Every ``*.json`` file directly in ``directory`` (default: ``default_sessions_dir()``),
    sessions and sweeps, newest first; none if it is missing."""
    directory = Path(directory) if directory is not None else default_sessions_dir()
    if not directory.is_dir():
        return []
    paths = [p for p in directory.iterdir()
             if p.suffix == SUFFIX and not p.name.startswith(".") and p.is_file()]
    summaries = [summarize_session(p) for p in paths]
    summaries.sort(key=lambda s: (s.created or "", s.path.name), reverse=True)
    return summaries


def _check_session_file(path: Path) -> Path:
    path = Path(path)
    if path.suffix != SUFFIX:
        raise SessionError(f"{path}: not a session file (expected a {SUFFIX} file)")
    if not path.is_file():
        raise SessionError(f"{path}: no such file")
    return path


def delete_session(path: Path) -> None:
    """Remove one session file."""
    path = _check_session_file(path)
    try:
        path.unlink()
    except OSError as exc:
        raise SessionError(f"{path}: cannot delete it ({exc.strerror or exc})") from None


def rename_session(path: Path, new_name: str) -> Path:
    """Give a session file a new name in the same directory; returns the new path.

    ``new_name`` is a plain file name (``.json`` is added when missing); an existing file
    is never replaced.
    """
    path = _check_session_file(path)
    name = new_name.strip()
    if not name or name.startswith(".") or os.sep in name or (os.altsep and os.altsep in name):
        raise SessionError(
            f"{new_name!r} is not a usable name: use a plain file name without '/' "
            "that does not start with '.'"
        )
    if not name.endswith(SUFFIX):
        name += SUFFIX
    target = path.with_name(name)
    taken = SessionError(f"{target}: already exists; choose another name")
    try:
        try:
            # A hard link is made only where nothing is: a file that appears under the
            # new name between a check and a rename would be replaced by ``os.rename``.
            os.link(path, target)
        except OSError as exc:
            if exc.errno not in NO_HARD_LINKS:
                raise
            # No hard links on this file system (FAT, some network shares): check, then
            # rename; a file that appears in between is replaced, nothing better is
            # portable there.
            if target.exists():
                raise taken from None
            os.rename(path, target)
        else:
            os.unlink(path)
    except FileExistsError:
        raise taken from None
    except OSError as exc:
        raise SessionError(f"cannot rename {path} to {name} ({exc.strerror or exc})") from None
    return target


#: ``os.link`` errors of file systems without hard links.
NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS}
