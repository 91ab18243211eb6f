"""The diff screen: two runs (two sessions, or two panes of one) lined up in the app.

It renders a ``specdeck.sessions.diff.DiffReport``, the same data ``specdeck diff`` prints: a
verdict per pair (identical, or the first token where the outputs part), the token-level
diff inline, the settings and machine values that differ, and every statistic side by
side with its ratio. Deleted and inserted tokens are component classes (``diff--deleted``,
``diff--inserted``) styled by the stylesheet, and carry git's word-diff markers
(``[-...-]``, ``{+...+}``) so they read without colour too.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Column, Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from specdeck.engines.core.events import Trace
from specdeck.engines.core.formatting import plural, setting_text, stats_table
from specdeck.sessions.diff import DiffReport, PaneDiff, shown_changes
from specdeck.safe_text.rich_text import literal
from specdeck.safe_text.plain import printable
from specdeck.tui.fitting_footer import FittingFooter

#: Equal tokens kept on each side of an edit; longer equal stretches are cut short.
CONTEXT = 12
#: Run kinds, in legend order (``equal``: both outputs have these tokens).
DIFF_KINDS = ("equal", "deleted", "inserted", "elided")


#: Characters of one run shown inline (a token may be megabytes long).
EDIT_CHARS = 2000


def _capped(text: str) -> str:
    """``text`` made printable, cut at ``EDIT_CHARS`` with a note of what is left out."""
    more = len(text) - EDIT_CHARS
    return printable(text[:EDIT_CHARS]) + (f" ⋯ {more:,} more characters ⋯" if more > 0 else "")


def _marked(text: str, kind: str) -> str:
    # A changed newline would be invisible: show it, then break the line as the text does.
    shown = _capped(text).replace("\n", "↵\n")
    return f"[-{shown}-]" if kind == "deleted" else f"{{+{shown}+}}"


def inline_diff(
    a: Trace, pane: PaneDiff, context: int = CONTEXT
) -> list[tuple[str, str]]:
    """``(text, kind)`` runs that read as side a's output (``a``) turned into side b's:
    equal tokens, then each edit's deleted (a) and inserted (b) text. Equal stretches keep ``context``
    tokens next to each edit; the rest becomes one ``elided`` run saying how many."""
    if pane.identical:
        return []
    pieces = [p for r in a.rounds for p in r.pieces]
    runs: list[tuple[str, str]] = []

    def equal(start: int, end: int) -> None:
        keep_head = context if start > 0 else 0  # after an edit
        keep_tail = context if end < len(pieces) else 0  # before an edit
        hidden = end - start - keep_head - keep_tail
        if hidden <= 1:  # not worth a note
            if end > start:
                runs.append((_capped("".join(pieces[start:end])), "equal"))
            return
        if keep_head:
            runs.append((_capped("".join(pieces[start : start + keep_head])), "equal"))
        runs.append((f" ⋯ {plural(hidden, 'equal token')} ⋯ ", "elided"))
        if keep_tail:
            runs.append((_capped("".join(pieces[end - keep_tail : end])), "equal"))

    position = 0
    for edit in pane.edits:
        equal(position, edit.a_start)
        if edit.a_text:
            runs.append((_marked(edit.a_text, "deleted"), "deleted"))
        if edit.b_text:
            runs.append((_marked(edit.b_text, "inserted"), "inserted"))
        position = edit.a_end
    equal(position, len(pieces))
    return runs


class TokenDiff(Widget):
    """Runs of text styled by kind through the ``diff--<kind>`` component classes."""

    COMPONENT_CLASSES = {f"diff--{kind}" for kind in DIFF_KINDS}

    DEFAULT_CSS = """
    TokenDiff { height: auto; }
    """

    def __init__(self, runs: list[tuple[str, str]], *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.runs = runs

    @property
    def plain(self) -> str:
        """The text as shown, markers included."""
        return "".join(text for text, _ in self.runs)

    def render(self) -> Text:
        text = Text()
        for part, kind in self.runs:
            text.append(part, self.get_component_rich_style(f"diff--{kind}", partial=True))
        return text


LEGEND = [("diff: ", "equal"), ("[-deleted from a-]", "deleted"), ("  ", "equal"),
          ("{+inserted in b+}", "inserted"), ("  ", "equal"),
          (" ⋯ equal tokens left out ⋯ ", "elided")]


def stats_grid(pane: PaneDiff) -> Table:
    """Every statistic of the pair side by side with its ratio, as ``specdeck diff``
    prints them (``engines.formatting.stats_table``)."""
    columns, rows = stats_table(f"a {pane.a_strategy}", f"b {pane.b_strategy}", pane.stats)
    table = Table(*(Column(literal(title, one_line=True), justify=justify) for title, justify in columns))
    for row in rows:
        table.add_row(*row)
    return table


def changes_table(report: DiffReport) -> Group:
    """What a person set that differs first, then the machine; the values worked out
    from them (memory estimates...) in one line under it."""
    shown, folded = shown_changes(report.changes)
    table = Table(title="settings and machine that differ", title_justify="left")
    table.add_column("")
    table.add_column("a", overflow="fold")
    table.add_column("b", overflow="fold")
    for change in shown:
        table.add_row(literal(change.path, one_line=True),
                      literal(setting_text(change.path, change.a, 48)),
                      literal(setting_text(change.path, change.b, 48)))
    return Group(*([table] if shown else []), *([Text(folded)] if folded else []))


class DiffScreen(ModalScreen[None]):
    """A DiffReport, with side a's traces for the equal text around the edits."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close", id="diff.close")]

    def __init__(self, report: DiffReport, a: dict[str, Trace]) -> None:
        super().__init__(id="diff")
        self.report = report
        self.a = a

    def compose(self) -> ComposeResult:
        report = self.report
        with VerticalScroll(id="diff-body"):
            same_run = report.a_label == report.b_label
            if same_run:
                title = f"Diff — panes of {report.a_label}"
            else:
                title = f"Diff — a: {report.a_label} · b: {report.b_label}"
            yield Static(literal(title, one_line=True), classes="dialog-title")
            yield TokenDiff(LEGEND, id="diff-legend")
            if report.changes:
                yield Static(changes_table(report), id="diff-changes")
            elif not same_run:
                yield Static("same settings and machine", id="diff-changes")
            for i, pane in enumerate(report.panes):
                verdict = "-identical" if pane.identical else "-different"
                yield Static(literal(pane.summary()), id=f"diff-verdict-{i}",
                             classes=f"diff-verdict {verdict}")
                runs = inline_diff(self.a[pane.a_strategy], pane)
                if runs:
                    yield TokenDiff(runs, id=f"diff-tokens-{i}", classes="diff-tokens")
                yield Static(stats_grid(pane), id=f"diff-stats-{i}")
        yield FittingFooter()
