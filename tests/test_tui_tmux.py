"""Smoke test of the real app in a real terminal: tmux runs ``specdeck compare`` on the
tiny models, keys are sent, and the captured screen (with its colour codes) must show
styled tokens in every pane. Skipped where tmux is not installed.

Run alone: ``python -m pytest tests/test_tui_tmux.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from typing import Callable

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

ANSI = re.compile(r"\x1b\[[0-9;:]*[A-Za-z]")
#: The left edge of the focused field: the border in the default theme's accent colour.
FOCUSED_FIELD = "\x1b[7m\x1b[38;2;1;120;212m▊"
SGR = re.compile(r"\x1b\[([0-9;]*)m")
#: SGR attributes that mark token kinds (see tui/app.tcss).
UNDERLINE, STRIKE = 4, 9  # accepted, rejected


def attributes(line: str) -> set[int]:
    """The SGR attributes a captured line switches on (colour arguments skipped)."""
    found = set()
    for match in SGR.finditer(line):
        params = [int(p) for p in match.group(1).split(";") if p]
        i = 0
        while i < len(params):
            if params[i] in (38, 48):  # 38;2;r;g;b or 38;5;n
                i += 5 if i + 1 < len(params) and params[i + 1] == 2 else 3
                continue
            found.add(params[i])
            i += 1
    return found


class Terminal:
    """One detached tmux session running a command, on a tmux server of its own (so a
    server the user or another test started, with its own size options, cannot resize
    it) and pinned to ``width`` x ``height``."""

    def __init__(self, command: list[str], width: int, height: int) -> None:
        self.name = f"specdeck-smoke-{uuid.uuid4().hex[:8]}"
        self.tmux = ["tmux", "-L", self.name, "-f", os.devnull]
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        # COLUMNS / LINES (set in pytest-xdist's workers) would override the terminal's
        # real size for the app (shutil.get_terminal_size reads them first).
        for name in ("PYTEST_CURRENT_TEST", "TMUX", "COLUMNS", "LINES"):
            env.pop(name, None)
        subprocess.run(
            [*self.tmux, "new-session", "-d", "-s", self.name, "-x", str(width),
             "-y", str(height), " ".join(f"'{part}'" for part in command)],
            check=True, env=env,
        )
        self.run("set-option", "-t", self.name, "window-size", "manual")
        self.run("resize-window", "-t", self.name, "-x", str(width), "-y", str(height))
        size = self.run("display", "-p", "-t", self.name, "#{window_width}x#{window_height}")
        assert size.strip() == f"{width}x{height}", f"tmux gave {size.strip()}"

    def run(self, *args: str) -> str:
        """One tmux command against this terminal's server; its stdout."""
        return subprocess.run([*self.tmux, *args], capture_output=True, text=True).stdout

    def capture(self, colours: bool = False) -> str:
        return self.run("capture-pane", "-p", "-t", self.name, *(["-e"] if colours else []))

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def press(self, key: str) -> None:
        """Send ``key``, then wait until the screen changes: the app took it before the
        next key is sent (on a screen with no blinking cursor)."""
        before = self.capture(colours=True)
        self.keys(key)
        self.wait_until(lambda screen: screen != before, f"{key} changed nothing")

    def focused_row(self) -> int | None:
        """The top row of the focused field (None while a button has the focus)."""
        lines = self.capture(colours=True).splitlines()
        return next((i for i, line in enumerate(lines) if FOCUSED_FIELD in line), None)

    def tab(self) -> None:
        """Tab, and wait until the focus has moved (a loaded machine lags behind keys)."""
        before = self.focused_row()
        self.keys("Tab")
        deadline = time.monotonic() + 30
        while self.focused_row() == before:
            assert time.monotonic() < deadline, f"tab left the focus on row {before}"
            time.sleep(0.05)

    def wait_for(self, text: str, timeout: float = 120.0) -> str:
        return self.wait_for_any((text,), timeout)

    def wait_for_any(self, texts: tuple[str, ...], timeout: float = 120.0) -> str:
        """The screen once one of ``texts`` is on it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.capture()
            if any(text in screen for text in texts):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"none of {texts!r} appeared; the screen:\n{self.capture()}")

    def wait_until(self, shown: Callable[[str], bool], failure: str,
                   timeout: float = 30.0) -> None:
        """Poll the coloured screen until ``shown`` holds."""
        deadline = time.monotonic() + timeout
        while not shown(self.capture(colours=True)):
            if time.monotonic() > deadline:
                raise AssertionError(f"{failure}; the screen:\n{self.capture()}")
            time.sleep(0.1)

    def alive(self) -> bool:
        return subprocess.run([*self.tmux, "has-session", "-t", self.name],
                              capture_output=True).returncode == 0

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True, check=False)


def test_specdeck_in_tmux_shows_styled_tokens_in_every_pane(tiny_family):
    command = [
        sys.executable, "-m", "specdeck", "compare",
        "--target", str(tiny_family["llama_target"]), "--draft", str(tiny_family["llama_draft"]),
        "--strategies", "plain,draft", "--prompt", "def add(a, b):", "--max-tokens", "60",
        "--ignore-eos",
    ]
    # 70 columns: two panes side by side would be narrower than 40 columns each, so
    # they stack and each one owns a band of screen rows.
    term = Terminal(command, width=70, height=50)
    try:
        term.wait_for("measured one after another")
        term.keys("g")  # race
        term.wait_for("race finished")
        screen = term.capture(colours=True).splitlines()
        plain_rows = [i for i, line in enumerate(screen) if "plain" in ANSI.sub("", line)]
        draft_rows = [i for i, line in enumerate(screen) if "draft k=2" in ANSI.sub("", line)]
        assert plain_rows and draft_rows, "\n".join(screen)
        top, middle = plain_rows[0], draft_rows[0]
        plain_band, draft_band = screen[top + 1 : middle - 4], screen[middle + 1 :]
        # The plain pane shows its tokens; the draft pane marks accepted and rejected ones.
        assert sum(len(ANSI.sub("", line).strip("│ ")) for line in plain_band) > 20
        assert any(UNDERLINE in attributes(line) for line in draft_band), "no accepted drafts"
        assert any(STRIKE in attributes(line) for line in draft_band), "no rejected drafts"
        term.keys("x")  # hide rejected drafts
        term.wait_until(lambda screen: not any(
            STRIKE in attributes(line) for line in screen.splitlines()[middle + 1 :]
        ), "rejected drafts still shown after x")
        term.keys("q")
        deadline = time.monotonic() + 15
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not term.alive(), "q did not quit"
    finally:
        term.close()


def test_a_hostile_session_sends_no_escape_to_the_terminal(tmp_path):
    """OSC 0 (title), OSC 52 (clipboard) and ESC [2J (clear) in a session's file name,
    prompt, pieces and errors: tmux keeps its own title and clipboard, and the screen
    shows the escapes as symbols, in the panes, the inspector and the session browser."""
    from helpers.hostile import CLEAR, OSC0, OSC52, QUIT, hostile_document
    from specdeck.sessions.session import save_document

    text = f"{OSC0}{OSC52}{QUIT}{CLEAR}end"
    path = tmp_path / f"{OSC0}run.json"
    save_document(path, hostile_document(text, ["plain", "my draft"]))
    command = ["env", f"SPECDECK_SESSIONS_DIR={tmp_path}", sys.executable, "-m", "specdeck",
               "replay", str(path)]
    term = Terminal(command, width=160, height=45)
    try:
        term.wait_for("race finished")
        title = term.run("display", "-p", "-t", term.name, "#{pane_title}")
        term.press("i")
        term.press("n")
        term.keys("o")
        screen = term.wait_for("· enter: open in the panes")
        assert "␛]52;c;cHduZWQ=␇" in screen and "[@click=app.quit]quit[/]" in screen
        after = term.run("display", "-p", "-t", term.name, "#{pane_title}")
        assert "pwned" not in title + after and after == title
        buffers = term.run("list-buffers")
        assert "cHduZWQ" not in buffers and "pwned" not in buffers
    finally:
        term.close()


def test_after_a_strategies_change_in_settings_help_and_quit_still_work(tiny_family):
    """The keyboard died here once: the panes that held focus were replaced. The new
    strategies are typed in one burst right after ``s``."""
    run = " ".join([
        sys.executable, "-m", "specdeck", "compare",
        "--target", str(tiny_family["llama_target"]), "--draft", str(tiny_family["llama_draft"]),
        "--strategies", "plain,draft", "--prompt", "def", "--max-tokens", "8", "--no-save",
    ])
    term = Terminal(["sh", "-c", f"{run}; echo specdeck-exit=$?; sleep 60"], width=160,
                    height=45)
    try:
        term.wait_for("measured one after another")
        # All at once, as a fast typist or a paste sends them: the dialog takes its
        # first field before the next key is read (the typing once landed in another
        # field, or nowhere, while it was mounting). Prompt picker, prompt, target,
        # pick, draft, pick, MTP, pick: the eighth tab reaches the strategies.
        term.keys("s", *["Tab"] * 8, "End", "C-u")
        term.keys("-l", "plain,ngram")
        term.wait_for("plain,ngram", timeout=30)
        term.keys("C-s")
        term.wait_for("ngram n=3")
        term.wait_for("measured one after another")
        term.keys("?")
        term.wait_for("specdeck — keys")
        term.keys("Escape")
        # An escape and a key sent at once read as alt+key: q once the help is gone.
        term.wait_until(lambda screen: "specdeck — keys" not in screen, "help still open")
        term.keys("q")
        assert "specdeck-exit=0" in term.wait_for("specdeck-exit=", timeout=30)
    finally:
        term.close()
