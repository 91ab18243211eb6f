"""The Textual playground. Consumes engine events; never imports mlx itself."""

from specdeck.tui.app import SpecdeckApp, run_app

__all__ = ["SpecdeckApp", "run_app"]
