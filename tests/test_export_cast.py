"""``specdeck export --cast`` and ``--svg``: the race as the app plays it, as an asciinema
recording that asciinema's own reader plays for as long as the app's race lasts, and as
a picture of the finished race; a hostile session's control characters are symbols."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from asciinema.asciicast import open_from_url
from asciinema.asciicast.v2 import get_duration

from helpers.hostile import every_fragment, hostile_document
from specdeck.cli import main
from specdeck.export.cast import race_cast
from specdeck.sessions.playback import Schedule, stretch_for
from specdeck.sessions.session import load_session, save_document

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "sessions" / "examples" / "code-draft-k4.json"
#: The cast's own escape sequences: hide the cursor, clear, move, colours.
OWN_ESCAPES = re.compile(r"\x1b\[(?:\?25l|2J|[0-9]+;[0-9]+H|[0-9;]*m)")


def read_cast(path: Path) -> tuple[dict, list[list]]:
    """The header and events as asciinema's reader gives them."""
    with open_from_url(str(path)) as cast:
        return cast.v2_header, list(cast.events())


def test_the_cast_plays_the_race_for_as_long_as_the_app_races_it(tmp_path) -> None:
    out = tmp_path / "race.cast"
    assert main(["export", str(EXAMPLE), "--cast", str(out), "--size", "120x30"]) == 0
    header, events = read_cast(out)
    assert (header["version"], header["width"], header["height"]) == (2, 120, 30)
    assert {kind for _, kind, _ in events} == {"o"}
    stamps = [t for t, _, _ in events]
    assert stamps == sorted(stamps) and stamps[0] == 0
    # The app races a run this short slowed down to 8 s (its status line says so).
    duration = Schedule.of(load_session(EXAMPLE).traces).duration
    race = duration * stretch_for(duration)
    assert abs(get_duration(str(out)) / race - 1) < 0.05
    assert "shown 14.4x slower than real time" in "".join(text for _, _, text in events)
    screen = played(out, 120, 30, until="race finished")
    assert "race finished: draft won at 1.24x plain" in screen[1]
    assert "draft k=4" in screen[4] and "1st · finished at" in "".join(screen)


def played(cast: Path, width: int, height: int, until: str) -> list[str]:
    """The screen of a real terminal (tmux) once ``asciinema play`` has played ``cast``
    (20 times faster) and the screen shows ``until``."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    name = f"specdeck-cast-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", name, "-f", os.devnull]
    play = shlex.join([sys.executable, "-m", "asciinema", "play", "-s", "20", str(cast)])
    subprocess.run([*tmux, "new-session", "-d", "-x", str(width), "-y", str(height),
                    f"{play}; sleep 60"], check=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            screen = subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True,
                                    text=True, check=True).stdout.splitlines()
            if until in "\n".join(screen):
                return screen
            assert time.monotonic() < deadline, f"never showed {until!r}: {screen}"
            time.sleep(0.05)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def test_a_hostile_sessions_control_characters_reach_the_cast_as_symbols(tmp_path) -> None:
    path = tmp_path / "hostile.json"
    save_document(path, hostile_document(every_fragment(), ["plain", "\x1b]0;title\x07x"]))
    out = tmp_path / "hostile.cast"
    # Two frames a second: every frame is the app's screen, whatever the rate.
    out.write_bytes(race_cast(load_session(path), "\x1b]0;title\x07", (100, 24), fps=2))
    header, events = read_cast(out)
    assert header["title"] == "␛]0;title␇"
    text = "".join(text for _, _, text in events)
    left = OWN_ESCAPES.sub("", text)
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", left), "a raw control character"
    assert "␛]0;title␇x" in left and "␛]52;c;" in left


def test_the_svg_is_the_finished_race(tmp_path) -> None:
    out = tmp_path / "race.svg"
    assert main(["export", str(EXAMPLE), "--svg", str(out)]) == 0
    svg = out.read_text(encoding="utf-8").replace("&#160;", " ")
    assert svg.startswith("<svg") and "race finished: draft won at 1.24x plain" in svg
    assert "1st · finished at" in svg and "2nd · finished at" in svg


def test_the_svg_can_show_a_rejected_drafts_round_in_the_inspector(tmp_path, capsys) -> None:
    session = load_session(EXAMPLE)
    first = next(i for i, r in enumerate(session.traces["draft"].rounds, 1) if r.rejected)
    out = tmp_path / "race.svg"
    assert main(["export", str(EXAMPLE), "--svg", str(out), "--inspect", "draft"]) == 0
    svg = out.read_text(encoding="utf-8").replace("&#160;", " ")
    total = len(session.traces["draft"].rounds)
    assert f"draft · round {first} of {total}" in svg and "rejected" in svg
    assert main(["export", str(EXAMPLE), "--svg", str(out), "--inspect", "draft:2"]) == 0
    assert f"round 2 of {total}" in out.read_text(encoding="utf-8").replace("&#160;", " ")
    for wrong, says in (("nope", "no strategy 'nope'"), ("draft:999", "has rounds 1 to"),
                        ("plain", "rejected no draft")):
        assert main(["export", str(EXAMPLE), "--svg", str(out), "--inspect", wrong]) == 2
        assert says in capsys.readouterr().err
