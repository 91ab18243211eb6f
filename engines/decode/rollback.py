"""Exact cache rewind for every cache kind mlx-lm makes.

Speculation feeds tokens that may be rejected, then must put the cache back as if they
had never been seen. mlx-lm only trims, all or nothing, and refuses caches that cannot
trim. Here each layer is handled by what it is:

- ``KVCache``, ``QuantizedKVCache``, ``ChunkedKVCache`` (and a ``RotatingKVCache`` whose
  window has not wrapped) trim the rejected positions: free.
- ``ArraysCache`` (gated delta net, mamba and other recurrent layers) and a wrapped
  ``RotatingKVCache`` cannot forget a token, so a checkpoint taken before the forward pass
  holds their state and rewinding restores it. ``ArraysCache`` layers replace their
  arrays rather than write into them, so holding them costs no copy; a rotating window
  is written in place, so its checkpoint takes a lazy copy (only made if written).

A checkpoint taken before a pass of several tokens rewinds only to its own position; a
caller that wants to keep some of those tokens replays them (``Rewind.REPLAY``). A caller
that checkpoints before every single-token step (the draft loop) never replays.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Sequence

import mlx.core as mx
from mlx.utils import tree_map
from mlx_lm.models.cache import CacheList, RotatingKVCache


class Rewind(enum.Enum):
    NONE = "none"
    TRIM = "trim"
    REPLAY = "replay"
    #: Recurrent layers set from per-position states of the pass (``engines.capture``).
    CAPTURED = "captured"


def _trims_exactly(layer: Any, upcoming: int) -> bool:
    """Whether this layer will still trim exactly after ``upcoming`` more tokens."""
    if isinstance(layer, RotatingKVCache):
        return layer.offset + upcoming < layer.max_size
    if isinstance(layer, CacheList):
        return all(_trims_exactly(c, upcoming) for c in layer.caches)
    return bool(layer.is_trimmable())


def _copy_state(state: Any) -> Any:
    # A new array node per leaf: an in-place write to the layer later rebinds the layer's
    # array, not ours. Lists are rebuilt, so replacing an entry does not reach us either.
    return tree_map(lambda a: a[...] if isinstance(a, mx.array) else a, state)


@dataclass(slots=True)
class Checkpoint:
    """A cache's position before a forward pass of ``upcoming`` tokens."""

    upcoming: int
    #: Per layer: the saved state for layers that cannot trim, None for those that can.
    saved: list[Any]

    @property
    def trims_only(self) -> bool:
        return all(s is None for s in self.saved)


def checkpoint(cache: Sequence[Any], upcoming: int) -> Checkpoint:
    """Remember where ``cache`` is before feeding it ``upcoming`` tokens."""
    saved = [
        None if _trims_exactly(layer, upcoming) else _copy_state(layer.state)
        for layer in cache
    ]
    return Checkpoint(upcoming, saved)


def restore(cache: Sequence[Any], point: Checkpoint, discard: int) -> None:
    """Put every layer back ``discard`` tokens, using saved states where needed.

    For saved layers the state goes back to the checkpoint itself, so ``discard`` must
    equal everything fed since it (the draft loop checkpoints before every step).
    """
    for layer, saved in zip(cache, point.saved):
        if saved is None:
            if discard:
                layer.trim(discard)
        else:
            layer.state = _copy_state(saved)


def rewind(cache: Sequence[Any], point: Checkpoint, keep: int) -> Rewind:
    """Undo all but the first ``keep`` of the ``point.upcoming`` tokens fed since ``point``.

    Returns ``REPLAY`` when the cache went back to the checkpoint itself and the caller
    must feed the ``keep`` tokens again to rebuild recurrent state.
    """
    discard = point.upcoming - keep
    if discard == 0:
        return Rewind.NONE
    if point.trims_only:
        for layer in cache:
            layer.trim(discard)
        return Rewind.TRIM
    restore(cache, point, point.upcoming)
    return Rewind.REPLAY if keep else Rewind.TRIM
