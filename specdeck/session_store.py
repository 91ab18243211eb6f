"""The sessions directory: where every run is saved, and what the session browser lists,
renames and deletes. Pure file operations; the app and the CLI put faces on them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from specdeck.session import (
    SessionError, migrate, parse_document, result_document, save_document,
)

SUFFIX = ".json"


def default_sessions_dir() -> Path:
    """``$SPECDECK_SESSIONS_DIR`` when set (tests point it at a temporary directory),
    else ``sessions/`` in the working directory."""
    return Path(os.environ.get("SPECDECK_SESSIONS_DIR") or "sessions")


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
    return f"{stamp}_{names}{partial}{SUFFIX}"


def autosave(document: dict, directory: Path | None = None) -> Path:
    """Save a run or a sweep under ``directory`` (default: ``default_sessions_dir()``) with
    a fresh name, never over another file."""
    directory = Path(directory) if directory is not None else default_sessions_dir()
    base = session_filename(document)
    path = directory / base
    n = 2
    while path.exists():
        path = directory / f"{base[: -len(SUFFIX)]}-{n}{SUFFIX}"
        n += 1
    save_document(path, document)
    return path


def save_result(result: Any, directory: Path | None = None) -> tuple[Path, dict]:
    """Save a measured (or cancelled: partial) comparison as a session, as ``specdeck
    compare`` and the app's engine process both do; returns where, and the document."""
    document = result_document(result)
    return autosave(document, directory), document


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
        document = migrate(parse_document(path.read_bytes(), str(path)))
    except SessionError as exc:
        summary.problem = str(exc)
        return summary
    except OSError as exc:
        return SessionSummary(path=path, size_bytes=0, problem=f"cannot read it ({exc})")
    config = document["config"] if isinstance(document.get("config"), dict) else {}
    summary.created = _text(document.get("created"))
    summary.partial = document.get("partial") is True
    summary.prompt = _text(config.get("prompt"))
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


def list_sessions(directory: Path | None = None) -> list[SessionSummary]:
    """Every ``*.json`` file directly in ``directory`` (default: ``default_sessions_dir()``),
    newest first; none if it is missing."""
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
    if target.exists():
        raise SessionError(f"{target}: already exists; choose another name")
    try:
        os.rename(path, target)
    except OSError as exc:
        raise SessionError(f"cannot rename {path} to {name} ({exc.strerror or exc})") from None
    return target
