"""Long text stays fast: a 2 MB piece without a space wraps in linear time (the app answers
``q`` at once), and ``diff`` of two 20,000-token sessions is near-linear, bounded, and the
same as difflib's where difflib is quick."""

from __future__ import annotations

import random
import time
from difflib import SequenceMatcher

import pytest

from helpers.sessions import plain_trace, session
from specdeck.sessions.diff import diff_sessions, token_opcodes
from specdeck.tui.app import SpecdeckApp
from specdeck.tui.sources import ReplaySource
from specdeck.tui.token_view import TokenView
from specdeck.testing.pilot import run_async

SIZE = (120, 40)


def with_a_huge_piece(text: str):
    """A replay of two runs: plain's second token is ``text``; draft's is not."""
    plain, draft = plain_trace("plain", [1, 2, 3]), plain_trace("draft", [1, 4, 3])
    plain.rounds[1].pieces = [text]
    return {"plain": plain, "draft": draft}


@pytest.mark.parametrize("text", ["x" * 2_000_000, "é日" * 400_000])
def test_wrapping_a_2_mb_piece_is_linear(text) -> None:
    view = TokenView()
    view._wrap_width = 80
    started = time.perf_counter()
    view.append([(text, "target"), (" tail", "accepted")])
    elapsed = time.perf_counter() - started
    lines = view.lines()
    assert "".join(lines) == text + " tail"
    assert all(len(line) <= 80 for line in lines)  # cells: at most 80 (wide: 2 a char)
    assert elapsed < 3.0, f"{elapsed:.1f} s to wrap 2 MB"


@run_async
async def test_the_app_shows_a_2_mb_piece_and_quits_at_once():
    app = SpecdeckApp(ReplaySource(with_a_huge_piece("y" * 2_000_000)), wall_clock=lambda: 0.0)
    started = time.perf_counter()
    async with app.run_test(size=SIZE) as pilot:
        app.seek_race(1e9)
        await pilot.pause()
        assert app.pane("plain").complete
        await pilot.press("i")  # the inspector shows the piece cut short
        app.pane("draft").focus()
        await pilot.press("d")  # and so does the diff of the two panes
        await pilot.pause()
        assert type(app.screen).__name__ == "DiffScreen"
        await pilot.press("escape", "q")
        await pilot.pause()
        assert app._exit
    assert time.perf_counter() - started < 20.0


# --- diff -----------------------------------------------------------------------------------


def apply(a: list[int], b: list[int], opcodes) -> list[int]:
    """``a`` turned into ``b`` by the non-equal opcodes."""
    out, at = [], 0
    for op, i1, i2, j1, j2 in opcodes:
        assert i1 >= at
        out += a[at:i1]
        if op != "equal":
            out += b[j1:j2]
        else:
            out += a[i1:i2]
        at = i2
    return out + a[at:]


def mutate(rng: random.Random, tokens: list[int], edits: int, vocab: int) -> list[int]:
    out = list(tokens)
    for _ in range(edits):
        i = rng.randrange(len(out) + 1)
        kind = rng.random()
        if kind < 0.4 and out:
            out[min(i, len(out) - 1)] = rng.randrange(vocab)
        elif kind < 0.7:
            out.insert(i, rng.randrange(vocab))
        elif out:
            del out[min(i, len(out) - 1)]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_small_diffs_are_difflibs(seed) -> None:
    rng = random.Random(seed)
    vocab = rng.choice([3, 10, 50])
    a = [rng.randrange(vocab) for _ in range(rng.randrange(0, 300))]
    b = mutate(rng, a, rng.randrange(0, 20), vocab)
    expected = [op for op in SequenceMatcher(None, a, b, autojunk=False).get_opcodes()]
    assert token_opcodes(a, b) == expected


@pytest.mark.parametrize("seed", range(6))
def test_large_diffs_are_valid_and_near_linear(seed) -> None:
    rng = random.Random(seed)
    a = [rng.randrange(2048) for _ in range(20_000)]
    b = mutate(rng, a, 300, 2048) if seed % 2 else [rng.randrange(2048) for _ in range(20_000)]
    started = time.perf_counter()
    ops = token_opcodes(a, b)
    elapsed = time.perf_counter() - started
    assert apply(a, b, ops) == b
    assert elapsed < 5.0, f"{elapsed:.1f} s for 20,000 tokens"
    if seed % 2:  # few edits: found as few, not one big replacement
        changed = sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in ops if op != "equal")
        assert changed < 2000


def test_diff_of_two_20000_token_sessions(capsys) -> None:
    rng = random.Random(7)
    a_tokens = [rng.randrange(2048) for _ in range(20_000)]
    b_tokens = [rng.randrange(2048) for _ in range(20_000)]
    a = session({"plain": plain_trace("plain", a_tokens)})
    b = session({"plain": plain_trace("plain", b_tokens)})
    started = time.perf_counter()
    report = diff_sessions(a, b)
    assert time.perf_counter() - started < 10.0
    (pane,) = report.panes
    assert pane.first_divergence == 0 and pane.edits
    assert isinstance(pane.edits[0].a_text, str)
