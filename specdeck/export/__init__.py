"""Sharing a run: one self-contained web page (a session, a sweep or a diff), an asciinema
recording of the race, a still picture of it, and the playground served to a browser.

Exports need no model: nothing here imports mlx. Every string from a file is someone
else's data: it reaches a page as escaped JSON drawn with ``textContent``, and a terminal
recording as the app draws it, control characters shown as symbols (``specdeck.safe_text.plain``).
"""
