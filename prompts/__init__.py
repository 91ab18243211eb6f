"""Built-in prompts, one per kind of workload speculation behaves differently on.

Each prompt is a small text file in this folder: a ``name:`` line, a ``description:``
line, a ``---`` line, then the prompt text. Plain text rather than TOML so that
Python 3.10 (no ``tomllib``) reads them without another dependency.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent

#: The prompt the playground opens on.
DEFAULT_PROMPT = "code"

_SEPARATOR = "---"


@dataclass(frozen=True, slots=True)
class Prompt:
    """One built-in prompt; ``key`` is its file name without the extension."""

    key: str
    name: str
    description: str
    text: str


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
    return Prompt(key, fields["name"], fields["description"], text)


def text_of(key: str, content: str) -> str:
    """A prompt file's text: the part after ``---`` for a file in this folder's format,
    else the whole content (any text file can be a prompt)."""
    try:
        return parse_prompt(key, content).text
    except ValueError:
        return content


def load_prompts(folder: Path = PROMPTS_DIR) -> dict[str, Prompt]:
    """Every prompt in ``folder``, by key, in file-name order."""
    prompts = {}
    for path in sorted(folder.glob("*.txt")):
        prompts[path.stem] = parse_prompt(path.stem, path.read_text(encoding="utf-8"))
    return prompts


def get_prompt(key: str = DEFAULT_PROMPT) -> Prompt:
    """A built-in prompt by key; KeyError names the ones that exist."""
    prompts = load_prompts()
    if key not in prompts:
        raise KeyError(f"no built-in prompt {key!r} (choose from {', '.join(prompts)})")
    return prompts[key]
