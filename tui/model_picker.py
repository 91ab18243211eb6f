"""The model picker: the models ``specdeck models`` lists (the Hugging Face cache, the
demo family, and the directories already in the settings), to fill a settings field.

For a draft (or an MTP model) the target's tokenizer decides: models sharing its
fingerprint share its token ids and come first, marked ``suggested`` (smaller than the
target, smallest first, as ``engines.catalog.suggest_drafts`` orders them); the others
are marked ``incompatible`` (the run would refuse them). Where ``specdeck models
--rank-drafts`` has ranked the target's drafts on this machine, the drafts it probed come
first instead, in its order, marked with their place and predicted speedup
(``engines.draft_ranking``: read from the cache, never computed here). The catalog reads
files only: the scan runs in a worker thread so a large cache never blocks the app, and
nothing touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.cells import cell_len
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Static

from specdeck.engines.models.catalog import ModelInfo, describe_dir, find_models, suggest_drafts
from specdeck.engines.measure.draft_ranking import DraftRanking, RankedDraft, load_ranking
from specdeck.engines.core.errors import ModelError
from specdeck.engines.models.families import family_roots, named_by_family
from specdeck.engines.core.formatting import byte_size, parameters_text, plural, quant_text, times
from specdeck.safe_text.rich_text import literal

#: The settings fields the picker fills, and what they are called in its title.
ROLES = {"target": "target model", "draft": "draft model", "mtp_model": "MTP model"}
#: ``fit``: the mark (suggested, same tokenizer, incompatible, ...); every column is
#: labelled, so no header stands over another column's values.
COLUMNS = ("fit", "model", "arch", "params", "quant", "disk", "hybrid", "MTP", "tokenizer")


@dataclass(frozen=True, slots=True)
class Choice:
    """One row of the picker: a model and what it is for the field being filled."""

    model: ModelInfo
    #: ``suggested``, ``same tokenizer``, ``no MTP head``, ``incompatible`` or
    #: ``tokenizer unknown`` for draft and MTP models (``#1 1.21x k=3`` for a ranked
    #: draft); empty for the target.
    mark: str

    @property
    def value(self) -> str:
        """What goes into the settings field: the hub id of a cached model, else its path."""
        return self.model.name if self.model.source == "hub" else str(self.model.path)


def _same(a: ModelInfo, b: ModelInfo) -> bool:
    return a.path.resolve() == b.path.resolve()


def match_target(field: str, models: list[ModelInfo]) -> ModelInfo | None:
    """The listed model the target field names (a hub id or a directory), else the
    directory described from its files, else None."""
    field = field.strip()
    path = Path(field).expanduser()
    for m in models:
        if m.name == field or (path.is_dir() and m.path.resolve() == path.resolve()):
            return m
    try:
        return describe_dir(path) if path.is_dir() else None
    except ModelError:
        return None


def ranked_mark(place: int, draft: RankedDraft) -> str:
    """A ranked draft's mark: its place and predicted speedup (``#1 1.21x k=3``)."""
    return f"#{place} {times(draft.speedup)}" + (f" k={draft.best_k}" if draft.best_k
                                                   else " plain wins")


def rank_choices(role: str, models: list[ModelInfo], target: ModelInfo | None,
                 ranking: DraftRanking | None = None) -> list[Choice]:
    """The picker's rows for ``role`` (a key of ``ROLES``), best first; for a draft, the
    models ``ranking`` (the target's cached draft ranking) probed lead, in its order."""
    if role == "target":
        return [Choice(m, "") for m in models]
    if target is None or target.tokenizer is None:
        return [Choice(m, "tokenizer unknown") for m in models]
    shared = [m for m in models if m.tokenizer == target.tokenizer]
    ranked: list[tuple[int, Choice]] = []
    if role == "draft":
        for m in shared:
            found = ranking.find(m.path) if ranking is not None else None
            if found is not None:
                ranked.append((found[0], Choice(m, ranked_mark(*found))))
        ranked.sort(key=lambda pair: pair[0])
        unranked = [m for m in shared if not any(_same(m, c.model) for _, c in ranked)]
        first = suggest_drafts(target, unranked)
        rest_mark = "same tokenizer"
    else:
        unranked = shared
        first = [m for m in shared if m.has_mtp_head]
        rest_mark = "no MTP head"
    rest = [m for m in unranked if not any(_same(m, f) for f in first)]
    others = [m for m in models if m.tokenizer != target.tokenizer]
    return ([c for _, c in ranked] + [Choice(m, "suggested") for m in first]
            + [Choice(m, rest_mark) for m in rest]
            + [Choice(m, "incompatible" if m.tokenizer else "tokenizer unknown")
               for m in others])


def catalog_dirs(fields: dict[str, str]) -> list[Path]:
    """Where to look besides the Hugging Face cache: the model families here (the demo
    family, smollm2 once fetched) and every settings field that names a model directory."""
    dirs = list(family_roots().values())
    for value in fields.values():
        path = Path(value.strip()).expanduser() if value.strip() else None
        if path is not None and (path / "config.json").is_file():
            dirs.append(path)
    return dirs


def list_models(fields: dict[str, str],
                on_problem: Callable[[ModelError], None] | None = None) -> list[ModelInfo]:
    """``find_models`` over ``catalog_dirs`` and the cache, each model once; a family's
    members named by family (``smollm2 target``), not by their folders' names. A folder
    that cannot be listed raises ModelError, or goes to ``on_problem`` when given."""
    return named_by_family(find_models(catalog_dirs(fields), on_problem=on_problem))


def _row(choice: Choice) -> tuple[str, ...]:
    m = choice.model
    return (
        choice.mark, m.name, m.model_type, parameters_text(m.parameters), quant_text(m),
        byte_size(m.size_on_disk), "yes" if m.hybrid else "", "yes" if m.has_mtp_head else "",
        m.tokenizer or "?",
    )


class ModelPicker(ModalScreen["str | None"]):
    """Pick a model for ``role``; enter picks the highlighted row, escape cancels."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="picker.cancel")]

    class Scanned(Message):
        """The catalog, ranked for the field (or the error that stopped the scan), and
        the cached draft ranking it used (None: none)."""

        def __init__(self, choices: list[Choice], error: str | None,
                     ranking: DraftRanking | None = None) -> None:
            super().__init__()
            self.choices = choices
            self.error = error
            self.ranking = ranking

    def __init__(self, role: str, fields: dict[str, str]) -> None:
        """``fields``: the settings' model fields as they are now (``target``, ``draft``,
        ``mtp_model``); the target's decides which drafts are compatible."""
        super().__init__(id="model-picker")
        self.role = role
        self.fields = fields
        self.choices: list[Choice] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-body"):
            hint = "" if self.role == "target" else (
                " — models sharing the target's tokenizer first")
            yield Static(f"Pick the {ROLES[self.role]}{hint}", classes="dialog-title")
            yield Static("scanning the Hugging Face cache and model folders…",
                         id="picker-status")
            table: DataTable = DataTable(id="picker-table", cursor_type="row")
            table.add_columns(*COLUMNS)
            yield table
            with Horizontal(id="picker-buttons"):
                yield Button("Pick", id="pick", variant="primary")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self._scan()

    @work(thread=True, exclusive=True, group="catalog")
    def _scan(self) -> None:
        """Worker thread: read the catalog (files only); a message, not a call, brings
        the rows back, so a picker closed meanwhile just drops them."""
        ranking, skipped = None, []
        try:
            models = list_models(self.fields, skipped.append)
            target = match_target(self.fields.get("target", ""), models)
            if self.role == "draft" and target is not None:
                ranking = load_ranking(target.path)  # a cached file: no token computed
            choices = rank_choices(self.role, models, target, ranking)
            error = "; ".join(map(str, skipped)) or None  # the others are still listed
        except ModelError as exc:
            choices, error = [], str(exc)
        self.post_message(self.Scanned(choices, error, ranking))

    @on(Scanned)
    def _show(self, message: Scanned) -> None:
        choices, error = message.choices, message.error
        self.choices = choices
        table = self.query_one("#picker-table", DataTable)
        rows = [[literal(value, one_line=True) for value in _row(c)] for c in choices]
        # Widths given with the rows: a DataTable measures added rows only when idle,
        # and a frame drawn before that keeps the heading at the labels' widths (its
        # cached line outlives the measuring), askew over the rows for good.
        table.clear(columns=True)
        for index, label in enumerate(COLUMNS):
            table.add_column(label, width=max(
                [cell_len(label), *(row[index].cell_len for row in rows)]))
        table.add_rows(rows)
        status = self.query_one("#picker-status", Static)
        if error:
            status.update(literal(f"⚠ {error}"))
        elif not choices:
            status.update("no models found (name one by its directory in the field instead)")
        else:
            suggested = sum(c.mark == "suggested" for c in choices)
            text = plural(len(choices), "model") + (
                "" if self.role == "target" else f", {suggested} suggested")
            if message.ranking is not None:
                ranked = sum(c.mark.startswith("#") for c in choices)
                text += (f", {ranked} ranked by a probe on this machine "
                         f"({message.ranking.measured[:10]}; predicted speedup at the best k)")
            elif self.role == "draft":
                text += "; specdeck models --rank-drafts TARGET ranks them on this machine"
            status.update(literal(text))
        table.focus()

    @on(DataTable.RowSelected, "#picker-table")
    @on(Button.Pressed, "#pick")
    def _pick(self) -> None:
        row = self.query_one("#picker-table", DataTable).cursor_row
        if 0 <= row < len(self.choices):
            self.dismiss(self.choices[row].value)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)
