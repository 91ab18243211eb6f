"""The session browser: every saved run in the sessions directory, newest first, with a
preview (``tui.session_preview``); open one in the panes, rename it, delete it, or diff
it with another.

The file operations are ``specdeck.sessions.store``'s and the diff is ``specdeck.sessions.diff``'s;
this screen only puts a face on them. Nothing here needs mlx, so it works in a replay on
any machine.
"""

from __future__ import annotations

from pathlib import Path

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Static

from specdeck.sessions.diff import DiffError, diff_sessions
from specdeck.safe_text.rich_text import literal
from specdeck.sessions.session import SessionError, load_session
from specdeck.engines.core.formatting import plural
from specdeck.sessions.store import (
    SessionSummary,
    delete_session,
    examples_dir,
    list_sessions,
    rename_session,
)
from specdeck.tui.diff_screen import DiffScreen
from specdeck.tui.sweep_view import SweepScreen
from specdeck.safe_text.tui import ControlPictures
from specdeck.tui.fitting_footer import FittingFooter
from specdeck.tui.session_preview import note, preview, setup

#: Marks the session chosen as side a of a diff.
DIFF_MARK = "◆ a"
#: The key of the row that heads the examples' section.
EXAMPLES_ROW = "§examples"
#: The list's columns; and the fewest columns the session's name is cut to.
COLUMNS = ("", "session", "settings", "note")
MIN_NAME_WIDTH = 12


class RenameDialog(ModalScreen["Path | None"]):
    """A new name for one session file; a refused name is explained in the dialog."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="rename.cancel")]

    def __init__(self, path: Path) -> None:
        super().__init__(id="rename")
        self.path = path

    def compose(self) -> ComposeResult:
        with Vertical(id="rename-body", classes="dialog"):
            yield Static(literal(f"Rename {self.path.name}", one_line=True),
                         classes="dialog-title")
            yield Input(self.path.stem, id="rename-name", highlighter=ControlPictures())
            yield Label("", id="rename-error", markup=False)

    @on(Input.Submitted)
    def _rename(self, event: Input.Submitted) -> None:
        try:
            new = rename_session(self.path, event.value)
        except SessionError as exc:
            self.query_one("#rename-error", Label).update(literal(f"⚠ {exc}"))
            return
        self.dismiss(new)


class ConfirmDialog(ModalScreen[bool]):
    """Yes (y) or no (n, escape) to one question."""

    BINDINGS = [
        Binding("y", "dismiss(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "dismiss(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str, yes: str) -> None:
        super().__init__(id="confirm")
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-body", classes="dialog"):
            yield Static(literal(self.question, one_line=True), classes="dialog-title")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes} (y)", id="confirm-yes", variant="error")
                yield Button("Cancel (n)", id="confirm-no")

    @on(Button.Pressed)
    def _answer(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")


class SessionsTable(DataTable):
    """The list. Its columns are sized to its width (``SessionBrowser._column_widths``),
    which is known only once it is laid out, and changes with the screen or with the
    dialog's layout: each new width is said, to refill it."""

    class Resized(Message):
        """The table has a new width."""

    laid_width = 0

    def on_resize(self, event: Resize) -> None:
        if event.size.width != self.laid_width:
            self.laid_width = event.size.width
            self.post_message(self.Resized())


class SessionBrowser(ModalScreen["Session | None"]):
    """Saved sessions; dismissed with the session to open in the panes, or None."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    BINDINGS = [
        Binding("enter", "open", "Open", id="sessions.open"),
        Binding("f", "diff_with", "Diff with…", id="sessions.diff"),
        Binding("r", "rename", "Rename", id="sessions.rename"),
        # The footer shows the first key: d, the one the README names.
        Binding("d,delete", "delete", "Delete", id="sessions.delete"),
        Binding("escape,o,q", "close", "Close", key_display="esc", id="sessions.close"),
    ]

    def __init__(self, directory: Path) -> None:
        super().__init__(id="sessions")
        self.directory = Path(directory)
        #: Every file listed, by path: the directory's own first, then the examples.
        self.summaries: dict[str, SessionSummary] = {}
        self.own_count = 0
        #: Example sessions listed in a section of their own (None: none found).
        self.examples = examples_dir(self.directory)
        #: The session marked as side a of a diff (``f``), by path.
        self.marked: Path | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-body", classes="dialog"):
            yield Static(literal(f"Sessions in {self.directory}", one_line=True),
                         classes="dialog-title")
            with Horizontal(id="sessions-main"):
                yield SessionsTable(id="sessions-table", cursor_type="row")
                with VerticalScroll(id="session-preview-scroll"):
                    yield Static("", id="session-preview")
            yield Static("", id="sessions-status", markup=False)
        yield FittingFooter()

    def on_mount(self) -> None:
        self.reload()

    @on(SessionsTable.Resized)
    def _resized(self) -> None:
        current = self.current
        self._fill(current.path if current else None)

    # -- the list ----------------------------------------------------------------------

    def reload(self, select: Path | None = None) -> None:
        """List the directory again, keeping the cursor on ``select`` (or its row)."""
        summaries = list_sessions(self.directory)
        shipped = list_sessions(self.examples) if self.examples is not None else []
        self.summaries = {str(s.path): s for s in summaries + shipped}
        self.own_count = len(summaries)
        if self.marked is not None and str(self.marked) not in self.summaries:
            self.marked = None
        self._fill(select)

    def _column_widths(self, table: DataTable) -> list[int | None]:
        """Every column as wide as its widest cell, but the session's name, which takes
        the rest of the table's width and is cut with … (None: before the table is laid
        out, as wide as its cells)."""
        listed = self.summaries.values()
        mark, settings, notes = (max(map(cell_len, cells)) for cells in (
            (DIFF_MARK,), ("settings", *map(setup, listed)), ("note", *map(note, listed))))
        room = table.size.width - table.styles.scrollbar_size_vertical
        rest = room - mark - settings - notes - 2 * table.cell_padding * len(COLUMNS)
        return [mark, max(rest, MIN_NAME_WIDTH) if room > 0 else None, settings, notes]

    def _fill(self, select: Path | None = None) -> None:
        """The listed files in the table, the cursor on ``select`` (or its row)."""
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear(columns=True)
        for label, width in zip(COLUMNS, self._column_widths(table)):
            table.add_column(label, width=width)
        summaries = list(self.summaries.values())
        for summary in summaries[: self.own_count]:
            self._add_row(table, summary)
        shipped = summaries[self.own_count :]
        examples = self.examples
        if shipped:
            table.add_row("", Text(f"examples in {examples}", style="bold",
                                   overflow="ellipsis"), "", "", key=EXAMPLES_ROW)
            for summary in shipped:
                self._add_row(table, summary)
        keys = [r.key.value for r in table.ordered_rows]
        if select is not None and str(select) in keys:
            row = keys.index(str(select))
        if keys:
            table.move_cursor(row=min(row, len(keys) - 1))
        self._show_preview()
        self._show_status()

    def _add_row(self, table: DataTable, summary: SessionSummary) -> None:
        name = literal(summary.name, one_line=True)
        name.overflow = "ellipsis"  # its column gives way to the others
        table.add_row(self._mark(summary.path), name,
                      literal(setup(summary), one_line=True), note(summary),
                      key=str(summary.path))

    def _mark(self, path: Path) -> str:
        return DIFF_MARK if path == self.marked else ""

    @property
    def current(self) -> SessionSummary | None:
        """The highlighted session (None on the examples' heading)."""
        table = self.query_one(DataTable)
        if not table.row_count or table.cursor_row < 0:
            return None
        key = table.ordered_rows[min(table.cursor_row, table.row_count - 1)].key.value
        return self.summaries.get(key or "")

    @on(DataTable.RowHighlighted)
    def _show_preview(self) -> None:
        summary = self.current
        target = self.query_one("#session-preview", Static)
        if summary is not None:
            target.update(preview(summary))
            return
        nothing = (f"No sessions in {self.directory} yet: every run of specdeck compare "
                   "and of this app is saved there (--sessions-dir or "
                   "$SPECDECK_SESSIONS_DIR to look elsewhere).")
        if not self.summaries:
            target.update(literal(nothing))
        elif not self.own_count:
            target.update(literal(f"{nothing} Meanwhile, the examples below are recorded "
                                  "runs (the demo family, smollm2): enter opens one."))
        else:
            target.update(literal("Example sessions: recorded runs (the demo family, smollm2), to "
                                  "replay (enter) or diff with a run of yours (f)."))

    def _show_status(self) -> None:
        if self.marked is not None:
            text = (f"diff {self.marked.name} with…: enter or f on another (on itself: its "
                    "strategies against its first) · esc: unmark")
        else:
            examples = len(self.summaries) - self.own_count
            text = (f"{plural(self.own_count, 'session')}"
                    + (f" and {plural(examples, 'example')}" if examples else "")
                    + " · enter: open in the panes (a sweep: in the sweep view)")
        self.query_one("#sessions-status", Static).update(literal(text, one_line=True))

    def _readable(self) -> SessionSummary | None:
        summary = self.current
        if summary is None:
            self.notify("no session to act on")
        elif summary.problem:
            self.notify(summary.problem, severity="error")  # it names the file
            return None
        return summary

    # -- actions -----------------------------------------------------------------------

    @on(DataTable.RowSelected)
    def action_open(self) -> None:
        """Open the highlighted session, or diff it with the marked one."""
        if self.marked is not None:
            self.action_diff_with()
            return
        summary = self._readable()
        if summary is None:
            return
        if summary.sweep is not None:
            self.app.push_screen(SweepScreen(summary.sweep))
            return
        try:
            session = load_session(summary.path)
        except SessionError as exc:
            self.notify(str(exc), severity="error")
            return
        self.dismiss(session)

    def action_diff_with(self) -> None:
        """First press: mark side a. Second press (or enter): diff it with the highlighted."""
        summary = self._readable()
        if summary is None:
            return
        if self.marked is None:
            self.marked = summary.path
            self.reload(select=summary.path)
            return
        a_path, self.marked = self.marked, None
        self.reload(select=summary.path)
        if summary.sweep is not None or self.summaries[str(a_path)].sweep is not None:
            self.notify("sweeps are compared cell by cell with specdeck diff A.json B.json")
            return
        try:
            a = load_session(a_path)
            b = a if summary.path == a_path else load_session(summary.path)
            report = diff_sessions(a, b, a_label=a_path.name, b_label=summary.path.name)
        except (SessionError, DiffError) as exc:
            self.notify(str(exc), severity="error")
            return
        self.app.push_screen(DiffScreen(report, a.traces))

    def action_rename(self) -> None:
        summary = self.current
        if summary is None:
            self.notify("no session to rename")
            return

        def renamed(path: Path | None) -> None:
            if path is not None:
                if self.marked == summary.path:
                    self.marked = path
                self.reload(select=path)
                self.notify(f"renamed to {path.name}")

        self.app.push_screen(RenameDialog(summary.path), renamed)

    def action_delete(self) -> None:
        summary = self.current
        if summary is None:
            self.notify("no session to delete")
            return

        def confirmed(yes: bool | None) -> None:
            if not yes:
                return
            try:
                delete_session(summary.path)
            except SessionError as exc:
                self.notify(str(exc), severity="error")
                return
            self.reload()
            self.notify(f"deleted {summary.path.name}")

        self.app.push_screen(
            ConfirmDialog(f"Delete {summary.path.name}? This cannot be undone.", "Delete"),
            confirmed,
        )

    def action_close(self) -> None:
        """Unmark the diff's side a first; otherwise leave the browser."""
        if self.marked is not None:
            self.marked = None
            self.reload()
        else:
            self.dismiss(None)
