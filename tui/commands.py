"""specdeck's own commands in the command palette (ctrl+p).

The commands are read from the bindings active on the screen the palette was opened
from (their description, key and tooltip, which is each binding's help line), so an
action bound later with a help line appears here without touching this module; bindings
disabled there (``check_action``) and those without a help line (Textual's focus keys,
scrolling keys) are left out. The strategy presets follow: each measures another set
of strategies live.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.markup import escape

if TYPE_CHECKING:
    from specdeck.tui.app import SpecdeckApp

#: Strategy presets: what the palette calls them, and the strategies they run.
STRATEGY_PRESETS: dict[str, tuple[str, ...]] = {
    "plain vs draft model": ("plain", "draft"),
    "plain, draft model and MTP": ("plain", "draft", "mtp"),
    "plain vs MTP": ("plain", "mtp"),
    "plain vs prompt lookup": ("plain", "ngram"),
    "all four strategies": ("plain", "draft", "mtp", "ngram"),
    "the draft model's k: auto, grow and pmin side by side": (
        "plain", "draft@auto", "draft@grow", "draft@pmin:0.6"),
}


class Command(NamedTuple):
    """One palette entry (its texts are plain: the palette reads help as markup, so it
    is escaped where it is shown)."""

    title: str
    help: str
    run: Callable[[], object]


class SpecdeckCommands(Provider):
    """The app's actions (from the bindings) and the strategy presets."""

    @property
    def specdeck(self) -> "SpecdeckApp":
        return self.app  # type: ignore[return-value]

    def commands(self) -> Iterator[Command]:
        """What the palette offers on the screen it was opened from."""
        seen: set[tuple[int, str]] = set()
        app = self.specdeck
        # The app's own first, specdeck's before Textual's for the same action (q before
        # ctrl+q); a binding without a help line (Textual's focus keys, a pane's
        # scrolling keys) is no command.
        bindings = sorted(self.screen.active_bindings.values(),
                          key=lambda active: (active.node is not app, not (
                              active.binding.id or "").startswith("specdeck.")))
        for active in bindings:
            binding = active.binding
            where = (id(active.node), binding.action)
            if binding.system or not binding.tooltip or not active.enabled or where in seen:
                continue
            seen.add(where)
            key = self.app.get_key_display(binding)
            yield Command(f"{binding.description} ({key})", binding.tooltip,
                          partial(active.node.run_action, binding.action))
        if app.request is not None and self.screen is app.screen_stack[0]:
            for name, strategies in STRATEGY_PRESETS.items():
                yield Command(f"strategies: {name}",
                              f"measure {', '.join(strategies)} live with the current settings",
                              partial(app.use_strategies, list(strategies)))

    async def discover(self) -> Hits:
        for command in self.commands():
            yield DiscoveryHit(Content(command.title), command.run, help=escape(command.help))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self.commands():
            score = matcher.match(command.title)
            if score > 0:
                yield Hit(score, matcher.highlight(command.title), command.run,
                          help=escape(command.help))
