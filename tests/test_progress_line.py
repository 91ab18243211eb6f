"""Progress lines: redrawn in place on a terminal, plain and sparse in a log."""

from __future__ import annotations

import io

from specdeck.commands.progress_line import ProgressLine


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_progress_is_a_few_plain_lines() -> None:
    log, now = io.StringIO(), [0.0]
    line = ProgressLine(log, every=10.0, clock=lambda: now[0])
    for done in range(1, 307):  # calibrate's 306 passes, a quarter of a second each
        now[0] += 0.25
        line.show(f"{done}/306 passes timed", last=done == 306)
    line.end()
    written = log.getvalue()
    assert "\r" not in written and "\033" not in written
    # The first, one every 10 s (40 passes), and the last.
    assert written.splitlines() == [f"{done}/306 passes timed"
                                    for done in (1, 41, 81, 121, 161, 201, 241, 281, 306)]


def test_on_a_terminal_the_line_is_redrawn_and_ended_once() -> None:
    screen = Terminal()
    line = ProgressLine(screen)
    line.show("1/2")
    line.show("2/2", last=True)
    line.end()
    line.end()  # nothing drawn since: no blank line
    assert screen.getvalue() == "\r1/2\033[K\r2/2\033[K\n"
