"""The prompt on the main screen: one line under the status line, the whole prompt (its
first lines) when expanded, so what the panes answer is never out of sight."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from specdeck.engines.core.formatting import plural
from specdeck.safe_text.rich_text import literal

#: Lines of the prompt shown expanded, and characters of each (a line may be megabytes).
EXPANDED_LINES = 8
LINE_CHARS = 2000


def prompt_text(prompt: str | None, expanded: bool) -> Text:
    """``prompt:`` and the prompt, literally: on one line (newlines as ``↵``), or its
    first lines with a count of the rest."""
    head = Text("prompt ", style="bold")
    if prompt is None:
        return head + Text("not recorded in this session", style="italic")
    if not expanded:
        return head + literal(prompt, one_line=True, limit=LINE_CHARS)
    lines = prompt.splitlines() or [""]
    shown = "\n".join(line[:LINE_CHARS] for line in lines[:EXPANDED_LINES])
    hidden = len(lines) - EXPANDED_LINES
    more = f"\n… {plural(hidden, 'more line')}" if hidden > 0 else ""
    return head + literal(shown + more)


class PromptLine(Static):
    """The prompt of the run the panes show; ``expanded`` shows more than its start."""

    def __init__(self, prompt: str | None = None) -> None:
        super().__init__(id="prompt-line")
        self._prompt = prompt

    def show(self, prompt: str | None) -> None:
        self._prompt = prompt
        self._update()

    @property
    def expanded(self) -> bool:
        return self.has_class("-expanded")

    def toggle(self) -> None:
        self.toggle_class("-expanded")
        self._update()

    def on_mount(self) -> None:
        self._update()

    def _update(self) -> None:
        self.update(prompt_text(self._prompt, self.expanded))
