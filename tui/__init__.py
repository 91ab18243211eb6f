"""The Textual playground. Consumes engine events; never imports mlx itself."""

from specdeck.tui.app import SpecdeckApp, run_app
from specdeck.tui.sources import LiveSource, ReplaySource

__all__ = ["LiveSource", "ReplaySource", "SpecdeckApp", "run_app"]
