"""The settings dialog: prompt, models, strategies and decoding settings, without leaving.

It edits a copy of the comparison request; the engine's own validation decides what is
allowed, and its message is shown in the dialog instead of closing it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static, TextArea

from specdeck.engines.core.config import field_default, parse_draft_count
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.models.families import member_of
from specdeck.engines.core.requests import CompareRequest, GroupSpec
from specdeck.safe_text.rich_text import literal
from specdeck.prompts import load_prompts
from specdeck.tui.model_picker import ROLES, ModelPicker
from specdeck.safe_text.tui import ControlPictures
from specdeck.safe_text.plain import pictured
from specdeck.tui.fields import Field, TextField
from specdeck.tui.fitting_footer import FittingFooter

#: Form fields: (id, label, how to read it).
NUMBERS = (
    ("k", "k (drafts per round)", parse_draft_count),
    ("mtp_depth", "MTP depth", parse_draft_count),
    ("ngram_n", "n-gram n", int),
    ("temperature", "temperature", float),
    ("top_p", "top-p", float),
    ("max_tokens", "max tokens", int),
    ("seed", "seed", int),
    ("repeats", "repeats (median of)", int),
)


#: Group fields: (id, label). The split is empty (the target whole in one process),
#: tensor or pipeline; hosts are comma-separated, or an mlx.launch hostfile (.json).
GROUP_FIELDS = (
    ("shard", "split (tensor, pipeline)"),
    ("ranks", "ranks"),
    ("hosts", "hosts or hostfile"),
    ("backend", "backend"),
)


def group_values(group: GroupSpec | None) -> dict[str, str]:
    """A group as the dialog's text fields (empty split: none)."""
    if group is None:
        return {"shard": "", "ranks": "", "hosts": "", "backend": ""}
    return {"shard": group.shard, "ranks": str(group.ranks),
            "hosts": group.hostfile or ",".join(group.hosts), "backend": group.backend}


def group_from_form(values: dict[str, str]) -> GroupSpec | None:
    """The group the dialog's fields ask for; SettingsError names a bad field."""
    shard = values["shard"].strip()
    if not shard:
        return None
    places = values["hosts"].strip()
    hostfile = places if places.endswith(".json") else None
    hosts = () if hostfile else tuple(h.strip() for h in places.split(",") if h.strip())
    try:
        ranks = int(values["ranks"].strip() or len(hosts) or 2)
    except ValueError:
        raise SettingsError(f"ranks must be a whole number (got {values['ranks']!r})") from None
    backend = values["backend"].strip() or field_default(GroupSpec, "backend")
    return GroupSpec(shard=shard, backend=backend, hosts=hosts, hostfile=hostfile,
                     ranks=ranks)


def form_values(request: CompareRequest) -> dict[str, str]:
    """The request as the dialog's text fields."""
    s = request.settings
    values = {
        "target": request.target,
        "draft": request.draft or "",
        "strategies": ",".join(request.strategies),
        "prompt": request.prompt,
        "k": str(s.num_draft_tokens),
        "mtp_depth": str(s.mtp_depth),
        "ngram_n": str(s.ngram_n),
        "temperature": str(s.sampling.temperature),
        "top_p": str(s.sampling.top_p),
        "max_tokens": str(s.max_tokens),
        "seed": str(s.sampling.seed),
        "repeats": str(request.repeats),
        "mtp_model": request.mtp_model or "",
        **group_values(request.group),
    }
    return values


def apply_form(request: CompareRequest, values: dict[str, str]) -> CompareRequest:
    """A new request from the dialog's fields; SettingsError names a bad field."""
    numbers = {}
    for key, label, kind in NUMBERS:
        try:
            numbers[key] = kind(values[key].strip())
        except ValueError:
            noun = {int: "a whole number", float: "a number"}.get(kind, "a number, auto, grow or pmin:P")
            raise SettingsError(f"{label} must be {noun} (got {values[key]!r})") from None
    settings = replace(
        request.settings,
        max_tokens=numbers["max_tokens"],
        num_draft_tokens=numbers["k"],
        mtp_depth=numbers["mtp_depth"],
        ngram_n=numbers["ngram_n"],
        sampling=replace(
            request.settings.sampling,
            temperature=numbers["temperature"],
            top_p=numbers["top_p"],
            seed=numbers["seed"],
        ),
    )
    changes = dict(
        target=values["target"].strip(),
        draft=values["draft"].strip() or None,
        mtp_model=values["mtp_model"].strip() or None,
        strategies=[s.strip() for s in values["strategies"].split(",") if s.strip()],
        prompt=values["prompt"],
        settings=settings,
        group=group_from_form(values),
        repeats=numbers["repeats"],
    )
    if not changes["target"]:
        raise SettingsError("the target model is empty")
    if len(changes["strategies"]) > 4:
        raise SettingsError("choose at most four strategies")
    new = replace(request, **changes)
    new.validate()
    return new


class FormBody(VerticalScroll, can_focus=False):
    """The dialog's body: it scrolls to the focused field (a short terminal shows part of
    the form) and never takes the focus itself, so tab goes from field to field."""


class SettingsScreen(ModalScreen[CompareRequest | None]):
    """Edit and apply (ctrl+s) or leave unchanged (escape). The form scrolls to the
    focused field, and a refused value is said at the top, in view; under 100 columns
    the fields go in one column (``-narrow``)."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]

    #: The first field is focused by ``on_mount``, once and without scrolling the form
    #: to it: a later focus (a click, a test) is never scrolled back.
    AUTO_FOCUS = None

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Cancel", id="settings.cancel"),
        Binding("ctrl+s", "apply", "Apply and restart", id="settings.apply"),
        # Before the key reaches a field: the focus moves at once, so the keys typed
        # after a tab in one burst go to the next field (Textual's own tab moves it
        # only once the key has bubbled up, after those keys went to the old field).
        Binding("tab", "app.focus_next", "Next field", show=False, priority=True,
                id="settings.next"),
        Binding("shift+tab", "app.focus_previous", "Previous field", show=False,
                priority=True, id="settings.previous"),
    ]

    def __init__(self, request: CompareRequest,
                 title: str = "Settings — ctrl+s applies and restarts") -> None:
        super().__init__(id="settings")
        self.request = request
        self.title_text = title
        self.prompts = load_prompts()

    def on_mount(self) -> None:
        # At once (``focus`` waits a turn): keys typed right after the dialog opened
        # go to the field, not to a dialog with nothing focused yet.
        self.set_focus(self.query_one("#prompt-picker", Select), scroll_visible=False)
        # The form's first layout scrolls it to the prompt picker (the title and the
        # error line above it out of view, in a form taller than the screen): back to
        # the top once it is laid out, or to the field keys typed at once went to.
        self.call_after_refresh(self._first_view)

    def _first_view(self) -> None:
        body, focused = self.query_one(FormBody), self.focused
        if focused is None or focused.id == "prompt-picker":
            body.scroll_home(animate=False)
        else:
            body.scroll_to_widget(focused, animate=False)

    def compose(self) -> ComposeResult:
        values = form_values(self.request)
        current = next(
            (key for key, p in self.prompts.items() if p.text == self.request.prompt),
            Select.NULL,
        )
        with FormBody(id="settings-body"):
            yield Static(self.title_text, classes="dialog-title")
            yield Label("", id="settings-error")
            yield Select(
                [(f"{p.name} — {p.description}", key) for key, p in self.prompts.items()],
                prompt="built-in prompt (or write your own below)",
                value=current, id="prompt-picker",
            )
            # A TextArea sends its text to the terminal as it is: control characters
            # shown as pictures (the prompt stays as it was unless it is edited).
            yield TextField(pictured(values["prompt"]), id="prompt", soft_wrap=True)
            with Grid(id="settings-grid"):
                for key in ROLES:  # model fields: typed, or picked from the catalog
                    yield Label(key.replace("_", " "))
                    with Horizontal(classes="model-field"):
                        yield Field(values[key], id=key, highlighter=ControlPictures())
                        yield Button("pick", id=f"pick-{key}", classes="pick-model")
                yield Label("strategies")
                yield Field(values["strategies"], id="strategies",
                            highlighter=ControlPictures())
                for key, label, _ in NUMBERS:
                    yield Label(label)
                    yield Field(values[key], id=key, highlighter=ControlPictures())
                for key, label in GROUP_FIELDS:  # a target split over a group (mlx.launch)
                    yield Label(label)
                    yield Field(values[key], id=key, highlighter=ControlPictures())
            with Horizontal(id="settings-buttons"):
                yield Button("Apply and restart", id="apply", variant="primary")
                yield Button("Cancel", id="cancel")
        yield FittingFooter()

    @on(Select.Changed, "#prompt-picker")
    def _pick_prompt(self, event: Select.Changed) -> None:
        if event.value in self.prompts:
            self.query_one("#prompt", TextArea).text = self.prompts[event.value].text

    @on(Button.Pressed, ".pick-model")
    def _pick_model(self, event: Button.Pressed) -> None:
        role = (event.button.id or "").removeprefix("pick-")
        fields = {key: self.query_one(f"#{key}", Input).value for key in ROLES}

        def fill(value: str | None) -> None:
            if value is None:
                return
            self.query_one(f"#{role}", Input).value = value
            member = member_of(value) if role == "target" else None
            if member is not None:  # a family's target: its draft goes with it
                draft = Path(value).expanduser().resolve().parent / "draft"
                self.query_one("#draft", Input).value = str(draft)

        self.app.push_screen(ModelPicker(role, fields), fill)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#apply")
    def action_apply(self) -> None:
        values = {i.id: i.value for i in self.query(Input) if i.id}
        prompt = self.query_one("#prompt", TextArea).text
        values["prompt"] = (self.request.prompt if prompt == pictured(self.request.prompt)
                            else prompt)
        try:
            request = apply_form(self.request, values)
        except SettingsError as exc:
            error = self.query_one("#settings-error", Label)
            error.update(literal(f"⚠ {exc}"))
            error.add_class("-shown")
            self.query_one("#settings-body").scroll_home(animate=False)
            return
        self.dismiss(request)
