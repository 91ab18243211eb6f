"""A real browser for the tests: Debian's chromium driven through chromium-driver by
selenium, headless, with a fresh profile and no background traffic. Tests that use it
skip, saying why, where any of the three is missing.

The browser records what a page did: every alert (``window.alert``, ``confirm`` and
``prompt`` replaced before the page's own script runs), every Content-Security-Policy
violation, the console, and every network request (Chrome's performance log).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync")

#: Installed before any script of a page runs (DevTools scripts are outside its policy).
WATCH = """
window.__seen = {alerts: [], violations: []};
for (const name of ["alert", "confirm", "prompt"]) {
  window[name] = (message) => { window.__seen.alerts.push(String(message)); };
}
document.addEventListener("securitypolicyviolation", (event) => {
  window.__seen.violations.push(event.violatedDirective + " " + event.blockedURI);
});
"""


def _missing() -> str | None:
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install -e '.[test]')"
    if CHROMIUM is None or CHROMEDRIVER is None:
        return "no chromium and chromium-driver (apt-get install chromium chromium-driver)"
    return None


needs_browser = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@contextmanager
def browser(width: int = 1280, height: int = 900) -> Iterator:
    """A headless chromium (a selenium WebDriver) that watches every page it opens."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="specdeck-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    # Chromium crashes with the OpenBLAS that specdeck preloads on Linux.
    env = {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, env=env), options=options)
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def requests(driver) -> list[str]:
    """The URL of every request sent since the last call, but the browser's own (its
    start page's, ``chrome://``)."""
    sent = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message["params"]
        if message["method"] == "Network.requestWillBeSent" and not (
                params.get("documentURL", "").startswith("chrome")):
            sent.append(params["request"]["url"])
    return sent


def visit(driver, url: str) -> None:
    """Open ``url``, what the browser logged before left behind."""
    requests(driver)
    driver.get_log("browser")
    driver.get(url)


def wait_for(condition: Callable[[], object], seconds: float = 10.0, what: str = "") -> object:
    """``condition()``'s first true value, polled until ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting after {seconds} s: {what}")
        time.sleep(0.05)
