"""The playground draws on a terminal: refuse to start without one, read every byte it
types, and end a crash with a non-zero status.

Textual reads keys from standard input and draws on standard error. Started with either
redirected (``specdeck compare ... < /dev/null``, a cron job, a pipe), it never got a
key, drew into the file and spun a core at 100 % until killed (measured: ten minutes
of ``specdeck compare`` from a background shell). Said in one line instead, with the
way to print. Served to a browser (``specdeck serve``: textual-serve pipes both and names
Textual's web driver), the browser is the terminal.
"""

from __future__ import annotations

import codecs
import functools
import os
import sys

from textual.app import App
from textual.drivers import linux_driver, linux_inline_driver, web_driver

from specdeck.engines.core.errors import AppCrashed, UserError


#: The driver textual-serve names (``TEXTUAL_DRIVER``) for the app it starts.
WEB_DRIVER = "textual.drivers.web_driver:"


def require_terminal() -> None:
    """Raise a UserError unless standard input and standard error are both a terminal,
    or the app draws in a browser (Textual's web driver)."""
    if os.environ.get("TEXTUAL_DRIVER", "").startswith(WEB_DRIVER):
        return
    missing = [name for name, stream in (("input", sys.stdin), ("error", sys.stderr))
               if not (stream is not None and stream.isatty())]
    if missing:
        raise UserError(f"the playground needs a terminal, and standard "
                        f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                        "not one here: add --headless to print instead")


def _lenient_decoder(encoding: str):
    """The incremental decoder Textual's Linux driver reads keys with, replacing a byte
    that is not UTF-8 with U+FFFD instead of raising: one invalid byte (an xterm sending
    8-bit Meta, a paste) raised UnicodeDecodeError in the input thread and killed the
    app."""
    return functools.partial(codecs.getincrementaldecoder(encoding), errors="replace")


# Textual 8.2.8 decodes its input strictly (Textualize/textual#6456, open; no fix merged
# yet): drop this once a release passes errors="replace" itself.
for _driver in (linux_driver, linux_inline_driver, web_driver):
    _driver.getincrementaldecoder = _lenient_decoder


def run_app_to_the_end(app: App) -> None:
    """Run ``app`` on this terminal; AppCrashed when it ended on an unhandled exception
    (Textual prints the traceback, and its ``run`` returns as if all went well)."""
    app.run()
    if app.return_code:
        raise AppCrashed(f"the app stopped on an unexpected error (status {app.return_code})")
