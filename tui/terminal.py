"""The playground draws on a terminal: refuse to start without one.

Textual reads keys from standard input and draws on standard error. Started with either
redirected (``specdeck compare ... < /dev/null``, a cron job, a pipe), it never got a
key, drew into the file and spun a core at 100 % until killed (measured: ten minutes
of ``specdeck compare`` from a background shell). Said in one line instead, with the
way to print. Served to a browser (``specdeck serve``: textual-serve pipes both and names
Textual's web driver), the browser is the terminal.
"""

from __future__ import annotations

import os
import sys

from specdeck.engines.core.errors import UserError


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
