"""A hostile corpus: strings that break terminal apps when shown as they come, and
sessions, sweeps and file names built from them (``tests/test_hostile.py`` feeds them to
every printer and every screen).

Terminal escapes (OSC 52 writes the clipboard, OSC 0 the title, OSC 8 makes links,
``ESC [2J`` wipes the screen, a C1 CSI), Rich and Textual markup (``[@click=...]`` runs an
action, ``[/]`` and a model's ``[/INST]`` raise ``MarkupError``, ``[link=...]``, ``$var``),
HTML that would run in a page were it parsed (``</script>`` closing a script block,
``<img onerror>``, a ``javascript:`` URL, the line separators JSON allows and old
JavaScript did not), NUL and friends, long lines, and strategy names that are not
identifiers.
"""

from __future__ import annotations

from hypothesis import strategies as st

from specdeck.engines.core.events import Done, Trace

from helpers.sessions import document, make_trace, plain_trace


OSC52 = "\x1b]52;c;cHduZWQ=\x07"
OSC0 = "\x1b]0;pwned-title\x07"
OSC8 = "\x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\"
CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b2J"
QUIT = "[@click=app.quit]quit[/]"


def screenshot_click(directory: str) -> str:
    """Markup that, parsed, writes ``victim.svg`` into ``directory`` when clicked."""
    return f"[@click=app.screenshot('victim.svg','{directory}')]details[/]"


#: Escape sequences and control characters a terminal acts on.
ESCAPES = [OSC52, OSC0, OSC8, CLEAR, C1_CSI, "\x1b[31mred\x1b[0m", "\x1bc", "\x07",
           "\x00", "\x08\x08", "\r", "\x7f", "\x1b[?1049h", "\x1bP+q\x1b\\"]
#: Markup of Rich and Textual, and text that looks like it (ordinary model output).
MARKUP = [QUIT, "[/]", " [/INST]", "[INST]", "[bold]b[/bold]", "[link=https://evil]x[/link]",
          "[on red]", "[/i]", "\\[x]", "[$accent]a[/]", "$text", "[b", "]", "[@click=]x[/]",
          "[red", "[[/]]"]
#: HTML and script, for pages that show data (``specdeck export --html``).
HTML = ["</script><script>alert('script')</script>", "<img src=x onerror=alert('img')>",
        "<a href=\"javascript:alert('link')\">link</a>", "javascript:alert('url')",
        "<!--", "<style>*{display:none}</style>", "&lt;b&gt;", "\u2028\u2029",
        "<svg onload=alert('svg')>", "<iframe src=https://evil.example/>"]
#: Characters that reorder or hide text: bidi overrides and isolates, zero-width
#: characters, a byte-order mark, a tag character (invisible "ASCII smuggling").
INVISIBLE = ["\u202etxt", "\u2066a\u2069", "\u2067", "\u2068", "\u200b", "\u200d",
             "\ufeff", "\u200e", "\u061c", "\U000e0041", "\u2028"]
#: Other odd text: wide, combining, long without spaces.
ODD = ["日本語", "e\u0301", "🙂", "x" * 3000, " ", "", "\t", "\n\n"]

FRAGMENTS = ESCAPES + MARKUP + HTML + INVISIBLE + ODD

#: Strategy names the schema allows that are not identifiers.
STRATEGY_NAMES = ["my draft", "draft.v2", "dräft", "#x", "1st", "-", "a" * 200,
                  "pane-plain", QUIT, OSC0 + "n", "[/]"]


def hostile_text() -> st.SearchStrategy[str]:
    """Strings built from the corpus and random characters (any code point)."""
    piece = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12))
    return st.lists(piece, min_size=1, max_size=5).map("".join)


def every_fragment() -> str:
    return "".join(FRAGMENTS[:-2])  # without the newlines: one line holds them all


def hostile_traces(text: str, names: list[str]) -> dict[str, Trace]:
    """Runs named ``names`` whose pieces, rejected drafts and errors are ``text``: the
    first plain, the others drafting (one rejection per round), the last failing."""
    traces: dict[str, Trace] = {}
    for i, name in enumerate(names):
        if i == 0:
            trace = plain_trace(name, [1, 2, 3, 4])
        else:
            trace = make_trace(name, [([1, 9], 1, 2), ([3, 8], 2, 4)])
        for event in trace.rounds:
            event.pieces = [text + p for p in event.pieces]
            event.rejected_pieces = [text for _ in event.rejected_pieces]
        done = trace.done
        trace.events[-1] = Done(
            "error" if i == len(names) - 1 else done.reason, done.generated_tokens,
            done.seconds, done.peak_memory_bytes,
            error=text if i == len(names) - 1 else None, tail=text,
        )
        traces[name] = trace
    return traces


def hostile_document(text: str, names: list[str] | None = None) -> dict:
    """A valid session whose every string a person sees is ``text`` (or holds it)."""
    doc = document(hostile_traces(text, names or ["plain", "draft"]))
    doc["created"] = text
    doc["config"]["prompt"] = text
    doc["config"]["target"]["source"] = text
    doc["config"]["draft"]["source"] = text
    doc["machine"]["chip"] = text
    doc["machine"]["os"] = text
    return doc


def hostile_sweep(text: str) -> dict:
    """A valid sweep whose prompt names, labels, why lines and recommendations hold
    ``text``."""
    def cell(strategy: str, label: str, speedup: float) -> dict:
        return {
            "prompt": text + "p", "kind": text, "strategy": strategy, "label": text + label,
            "temperature": 0.0, "k": 2 if strategy == "draft" else None, "depth": None,
            "n": None, "median_tokens_per_s": 100.0 * speedup, "speedup": speedup,
            "cv": 0.01, "noisy": False, "acceptance_rate": 0.5, "mean_accepted": 1.2,
            "predicted_speedup": 1.1, "memory_over_plain_bytes": 2**20, "correct": True,
            "why": text,
        }

    return {
        "schema_version": 1, "kind": "sweep", "created": text, "partial": False,
        "config": {"prompts": [{"name": text}]}, "machine": {"chip": text, "os": text},
        "cells": [cell("plain", "plain", 1.0), cell("draft", "k=2", 1.3)],
        "recommendations": [text, text + " again"],
    }
