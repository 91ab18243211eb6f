"""What a shared page shows of a session, a sweep or a diff, as plain JSON data.

The page's script draws this with ``textContent`` only; every string from the file
passes through ``specdeck.safe_text.plain`` here first, so control characters read as symbols in
the browser as in the app. The words are the app's and the CLI's own (the inspector's
verdict and reasons, the legend's labels, the statistics as ``replay --headless`` prints
them), never a second wording of them.
"""

from __future__ import annotations

import base64
from typing import Any

from specdeck.sessions.chart import speedup_chart_svg
from specdeck.sessions.diff import DiffReport, quoted
from specdeck.engines.core.events import Round, Trace
from specdeck.engines.core.formatting import (
    MISSING, duration, format_stat, ordinal, percent, plural, rate, setting_text,
    stats_table, times,
)
from specdeck.engines.distributed.costs import describe_group
from specdeck.engines.core.stats import plain_step_seconds
from specdeck.sessions.playback import SPEEDS, Schedule, finish_places, stretch_for
from specdeck.sessions.session import Session
from specdeck.sessions.sweep_file import COLUMNS, Sweep, cell_row, why_lines
from specdeck.tui.inspector import explain_round, verdict
from specdeck.tui.legend import LABELS
from specdeck.tui.pane import pane_detail
from specdeck.tui.token_view import KINDS, REJECTED_NEWLINE, round_tokens
from specdeck.safe_text.plain import printable, visible

#: The detail table's columns; the page gives each cell the class ``col-<key>``.
DETAIL_COLUMNS = (("pos", "pos"), ("token", "token"), ("kind", "verdict"), ("q", "q draft"),
                  ("p", "p target"), ("u", "u"), ("bound", "min(1, p/q)"), ("why", "why"))


def _table(title: str, columns: list[str], rows: list[list[Any]],
           classes: list[str] | None = None) -> dict:
    """A table section; its title and every cell shown as one line of visible text;
    ``classes``: a class for each column's cells (the app's styles)."""
    return {"type": "table", "title": visible(title), "columns": [visible(c) for c in columns],
            "rows": [[visible(str(cell)) for cell in row] for row in rows],
            "classes": classes}


def _lines(title: str, lines: list[str]) -> dict:
    return {"type": "lines", "title": visible(title),
            "lines": [printable(line) for line in lines]}


def _number(value: float | None) -> str:
    return MISSING if value is None else f"{value:.3f}"


def round_detail(strategy: str, event: Round, number: int, total: int,
                 plain_step: float | None) -> list:
    """One round as the inspector explains it: its verdict lines (what lived, how it
    ended, the rollback), a row per verified position (token, verdict, q, p, the uniform
    u it was tested against and min(1, p/q), why), and what the round cost."""
    rows = []
    for row in explain_round(event, lambda token: None):
        i = row.position - 1
        drafted = row.kind in ("accepted", "rejected", "unchecked")
        u = event.uniforms[i] if drafted and event.uniforms and i < len(event.uniforms) else None
        bound = (min(1.0, row.p / row.q) if row.q else 1.0) if (
            drafted and row.p is not None and row.q is not None) else None
        rows.append([str(row.position), row.token, row.kind, _number(row.q), _number(row.p),
                     _number(u), _number(bound), row.reason])
    spent = event.draft_seconds + event.verify_seconds
    cost = (f"cost: draft {duration(event.draft_seconds)} + verify "
            f"{duration(event.verify_seconds)} = {duration(spent)} for "
            f"{plural(len(event.tokens), 'token')}")
    if plain_step:
        cost += f" ({spent / plain_step:.2f} plain steps)"
    return [printable(verdict(strategy, event, number, total)).split("\n"), rows, cost]


def _shown(text: str, kind: str) -> str:
    """A token's text as a pane shows it (a rejected draft's newline as ``⏎``)."""
    text = printable(text)
    return text.replace("\n", REJECTED_NEWLINE) if kind == "rejected" else text


def _pane(session: Session, name: str, trace: Trace, times_: list[float], place: int | None,
          stats: dict, plain_step: float | None) -> dict:
    rounds = trace.rounds
    shown = []
    for event, t in zip(trace.events, times_):
        if isinstance(event, Round):
            tokens = [[_shown(text, kind), KINDS.index(kind)]
                      for text, kind in round_tokens(event, name == "chain")]
            detail = round_detail(visible(name), event, len(shown), len(rounds), plain_step)
            shown.append([round(t, 6), tokens, detail])
    done = trace.done
    end = times_[-1] if times_ else 0.0
    reason = ((done.reason + (f": {done.error}" if done.error else "")) if done
              else "no end recorded")
    finish = (f"{ordinal(place)} · finished at {duration(end)}" if place else "")
    if reason not in ("length", "stop"):
        finish = f"{finish} · {reason}" if finish else reason
    figures = [rate(stats.get("tokens_per_s"))]
    if stats.get("speedup_vs_plain") is not None and name != "plain":
        figures.append(f"{times(stats['speedup_vs_plain'])} plain")
    if stats.get("acceptance_rate") is not None:
        figures.append(f"accept {percent(stats['acceptance_rate'])}")
    figures.append(plural(stats.get("generated_tokens") or 0, "token"))
    return {
        "title": visible(f"{name} {pane_detail(name, session.settings)}".strip()),
        "rounds": shown,
        "tail": printable(done.tail) if done else "",
        "end": round(end, 6),
        "finish": visible(finish),
        "summary": " · ".join(figures),
    }


def _session_meta(session: Session) -> list[str]:
    config, machine = session.config, session.machine
    lines = [f"{session.created}  {session.kind}"
             + ("  partial: the run was cut short" if session.partial else "")]
    models = ", ".join(f"{role} {model['source']}" for role in ("target", "draft")
                       if isinstance(model := config.get(role), dict)
                       and isinstance(model.get("source"), str))
    if models:
        lines.append(models)
    if machine.get("chip") or machine.get("os"):
        lines.append(f"on {machine.get('chip', '?')}, {machine.get('os', '?')}")
    group = describe_group(config.get("group"))
    if group:
        lines.append(group)
    return [visible(line) for line in lines]


def session_page(session: Session, title: str) -> dict:
    """A session: the prompt, a pane per strategy with every round and its detail, the
    race's timing and the statistics side by side."""
    schedule = Schedule.of(session.traces)
    places = finish_places(schedule.ends)
    stats = session.stats()
    plain_step = plain_step_seconds((stats.get("plain") or {}).get("tokens_per_s"))
    chained = "chain" in session.traces
    keys = list(next(iter(stats.values()), {}))
    return {
        "title": visible(title),
        "meta": _session_meta(session),
        "prompt": printable(session.prompt) if session.prompt is not None else None,
        "kinds": list(KINDS),
        "legend": [[KINDS.index(kind), LABELS[kind]] for kind in KINDS
                   if kind != "copied" or chained],
        "race": {"duration": schedule.duration, "stretch": stretch_for(schedule.duration),
                 "speeds": list(SPEEDS)},
        "panes": [_pane(session, name, trace, schedule.times[name], places.get(name),
                        stats[name], plain_step)
                  for name, trace in session.traces.items()],
        "columns": [col for col, _ in DETAIL_COLUMNS],
        "headings": [heading for _, heading in DETAIL_COLUMNS],
        "sections": [_table("statistics", ["", *session.traces],
                            [[key, *(format_stat(key, s.get(key)) for s in stats.values())]
                             for key in keys])],
    }


def sweep_page(sweep: Sweep, title: str) -> dict:
    """A sweep: its table, the speedup chart (the SVG ``specdeck sweep`` writes, as an
    image), the recommendations and each cell's why-line."""
    svg = speedup_chart_svg(sweep.cells).encode()
    meta = [f"{sweep.created}  sweep" + ("  partial: the sweep was interrupted"
                                          if sweep.partial else "")]
    if sweep.machine.get("chip") or sweep.machine.get("os"):
        meta.append(f"on {sweep.machine.get('chip', '?')}, {sweep.machine.get('os', '?')}")
    return {
        "title": visible(title),
        "meta": [visible(line) for line in meta],
        "sections": [
            _table("cells", list(COLUMNS), [cell_row(cell) for cell in sweep.cells]),
            {"type": "image", "title": "speedup against drafts per round",
             "src": "data:image/svg+xml;base64," + base64.b64encode(svg).decode(),
             "alt": "speedup over plain decoding against drafts per round"},
            _lines("recommendations", sweep.recommendations),
            _lines("why", why_lines(sweep.cells)),
        ],
    }


def diff_page(report: DiffReport, title: str) -> dict:
    """A diff: the settings that differ, then for each pair of strategies where their
    outputs part, every token edit, and their statistics side by side."""
    sections = []
    if report.changes:
        sections.append(_table("settings that differ", ["", "a", "b"], [
            [c.path, setting_text(c.path, c.a), setting_text(c.path, c.b)]
            for c in report.changes]))
    for pane in report.panes:
        sections.append(_lines(pane.label, [pane.summary()]))
        if pane.edits:
            sections.append(_table(f"{pane.label}: token edits",
                                   ["a tokens", "b tokens", "edit", "a text", "b text"], [
                [f"{e.a_start}-{e.a_end}", f"{e.b_start}-{e.b_end}", e.op, quoted(e.a_text),
                 quoted(e.b_text)] for e in pane.edits],
                ["", "", "", "diff--deleted", "diff--inserted"]))
        columns, rows = stats_table(f"a {pane.a_strategy}", f"b {pane.b_strategy}", pane.stats)
        sections.append(_table(f"{pane.label}: statistics", [c for c, _ in columns],
                               [list(row) for row in rows]))
    return {"title": visible(title),
            "meta": [visible(f"a: {report.a_label}"), visible(f"b: {report.b_label}")],
            "sections": sections}
