"""The playground's keys, each with an id and a help line."""

from __future__ import annotations

from textual.app import App
from textual.binding import Binding

#: Keys that share one label in the footer (``n b Step/back``): sixteen bindings, each
#: with its own, did not fit 80 columns.
STEPPING = Binding.Group("Step/back")
SPEED = Binding.Group("Speed")
DRAFTS = Binding.Group("k∓1")

#: Each binding's tooltip is its help line (the footer's hover, the help screen and
#: the command palette show it). The footer shows as many as fit whole, in this
#: order (``tui.fitting_footer``): ``?`` first, then the keys that watch and teach
#: a run; the help screen lists every one.
PLAYGROUND_KEYS: list[Binding] = [
    Binding("question_mark,f1", "help", "Help", key_display="?", id="specdeck.help",
            tooltip="every key, and what the token styles mean"),
    Binding("space", "pause", "Pause", key_display="space", id="specdeck.pause",
            tooltip="hold the panes still (a live run goes on being measured)"),
    Binding("n", "step", "Step", id="specdeck.step", group=STEPPING,
            tooltip="show one more round in the focused pane (tab moves focus)"),
    Binding("b", "back", "Back", id="specdeck.back", group=STEPPING,
            tooltip="show one round fewer in the focused pane"),
    Binding("i", "inspector", "Inspect", id="specdeck.inspector",
            tooltip="the round inspector: drafts, q and p, why each was accepted, "
            "alternatives, rollback"),
    Binding("k", "cost_view", "Why this k", id="specdeck.cost_view",
            tooltip="what a round costs, the expected tokens per k and the best k"),
    Binding("x", "toggle_rejected", "Rejected", id="specdeck.toggle_rejected",
            tooltip="hide or show rejected drafts"),
    Binding("g", "race", "Race", id="specdeck.race",
            tooltip="replay every pane from its own t = 0 on one clock: their true "
            "relative speed"),
    Binding("r", "restart", "Restart", id="specdeck.restart",
            tooltip="measure every strategy again (a saved session: race it again)"),
    Binding("c", "cancel", "Cancel", id="specdeck.cancel",
            tooltip="stop the run at once, keeping what streamed (saved as a partial "
            "session), or stop the race"),
    # A priority key: its dialog opens before the keys typed after it are handed
    # on, so a burst ("s", tabs, a value) lands in the dialog's fields.
    Binding("s", "settings", "Settings", id="specdeck.settings", priority=True,
            tooltip="prompt, models, strategies, k, depth, n, sampling, max tokens, seed"),
    Binding("o", "sessions", "Sessions", id="specdeck.sessions",
            tooltip="saved runs and sweeps: open, rename, delete, diff two"),
    Binding("minus", "slower", "Slower", key_display="-", id="specdeck.slower", group=SPEED,
            tooltip="race slower (down to 0.25x)"),
    Binding("plus,equals_sign", "faster", "Faster", key_display="+", id="specdeck.faster",
            group=SPEED,
            tooltip="race faster (up to 10x)"),
    Binding("left_square_bracket", "fewer_drafts", "k-1", key_display="[", group=DRAFTS,
            id="specdeck.fewer_drafts", tooltip="one draft fewer per round, and measure again"),
    Binding("right_square_bracket", "more_drafts", "k+1", key_display="]", group=DRAFTS,
            id="specdeck.more_drafts", tooltip="one draft more per round, and measure again"),
    Binding("q", "quit", "Quit", id="specdeck.quit", tooltip="leave specdeck"),
    Binding("j", "jump", "Jump to round", show=False, id="specdeck.jump",
            tooltip="go to a round by its number"),
    Binding("d", "diff_panes", "Diff panes", show=False, id="specdeck.diff_panes",
            tooltip="diff the focused pane with the first: first divergence, token "
            "edits, statistics side by side"),
    Binding("p", "toggle_prompt", "Prompt", show=False, id="specdeck.prompt",
            tooltip="show the whole prompt, or only its first line"),
    Binding("l", "toggle_link", "Link scroll", show=False, id="specdeck.link_scroll",
            tooltip="scroll every pane together, to the same token position "
            "(up, down, page up/down, home, end scroll the focused pane)"),
    Binding("w", "glossary", "Glossary", show=False, id="specdeck.glossary",
            tooltip="the words of speculative decoding, as specdeck uses them"),
    # Textual's own, given an id and a help line (it then adds none); the footer
    # shows it on its right as "^p palette".
    Binding(App.COMMAND_PALETTE_BINDING, "command_palette", "palette", show=False,
            priority=True, id="specdeck.palette",
            tooltip="every action by name, with its key and help line; the strategy "
            "presets; a screenshot"),
]
