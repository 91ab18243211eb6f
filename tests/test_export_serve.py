"""``specdeck serve``: the playground served to a real browser with textual-serve, on this
machine only unless ``--host`` says otherwise, and then with a warning.

The browser's view is read from the terminal stream it receives (its WebSocket frames,
from Chrome's performance log): the page draws it on a canvas, which holds no text.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from helpers.browser import browser, needs_browser, visit, wait_for
from specdeck.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "sessions" / "examples" / "code-draft-k4.json"
CLOCK = re.compile(r"race: each strategy from its own t=0 · ([0-9.]+) s of")

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serving(log: Path, *args: str) -> Iterator[int]:
    """``specdeck serve`` on a free port, accepting connections; its port."""
    port = free_port()
    with open(log, "w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "specdeck", "serve", "--port", str(port), *args],
            stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT,
            env={**os.environ, "SPECDECK_NO_OPENBLAS": "1"})
    try:
        def accepting() -> bool:
            assert process.poll() is None, log.read_text()
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0
        wait_for(accepting, 30, "the server")
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def listening_addresses(port: int) -> list[str]:
    """The local addresses with a socket listening on ``port`` (Linux's /proc)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                raw = bytes.fromhex(address)
                if len(raw) == 4:
                    found.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:
                    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    found.append(socket.inet_ntop(socket.AF_INET6, words))
    return found


def _received(driver) -> str:
    """What the served app has sent the page since the last call, as terminal text."""
    data = b""
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.webSocketFrameReceived":
            frame = message["params"]["response"]
            if frame["opcode"] == 2:  # binary: the terminal's bytes
                data += base64.b64decode(frame["payloadData"])
    return data.decode("utf-8", "replace")


def screen_until(driver, shows: Callable[[str], bool], what: str) -> str:
    """All the served app has sent the page, once ``shows`` holds of it."""
    seen = ""

    def enough() -> bool:
        nonlocal seen
        seen += _received(driver)
        return shows(seen)

    wait_for(enough, 30, what)
    return seen


def quit_with_q(driver) -> None:
    """Press q in the page's terminal; the app ends and the page says the session did."""
    driver.find_element("css selector", ".xterm-helper-textarea").send_keys("q")
    wait_for(lambda: "-closed" in driver.find_element("tag name", "body").get_attribute("class"),
             30, "the app's end")


@needs_browser
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net")
def test_a_served_replay_streams_its_race_to_the_browser_and_q_quits(tmp_path) -> None:
    with serving(tmp_path / "serve.log", "--replay", str(EXAMPLE)) as port:
        assert listening_addresses(port) == ["127.0.0.1"]
        with browser() as driver:
            visit(driver, f"http://127.0.0.1:{port}/")
            seen = screen_until(driver, lambda text: len(set(CLOCK.findall(text))) >= 3,
                                "the race's clock moving in the browser")
            assert "draft k=4" in seen and "plain" in seen
            clocks = [float(c) for c in CLOCK.findall(seen)]
            assert clocks == sorted(clocks)
            quit_with_q(driver)
    assert "open http://127.0.0.1:" in (tmp_path / "serve.log").read_text()


@needs_browser
def test_serve_serves_the_live_playground(tmp_path) -> None:
    with serving(tmp_path / "serve.log", "--family", "demo") as port:
        with browser() as driver:
            visit(driver, f"http://127.0.0.1:{port}/")
            seen = screen_until(driver, lambda text: all(
                title in text for title in ("plain", "draft k=2", "mtp depth=1")),
                "the live playground's panes")
            assert "replay:" not in seen  # live runs, not a saved session
            quit_with_q(driver)


def test_serve_warns_before_listening_beyond_this_machine(tmp_path) -> None:
    """Told to listen on every network, it warns first; here the port is taken, so it
    then ends in one line without listening at all."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "specdeck", "serve", "--host", "0.0.0.0", "--port",
             str(port)], capture_output=True, text=True, timeout=60, cwd=ROOT,
            env={**os.environ, "SPECDECK_NO_OPENBLAS": "1"})
    lines = [line for line in result.stderr.splitlines() if line.startswith("specdeck:")]
    assert lines[0] == (f"specdeck: warning: listening on 0.0.0.0: anyone who can reach "
                        f"port {port} can run models on this machine")
    assert lines[-1].startswith(f"specdeck: error: cannot listen on 0.0.0.0:{port}")
    assert result.returncode == 2


def test_serve_refuses_a_broken_replay_in_one_line(tmp_path, capsys) -> None:
    broken = tmp_path / "broken.json"
    broken.write_bytes(EXAMPLE.read_bytes()[:500])
    assert main(["serve", "--replay", str(broken)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "truncated" in err[0]
