"""How a saved session reads in the session browser: its row's settings and note, and
the preview beside the list, from the file's header and saved statistics alone."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from specdeck.engines.core.formatting import byte_size, format_stat, plural
from specdeck.safe_text.rich_text import literal
from specdeck.sessions.store import SessionSummary
from specdeck.tui.pane import pane_detail

#: Prompt lines shown in the preview, and characters of each (a line may be megabytes).
PROMPT_LINES = 6
PROMPT_LINE_CHARS = 500
#: Preview columns: (statistic, heading).
PREVIEW_STATS = (("generated_tokens", "tokens"), ("tokens_per_s", "tok/s"),
                 ("acceptance_rate", "accepted"), ("speedup_vs_plain", "vs plain"),
                 ("finish_reason", "end"))


def note(summary: SessionSummary) -> str:
    """The list's last column: what is wrong with a file, or that it was cut short."""
    if summary.problem:
        return "unreadable"
    return "partial" if summary.partial else ""


def setup(summary: SessionSummary) -> str:
    """The list's settings column: what tells runs apart (k=2 from k=16), or a sweep's
    size."""
    if summary.sweep is not None:
        return f"sweep · {plural(len(summary.sweep.cells), 'cell')}"
    # Once each: a chain's "n=3 k=2" repeats ngram's n and draft's k. A setting named
    # again with another value says whose it is, as its flag does (ngram-k=4 beside k=2).
    shown: dict[str, str] = {}
    for name in summary.strategies:
        for word in pane_detail(name, summary.settings).split():
            key = word.partition("=")[0]
            if shown.setdefault(key, word) != word:
                shown[f"{name}-{key}"] = f"{name}-{word}"
    return " ".join(shown.values())


def sweep_preview(summary: SessionSummary) -> list:
    """A sweep's preview: what it measured, and its recommendations."""
    sweep = summary.sweep
    settings = sorted({f"{c['strategy']} {c['label']}" for c in sweep.cells
                       if c["strategy"] != "plain"})
    prompts = sorted({c["prompt"] for c in sweep.cells})
    return [
        Text(f"sweep of {plural(len(sweep.cells), 'cell')} · enter: the sweep view",
             style="bold"),
        literal("prompts: " + ", ".join(prompts), one_line=True),
        literal("settings: " + ", ".join(settings), one_line=True),
        Text(""),
        literal("\n".join(sweep.recommendations) or "no recommendations"),
    ]


def preview(summary: SessionSummary) -> Group:
    """What the preview pane shows for one file, from its header and saved statistics."""
    head = Text.assemble(literal(summary.path.name, "bold", one_line=True),
                         f"   {byte_size(summary.size_bytes)}")
    parts: list = [head]
    if summary.problem:
        parts.append(literal(f"cannot open it: {summary.problem}", "bold"))
        return Group(*parts)
    if summary.created:
        parts.append(literal(f"created {summary.created}", one_line=True))
    if summary.partial:
        parts.append(Text("partial: the run was cut short", style="bold"))
    if summary.sweep is not None:
        return Group(*parts, *sweep_preview(summary))
    models = [f"{role} {name}" for role, name in (("target", summary.target),
                                                  ("draft", summary.draft)) if name]
    if models:
        parts.append(literal(" · ".join(models), one_line=True))
    if summary.strategies:
        table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
        table.add_column("strategy")
        for _, heading in PREVIEW_STATS:
            table.add_column(heading, justify="right")
        for name, stats in summary.strategies.items():
            table.add_row(literal(name, one_line=True),
                          *(literal(format_stat(key, stats.get(key)), one_line=True)
                            for key, _ in PREVIEW_STATS))
        parts += [Text(""), table]
    if summary.prompt is not None:
        lines = summary.prompt.splitlines() or [""]
        shown = "\n".join(line[:PROMPT_LINE_CHARS] for line in lines[:PROMPT_LINES])
        hidden = len(lines) - PROMPT_LINES
        more = f"\n… {plural(hidden, 'more line')}" if hidden > 0 else ""
        parts += [Text(""), Text("prompt", style="bold"), literal(shown + more)]
    return Group(*parts)
