"""``specdeck export --html`` and ``specdeck diff --html``: one self-contained page, opened
from disk in a real browser (Debian's chromium, driven by selenium): it races the panes,
a click on a token explains its round with the session's own numbers, and a hostile
session's text is shown, never run, and nothing leaves the page."""

from __future__ import annotations

import base64
import hashlib
import html
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from helpers.browser import browser, needs_browser, requests, visit, wait_for
from helpers.hostile import HTML, every_fragment, hostile_document
from helpers.sessions import NO_MLX, document, make_trace, plain_trace, sweep_document
from specdeck.cli import main
from specdeck.safe_text.plain import printable
from specdeck.engines.core.events import Trace
from specdeck.export.page import render_page
from specdeck.export.page_data import session_page
from specdeck.sessions.session import load_session, save_document

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "sessions" / "examples"


def sampled_traces(rounds: int = 16, seed: int = 0) -> dict[str, Trace]:
    """Plain decoding and a draft run at temperature > 0 whose every draft records q, p
    and the uniform u it was tested against (kept while u < min(1, p/q)), as the sampler
    records them."""
    rng = random.Random(seed)
    plan, token = [], 10
    for i in range(rounds):
        accepted = i % 4
        drafted = list(range(token, token + 3))
        plan.append((drafted, accepted, token + 40))
        token += 3
    trace = make_trace("draft", plan)
    for event in trace.rounds:
        q = [rng.uniform(0.3, 0.9) for _ in event.drafted]
        p = [rng.uniform(0.05, 0.95) * qi for qi in q]  # p < q: min(1, p/q) = p/q
        event.draft_probs, event.target_probs = q, p
        event.rollback = "trim" if event.rejected else "none"
        event.uniforms = [rng.uniform(0, pi / qi) if j < event.accepted
                          else rng.uniform(pi / qi, 1) for j, (pi, qi) in enumerate(zip(p, q))]
    return {"plain": plain_trace("plain", list(range(200, 240))), "draft": trace}


def saved(tmp_path: Path, doc: dict, name: str = "run.json") -> Path:
    path = tmp_path / name
    save_document(path, doc)
    return path


def export_html(path: Path, *extra: str) -> Path:
    assert main(["export", str(path), "--html", *extra]) == 0
    return path.with_suffix(".html")


def _by(css: str):
    from selenium.webdriver.common.by import By

    return By.CSS_SELECTOR, css


def assert_quiet(driver, page: Path) -> None:
    """The page ran no alert, broke no policy, stayed where it was, sent no request but
    its own load and logged no error."""
    seen = driver.execute_script("return window.__seen")
    assert seen == {"alerts": [], "violations": []}
    assert driver.current_url == page.as_uri()
    assert [url for url in requests(driver) if not url.startswith("data:")] in (
        [], [page.as_uri()])
    assert driver.execute_script("return performance.getEntriesByType('resource')"
                                 ".filter((e) => !e.name.startsWith('data:')).length") == 0
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


# --- the page as a file ---------------------------------------------------------------


def _blocks(page: str) -> tuple[str, str, str, str]:
    """The policy, the style, the data and the script of a page."""
    csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"',
                                  page).group(1))
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    data = re.search(r'<script type="application/json" id="data">(.*?)</script>', page,
                     re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    return csp, style, data, script


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_page_allows_only_its_own_script_and_style() -> None:
    page = export_html_bytes(EXAMPLES / "code-all-strategies.json").decode()
    csp, style, _, script = _blocks(page)
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == _sha256(script)
    assert directives["style-src"] == _sha256(style)
    assert directives["img-src"] == "data:"
    assert "unsafe" not in csp
    # Nothing to load: no external script, style, image, frame or link.
    assert not re.search(r"<(link|img|iframe|object|embed)\b|\bsrc=|\bhref=", page)


def export_html_bytes(path: Path) -> bytes:
    session = load_session(path)
    return render_page(session_page(session, path.name), path.name)


def test_no_string_of_the_session_leaves_the_data_block(tmp_path) -> None:
    """``</script>``, comments and line separators are escaped, and losslessly: the block
    reads back as the data it was made from."""
    path = saved(tmp_path, hostile_document(every_fragment(), ["plain", "</script>"]))
    page = export_html(path).read_text(encoding="utf-8")
    assert len(re.findall(r"<script", page, re.I)) == len(re.findall(r"</script", page, re.I)) == 2
    assert "\u2028" not in page and "\u2029" not in page and "<!--" not in page
    assert not re.search(r"<(img|svg|iframe|a)\b", page)
    _, _, data, _ = _blocks(page)
    session = load_session(path)
    expected = session_page(session, f"specdeck: {path.name}")
    assert orjson.loads(data) == orjson.loads(orjson.dumps(expected))


def test_the_page_grows_linearly_with_the_session(tmp_path) -> None:
    """Bytes per token stay the same from 300 to 2,400 tokens a strategy."""
    sizes = []
    for rounds in (100, 400, 800):
        traces = sampled_traces(rounds)
        traces["plain"] = plain_trace("plain", list(range(3 * rounds)))
        path = saved(tmp_path, document(traces), f"run-{rounds}.json")
        tokens = sum(len(t.tokens) for t in load_session(path).traces.values())
        sizes.append((tokens, export_html(path).stat().st_size))
    (t1, s1), (t2, s2), (t3, s3) = sizes
    first, second = (s2 - s1) / (t2 - t1), (s3 - s2) / (t3 - t2)
    assert abs(second / first - 1) < 0.05, sizes
    assert first * 1000 < 400_000  # bytes per 1,000 tokens


def test_export_writes_beside_the_file_or_where_told_and_nowhere_else(tmp_path, capsys) -> None:
    path = saved(tmp_path, document(sampled_traces(4)))
    assert main(["export", str(path), "--html"]) == 0
    assert path.with_suffix(".html").is_file()
    folder = tmp_path / "out"
    folder.mkdir()
    assert main(["export", str(path), "--html", str(folder)]) == 0
    assert (folder / "run.html").is_file()
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    assert main(["export", str(path), "--html", str(fifo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"specdeck: error: {fifo} is not a regular file: not overwritten"
    assert fifo.is_fifo()


@pytest.mark.parametrize("args, needle", [
    (["missing.json", "--html"], "no such file"),
    (["broken.json", "--html"], "truncated"),
    (["sweep.json", "--cast"], "is a sweep, which has no race"),
])
def test_a_file_that_cannot_be_exported_ends_in_one_line(tmp_path, capsys, args, needle) -> None:
    (tmp_path / "broken.json").write_bytes(orjson.dumps(document(sampled_traces(2)))[:200])
    save_document(tmp_path / "sweep.json", sweep_document())
    code = main(["export", str(tmp_path / args[0]), *args[1:]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("specdeck: error: ")
    assert needle in err[0]


def test_export_needs_no_mlx(tmp_path) -> None:
    out = tmp_path / "page.html"
    result = subprocess.run(
        [sys.executable, "-c", NO_MLX, "export", str(EXAMPLES / "code-draft-k4.json"),
         "--html", str(out)], capture_output=True, text=True, timeout=120,
        env={**os.environ, "SPECDECK_NO_OPENBLAS": "1"})
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 10_000


# --- the page in a browser -------------------------------------------------------------


@needs_browser
def test_play_races_the_panes_and_a_rejected_token_shows_its_p_q_and_u(tmp_path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.select import Select

    path = saved(tmp_path, document(sampled_traces()))
    page = export_html(path)
    session = load_session(path)
    with browser() as driver:
        visit(driver, page.as_uri())
        rounds = driver.find_elements(*_by(".round"))
        total = sum(len(t.rounds) for t in session.traces.values())
        assert len(rounds) == total and all(r.is_displayed() for r in rounds)
        play = driver.find_element(*_by("button.play"))
        play.click()
        shown = "return document.querySelectorAll('.round:not([hidden])').length"
        wait_for(lambda: 0 < driver.execute_script(shown) < total, what="the race under way")
        Select(driver.find_element(*_by("select.speed"))).select_by_value("10")
        wait_for(lambda: driver.execute_script(shown) == total and "play" in play.text,
                 what="the race's end")
        places = [s.text for s in driver.find_elements(*_by(".pane .status"))]
        assert sorted(places)[0].startswith("1st · finished at")

        token = driver.find_elements(*_by(".text .token--rejected"))[2]
        owner = token.find_element("xpath", "..")
        name = session.strategies[int(owner.get_attribute("data-pane"))]
        number = int(owner.get_attribute("data-round"))
        event = session.traces[name].rounds[number]
        token.click()
        detail = wait_for(lambda: driver.find_element(*_by("#detail")).is_displayed()
                          and driver.find_element(*_by("#detail")))
        assert f"round {number + 1} of {len(session.traces[name].rounds)}" in \
            detail.find_element(*_by("h2")).text
        row = next(r for r in detail.find_elements(*_by("tbody tr"))
                   if r.find_element(*_by(".col-kind")).text == "rejected")
        i = event.accepted
        p, q, u = event.target_probs[i], event.draft_probs[i], event.uniforms[i]
        cell = lambda column: row.find_element(*_by(f".col-{column}")).text  # noqa: E731
        assert (cell("q"), cell("p"), cell("u"), cell("bound")) == (
            f"{q:.3f}", f"{p:.3f}", f"{u:.3f}", f"{min(1.0, p / q):.3f}")
        assert u >= p / q  # what made it a rejection
        assert "cost: draft" in detail.text and "rollback: trimmed" in detail.text

        # The keyboard: the round after it, by arrow key and Enter.
        driver.execute_script("arguments[0].focus()", owner)
        ActionChains(driver).send_keys(Keys.ARROW_RIGHT, Keys.ENTER).perform()
        wait_for(lambda: f"round {number + 2} of" in detail.find_element(*_by("h2")).text,
                 what="the next round's detail")
        assert_quiet(driver, page)

        # Side by side on a screen, stacked on a phone.
        lefts = "return [...document.querySelectorAll('.pane')].map((p) => p.offsetLeft)"
        assert len(set(driver.execute_script(lefts))) == 2
        driver.set_window_size(400, 800)
        wait_for(lambda: len(set(driver.execute_script(lefts))) == 1, what="stacked panes")


@needs_browser
def test_a_hostile_session_is_shown_as_text_runs_nothing_and_sends_nothing(tmp_path) -> None:
    names = ["plain", "<img src=x onerror=alert('name')>", "</script><b>"]
    path = saved(tmp_path, hostile_document(every_fragment(), names))
    page = export_html(path)
    with browser() as driver:
        visit(driver, page.as_uri())
        wait_for(lambda: driver.find_elements(*_by(".round")), what="the panes")
        text = driver.execute_script("return document.body.textContent")
        for fragment in HTML + names[1:]:  # as every printer shows it (U+2028 as ↵)
            assert printable(fragment) in text
        counts = driver.execute_script(
            "return [document.scripts.length, document.styleSheets.length,"
            " document.querySelectorAll('img, svg, iframe, a, object, embed').length]")
        assert counts == [2, 1, 0]
        driver.find_elements(*_by(".text .token--rejected"))[-1].click()
        wait_for(lambda: driver.find_element(*_by("#detail")).is_displayed(), what="detail")
        assert names[-1] in driver.find_element(*_by("#detail h2")).text
        assert_quiet(driver, page)

        # The policy is live: a handler and a script smuggled into the page are refused.
        tampered = tmp_path / "tampered.html"
        tampered.write_text(page.read_text(encoding="utf-8").replace(
            "<footer>", "<img src=x onerror=\"alert('handler')\"><script>alert('inline')"
            "</script><footer>"), encoding="utf-8")
        visit(driver, tampered.as_uri())
        seen = wait_for(lambda: (s := driver.execute_script("return window.__seen"))
                        and len(s["violations"]) >= 2 and s, what="the refusals")
        assert seen["alerts"] == []
        assert any(v.startswith("script-src") for v in seen["violations"])


@needs_browser
def test_a_sweep_and_a_diff_export_as_pages(tmp_path, capsys) -> None:
    sweep = ROOT / "docs" / "demo-sweep.json"
    sweep_page = tmp_path / "sweep.html"
    assert main(["export", str(sweep), "--html", str(sweep_page)]) == 0
    a, b = EXAMPLES / "code-all-strategies.json", EXAMPLES / "prose-all-strategies.json"
    diff_page = tmp_path / "diff.html"
    assert main(["diff", str(a), str(b), "--html", str(diff_page)]) == 1  # they differ
    cells = len(orjson.loads(sweep.read_bytes())["cells"])
    with browser() as driver:
        visit(driver, sweep_page.as_uri())
        wait_for(lambda: driver.execute_script(
            "const i = document.querySelector('img'); return i && i.complete"), what="chart")
        assert driver.execute_script("return document.querySelector('img').naturalWidth") > 0
        assert len(driver.find_elements(*_by("section.table tbody tr"))) == cells
        assert "recommendations" in driver.find_element(*_by("main")).text
        assert_quiet(driver, sweep_page)

        visit(driver, diff_page.as_uri())
        main_text = wait_for(lambda: driver.find_element(*_by("main")).text, what="the diff")
        assert "settings that differ" in main_text
        assert "plain: first divergence at token" in main_text
        assert "draft: statistics" in main_text
        assert_quiet(driver, diff_page)
