"""Prompts: the built-in ones, and the one reader of what ``--prompt`` takes.

Each built-in prompt, one per kind of workload speculation behaves differently on, is a
small text file in this folder: a ``name:`` line, a ``description:`` line, a ``---``
line, then the prompt text. Plain text rather than TOML so that Python 3.10 (no
``tomllib``) reads them without another dependency.

``read_prompts`` reads prompts the way every command does: text, a prompt file (this
format, or any text file as a whole), a folder of them, a JSONL file of your own
workload, or a built-in prompt by its key. ``specdeck compare`` takes one prompt,
``specdeck sweep`` several.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from specdeck.engines.core.errors import UserError
from specdeck.engines.core.files import UnreadableFile, read_text
from specdeck.engines.core.formatting import byte_size

PROMPTS_DIR = Path(__file__).resolve().parent

#: The prompt the playground opens on.
DEFAULT_PROMPT = "code"
#: Endings that make a ``--prompt`` value a file name (see ``looks_like_path``).
PROMPT_FILE_ENDINGS = (".txt", ".md", ".json", ".jsonl")

_SEPARATOR = "---"
#: The longest prompt read: about a million tokens of text, more than any model here
#: reads. A larger file is refused by its size, before it is read or tokenized (a 50 MB
#: one took 7 minutes and 5 GB to be refused for its length).
PROMPT_BYTES = 4 * 2**20
#: The largest JSONL file of prompts (many prompts, each within ``PROMPT_BYTES``).
JSONL_BYTES = 64 * 2**20


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt; ``key`` names it (a file's name without the extension)."""

    key: str
    name: str
    description: str
    text: str
    #: The workload it stands for, grouping prompts in a sweep's advice (code, prose...).
    kind: str = ""


def parse_prompt(key: str, content: str) -> Prompt:
    """Read one prompt file's content; raise ValueError naming what is missing."""
    header, sep, body = content.partition(f"\n{_SEPARATOR}\n")
    if not sep:
        raise ValueError(f"prompt {key!r} has no '{_SEPARATOR}' line before its text")
    fields = {}
    for line in header.splitlines():
        name, colon, value = line.partition(":")
        if colon:
            fields[name.strip().lower()] = value.strip()
    missing = [f for f in ("name", "description") if not fields.get(f)]
    if missing:
        raise ValueError(f"prompt {key!r} has no {missing[0]!r} line")
    text = body.rstrip("\n")
    if not text.strip():
        raise ValueError(f"prompt {key!r} has no text")
    return Prompt(key, fields["name"], fields["description"], text, key)


def _prompt_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.txt"))


def load_prompts(folder: Path = PROMPTS_DIR) -> dict[str, Prompt]:
    """Every prompt in ``folder``, by key, in file-name order; each must be in this
    folder's format (ValueError names the one that is not)."""
    return {path.stem: parse_prompt(path.stem, path.read_text(encoding="utf-8"))
            for path in _prompt_files(folder)}


def get_prompt(key: str = DEFAULT_PROMPT) -> Prompt:
    """A built-in prompt by key; KeyError names the ones that exist."""
    prompts = load_prompts()
    if key not in prompts:
        raise KeyError(f"no built-in prompt {key!r} (choose from {', '.join(prompts)})")
    return prompts[key]


def _read(path: Path, limit: int = PROMPT_BYTES) -> str:
    """A prompt file's text, read bounded (a FIFO, /dev/zero or a file over ``limit``
    ends in one line)."""
    try:
        return read_text(path, limit)
    except (OSError, UnicodeDecodeError, UnreadableFile) as exc:
        raise UserError(f"cannot read the prompt file {path}: {exc}") from exc


def read_prompt_file(path: Path) -> Prompt:
    """A prompt file: its text after ``---`` when it is in this folder's format, else
    the whole file (any text file can be a prompt)."""
    content = _read(path)
    try:
        return parse_prompt(path.stem, content)
    except ValueError:
        return Prompt(path.stem, path.stem, "", content, path.stem)


def _jsonl_prompts(path: Path) -> list[Prompt]:
    """One ``{"prompt": ..., "name"?: ..., "kind"?: ...}`` per line; blank lines skipped."""
    prompts = []
    for number, line in enumerate(_read(path, JSONL_BYTES).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
            row = None
        if type(row) is not dict:
            row = {}
        text, name, kind = row.get("prompt"), row.get("name") or f"p{number}", row.get("kind", "")
        if not isinstance(text, str) or not text or not isinstance(name, str) or (
                not isinstance(kind, str)):
            raise UserError(f"{path} line {number}: expected {{\"prompt\": \"...\"}} "
                            "(with \"name\" and \"kind\" strings, if any)")
        if len(text) > PROMPT_BYTES:  # characters: at least as many bytes
            raise UserError(f"{path} line {number}: the prompt is longer than the "
                            f"{byte_size(PROMPT_BYTES)} a prompt may be")
        prompts.append(Prompt(name, name, "", text, kind))
    return prompts


def _existing(value: str) -> Path | None:
    """``value`` as the path of a file or folder, or None when it names none (it is
    then prompt text: a long text is no file name)."""
    path = Path(value).expanduser()
    try:
        return path if len(value) < 4096 and path.exists() else None
    except (OSError, ValueError):
        return None


def looks_like_path(value: str) -> bool:
    """``value`` reads as a file name rather than prompt text: no spaces, and a prompt
    file's ending or a path separator."""
    if not value or any(ch.isspace() for ch in value):
        return False
    separators = [sep for sep in (os.sep, os.altsep) if sep]
    return value.lower().endswith(PROMPT_FILE_ENDINGS) or any(s in value for s in separators)


def read_prompts(value: str) -> list[Prompt]:
    """What ``--prompt`` takes: a folder of prompt files (``*.txt``), a JSONL file, a
    prompt file, a built-in prompt's key (``chat_explain``: a file of that name comes
    first), or else the text itself (but a missing file is an error, never text)."""
    path = _existing(value)
    if path is None and looks_like_path(value):
        raise UserError(f"no prompt file {value} (a prompt with no spaces that looks like "
                        "a path is taken for one: check the path, or put the text in a file)")
    if path is None:
        builtin = load_prompts().get(value)
        return [builtin or Prompt("prompt", "prompt", "", value, "prompt")]
    if path.is_dir():
        files = _prompt_files(path)
        if not files:
            raise UserError(f"{value} holds no prompt files (*.txt)")
        return [read_prompt_file(f) for f in files]
    if path.suffix == ".jsonl":
        return _jsonl_prompts(path)
    return [read_prompt_file(path)]


def read_prompt(value: str) -> str:
    """One prompt's text, from what ``--prompt`` takes (a folder or JSONL file must hold
    exactly one prompt)."""
    prompts = read_prompts(value)
    if len(prompts) != 1:
        raise UserError(f"{value} holds {len(prompts)} prompts; a comparison runs one "
                        "(specdeck sweep runs several)")
    return prompts[0].text
