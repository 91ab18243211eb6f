"""The file in which a draft folder lists the tokens it drafts from (``engines.draft_vocab``).

Read without mlx, so the catalog can count the listed tokens (the rows a loaded draft
copies out of its output layer) without loading anything. The file is data from a model
folder, so it is checked before use: a JSON object whose ``tokens`` are distinct integers
inside the draft's vocabulary, in a bounded file.
"""

from __future__ import annotations

from pathlib import Path

from specdeck.engines.core.errors import ModelError
from specdeck.engines.core.files import UnreadableFile, read_regular

DRAFT_VOCAB_FILE = "specdeck-draft-vocab.json"
#: A list of every id of a 256k vocabulary fits well within this.
MAX_VOCAB_BYTES = 4 * 2**20


def read_listed_tokens(folder: Path, vocab_size: int) -> list[int] | None:
    """The token ids ``folder``'s ``DRAFT_VOCAB_FILE`` lists (sorted), None without one;
    ModelError naming the file and the fix when it is not a valid list."""
    import orjson

    path = folder / DRAFT_VOCAB_FILE
    if not path.exists():
        return None
    fix = f"(delete it to draft from the whole vocabulary of {vocab_size:,} tokens)"
    try:
        data = orjson.loads(read_regular(path, MAX_VOCAB_BYTES))
    except (OSError, UnreadableFile, orjson.JSONDecodeError) as exc:
        raise ModelError(f"cannot read the draft vocabulary {path}: {exc} {fix}") from exc
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, list) or not tokens:
        raise ModelError(f"the draft vocabulary {path} has no list of tokens {fix}")
    if not all(type(t) is int and 0 <= t < vocab_size for t in tokens):
        raise ModelError(f"the draft vocabulary {path} lists something other than token ids "
                         f"0..{vocab_size - 1} {fix}")
    if len(set(tokens)) != len(tokens):
        raise ModelError(f"the draft vocabulary {path} lists a token twice {fix}")
    return sorted(tokens)
