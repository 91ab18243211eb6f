"""The playground's parts without a running app: prompts, the race schedule, batching,
token wrapping, the inspector's explanations, the settings form and the sparkline's
series (that the app never imports mlx: ``test_layering.py``)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from textual.app import App

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.core.events import Done, Prefill, Round, Trace
from specdeck.engines.core.requests import CompareRequest
from specdeck.prompts import DEFAULT_PROMPT, get_prompt, load_prompts, parse_prompt
from specdeck.hosts.batcher import EventBatcher
from specdeck.engines.core.formatting import ordinal
from specdeck.sessions.playback import Playback, Schedule, finish_places, next_speed, stretch_for
from specdeck.tui.fixed_text import FixedText
from specdeck.tui.inspector import describe_rollback, explain_round, show_token, verdict
from specdeck.tui.jump_screen import parse_round
from specdeck.tui.stats_strip import RoundSeries
from specdeck.tui.token_view import TokenView, round_tokens
from specdeck.safe_text.plain import marked, printable
from specdeck.testing.pilot import run_async
from specdeck.testing.traces import demo_traces


def test_prompts_cover_the_workload_kinds():
    prompts = load_prompts()
    assert {"code", "prose", "json_tool_call", "summarise", "repeat_input"} <= set(prompts)
    for prompt in prompts.values():
        assert prompt.name and prompt.description and prompt.text.strip()
        assert "---" not in prompt.text.splitlines()[0]
    assert get_prompt().key == DEFAULT_PROMPT
    with pytest.raises(KeyError, match="choose from"):
        get_prompt("nope")
    with pytest.raises(ValueError, match="no 'description'"):
        parse_prompt("x", "name: X\n---\ntext\n")


def _round(index, t, **kw):
    base = dict(index=index, drafted=[], accepted=0, tokens=[index], end="target",
                pieces=[f"w{index} "], rejected_pieces=[], draft_seconds=0.0,
                verify_seconds=0.01, t=t)
    base.update(kw)
    return Round(**base)


def test_schedule_counts_each_trace_from_its_own_start():
    fast = Trace("a", [Prefill(3, 0.1, 0.1), _round(0, 0.2), _round(1, 0.3),
                       Done("length", 2, 0.31, None)])
    slow = Trace("b", [Prefill(3, 0.1, 0.1), _round(0, 0.5), _round(1, 0.45),  # clock hiccup
                       Done("length", 2, 0.9, None)])
    schedule = Schedule.of({"a": fast, "b": slow})
    assert schedule.duration == 0.9
    assert schedule.due(0.0) == {"a": 0, "b": 0}
    assert schedule.due(0.2) == {"a": 2, "b": 1}
    assert schedule.due(0.5) == {"a": 4, "b": 3}  # b's stamps never go backwards


def test_playback_speed_pause_and_seek():
    schedule = Schedule.of(demo_traces())
    playback = Playback(schedule)
    playback.advance(0.1)
    assert playback.position == pytest.approx(0.1)
    playback.speed = next_speed(playback.speed, faster=True)
    assert playback.speed == 2.0
    playback.advance(0.1)
    assert playback.position == pytest.approx(0.3)
    playback.paused = True
    assert playback.advance(5.0) == schedule.due(0.3)
    playback.paused = False
    assert next_speed(2.0, faster=False) == 1.0 and next_speed(1.0, faster=False) == 0.5
    assert next_speed(0.25, faster=False) == 0.25 and next_speed(10.0, faster=True) == 10.0
    playback.advance(100.0)
    assert playback.finished and playback.position == schedule.duration
    assert playback.seek(-1.0) == {name: 0 for name in schedule.times}
    with pytest.raises(ValueError):
        Playback(schedule, speed=0)


def test_a_short_race_is_slowed_and_has_a_finish_line():
    """Runs of half a second take 8 s at 1x (all alike); places by finish time."""
    assert stretch_for(0.5) == 16.0 and stretch_for(20.0) == 1.0 and stretch_for(0.0) == 1.0
    playback = Playback(Schedule.of(demo_traces()), stretch=16.0)
    playback.advance(1.6)
    assert playback.position == pytest.approx(0.1)  # 1.6 s of wall time: 0.1 s of the runs
    assert finish_places({"a": 0.5, "b": 0.3, "c": 0.5, "d": 0.9}) == {
        "a": 2, "b": 1, "c": 2, "d": 3}
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]


def test_batcher_sends_at_most_per_interval_and_at_once_on_done():
    now = [0.0]
    sent = []
    batcher = EventBatcher(sent.append, interval=0.1, clock=lambda: now[0])
    for i in range(5):
        now[0] += 0.01
        batcher.add("plain", _round(i, now[0]))
    assert sent == []  # 50 ms: still within one interval
    now[0] += 0.1
    batcher.add("plain", _round(5, now[0]))
    assert [len(b) for b in sent] == [6]
    batcher.add("plain", Done("length", 6, 1.0, None))
    assert [len(b) for b in sent] == [6, 1]  # a run's end is never held back
    batcher.flush()
    assert len(sent) == 2  # nothing pending: nothing sent


def test_round_tokens_put_rejected_drafts_where_proposed():
    event = _round(0, 0.1, drafted=[5, 6, 7], accepted=1, tokens=[5, 9], end="correction",
                   pieces=["a", "b"], rejected_pieces=["x", "y"])
    assert round_tokens(event) == [("a", "accepted"), ("x", "rejected"), ("y", "rejected"),
                                   ("b", "correction")]
    bonus = _round(1, 0.2, drafted=[5], accepted=1, tokens=[5, 6], end="bonus",
                   pieces=["a", "b"])
    assert round_tokens(bonus) == [("a", "accepted"), ("b", "bonus")]
    assert printable("a\x01\tb\n\x9b") == "a␁    b\n\N{REPLACEMENT CHARACTER}"


def test_explain_round_greedy_and_sampled():
    greedy = _round(3, 0.1, drafted=[5, 6, 7], accepted=1, tokens=[5, 8], end="correction",
                    pieces=["a", "c"], rejected_pieces=["x", "y"], draft_probs=[.9, .5, .4],
                    target_probs=[.8, .1, .2], alternatives=[[[5, .8]], [[8, .7], [6, .1]]],
                    rollback="trim")
    rows = explain_round(greedy, {8: "c"}.get)
    assert [r.kind for r in rows] == ["accepted", "rejected", "unchecked", "correction"]
    assert [r.position for r in rows] == [1, 2, 3, 2]
    assert rows[3].p == .7  # the correction's p, from the alternatives at its position
    assert verdict("draft", greedy, 3, 10) == (
        "draft · round 4 of 10 · 1 of 3 accepted → correction · 2 tokens this "
        "pass\nrollback: trimmed 2 rejected positions from the caches")
    assert rows[1].alternatives == [("c", .7), ("#6", .1)]
    assert "top choice" in rows[0].reason and "replaces" in rows[3].reason
    assert rows[1].reason == "greedy: not its top choice"
    assert rows[2].reason == "not tested: after a rejection"
    assert describe_rollback(greedy) == "rollback: trimmed 2 rejected positions from the caches"

    sampled = replace(greedy, uniforms=[0.3, 0.5, 0.9], rollback="replay", replayed=1)
    rows = explain_round(sampled, lambda _: None)
    assert rows[0].reason == "u=0.300 < min(1, p/q)=0.889"
    assert rows[1].reason == "u=0.500 ≥ min(1, p/q)=0.200"
    assert "norm(max(0, p − q))" in rows[3].reason
    assert rows[3].alternatives[0] == ("#8", .7)
    assert "replayed 1 accepted token" in describe_rollback(sampled)
    captured = describe_rollback(replace(greedy, rollback="captured"))
    assert "trimmed 2 rejected positions" in captured and "no replay" in captured


def test_whitespace_tokens_are_marked_and_rounds_numbered_from_one():
    assert show_token("\n    ") == "⏎␣␣␣␣" and show_token(" the") == "␣the"
    assert show_token("") == "∅" and show_token("\t\x1b[2J") == "→␛[2J"
    assert show_token("x" * 100).startswith("x" * 80 + "… (100 characters)")
    assert marked("a b\n") == "a␣b⏎"
    assert parse_round(" 12 ", 16) == 11
    for bad, why in (("0", "rounds 1 to 16"), ("17", "rounds 1 to 16"), ("x", "whole number")):
        with pytest.raises(ValueError, match=why):
            parse_round(bad, 16)


def test_settings_form_builds_a_validated_request(tmp_path):
    from specdeck.tui.settings_screen import apply_form, form_values

    request = CompareRequest(target="t", strategies=["plain", "draft"], prompt="p",
                             draft="d", settings=DecodeSettings())
    values = form_values(request)
    assert apply_form(request, values) == request  # the round trip changes nothing
    changed = apply_form(request, {**values, "k": "5", "temperature": "0.7",
                                   "strategies": "plain, ngram", "draft": ""})
    assert changed.settings.num_draft_tokens == 5
    assert changed.settings.sampling.temperature == 0.7
    assert changed.strategies == ["plain", "ngram"] and changed.draft is None
    with pytest.raises(SettingsError,
                       match="k .drafts per round. must be a number, auto, grow or pmin:P"):
        apply_form(request, {**values, "k": "two"})
    auto = apply_form(request, {**values, "k": "auto", "mtp_depth": "Auto"})
    assert (auto.settings.num_draft_tokens, auto.settings.mtp_depth) == ("auto", "auto")
    assert form_values(auto)["k"] == "auto" and apply_form(auto, form_values(auto)) == auto
    with pytest.raises(SettingsError, match="top-p"):
        apply_form(request, {**values, "top_p": "1.5"})
    with pytest.raises(SettingsError, match="at most four"):
        apply_form(request, {**values, "strategies": "plain,draft,mtp,ngram,plain"})
    assert apply_form(request, {**values, "repeats": "3"}).repeats == 3
    with pytest.raises(SettingsError, match="repeats must be between 1 and 20"):
        apply_form(request, {**values, "repeats": "0"})


def test_cli_without_demo_models_says_what_to_pass(tmp_path, monkeypatch, capsys):
    from specdeck.engines.models import demo
    from specdeck import cli
    from specdeck.commands.exit_status import EXIT_USAGE

    missing = tmp_path / "no-demo"
    original = demo.require_demo_models
    monkeypatch.setattr(demo, "require_demo_models", lambda root=missing: original(root))
    assert cli.main([]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--target PATH" in err and str(missing) in err
    # A missing model is refused before the app takes the screen.
    code = cli.main(["compare", "--target", str(tmp_path / "nope"), "--prompt", "hi",
                     "--strategies", "plain"])
    assert code == EXIT_USAGE and "model not found" in capsys.readouterr().err


def one_view_app(width: int, height: int):
    """An app holding one token view with ``width`` columns for text (and its scrollbar)."""
    class OneView(App):
        CSS = f"TokenView {{ width: {width + 2}; height: {height}; }}"

        def compose(self):
            yield TokenView()

    return OneView()


@run_async
async def test_token_view_wraps_new_tokens_only_and_rewraps_on_toggle():
    app = one_view_app(width=12, height=5)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TokenView)
        await pilot.pause()
        view.append([("def", "target"), (" add", "accepted"), ("(a,", "rejected"),
                     (" b):", "correction")])
        # Word-sized tokens move whole to the next line when they do not fit.
        assert view.lines() == ["def add(a,", " b):"]
        view.append([("\n", "bonus"), ("abcdefghijklmnopq", "target")])
        assert view.lines() == ["def add(a,", " b):", "abcdefghijkl", "mnopq"]  # hard split
        view.show_rejected = False
        assert view.lines() == ["def add b):", "abcdefghijkl", "mnopq"]
        assert view.text(kinds=("accepted",)) == " add"
        assert len(view.tokens) == 6  # hidden, not dropped


@run_async
async def test_token_view_knows_each_tokens_round_and_marks_one():
    app = one_view_app(width=20, height=5)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TokenView)
        await pilot.pause()
        view.append([("def", "accepted"), (" x\n  y", "rejected"), (" f", "correction")], 0)
        view.append([("(a)", "bonus")], 1)
        # A rejected draft's newline is shown, never followed: the line holds.
        assert view.lines() == ["def x⏎  y f(a)"]
        assert [view.round_at(x, 0) for x in (0, 3, 10, 11, 13, 14)] == [0, 0, 0, 1, 1, None]
        assert view.round_at(0, 3) is None
        view.select(1)
        await pilot.pause()
        styles = [seg.style for seg in view.render_line(0) if seg.text == "(a)"]
        assert styles and styles[0].reverse
        view.select(None)
        await pilot.pause()
        assert not [s for s in view.render_line(0) if s.text == "(a)"][0].style.reverse


@run_async
async def test_token_view_jump_scrolls_half_a_view_at_a_time():
    app = one_view_app(width=20, height=10)
    async with app.run_test(size=(40, 12)) as pilot:
        view = app.query_one(TokenView)
        await pilot.pause()
        view.append([(f"line {i}\n", "target") for i in range(9)])
        await pilot.pause()
        assert view.scroll_offset.y == 0  # 10 lines (the last one open) fit the view
        view.append([("line 9\n", "target")])  # the 11th line: jump
        await pilot.pause()
        jumped = view.scroll_offset.y
        assert jumped == 11 - 5  # the last line in the middle of the view
        rows = [view.render_line(y).text.rstrip() for y in range(10)]
        assert rows[:5] == [f"line {i}" for i in range(6, 10)] + [""]
        assert rows[5:] == [""] * 5  # room for the next lines
        view.append([(f"line {i}\n", "target") for i in range(10, 15)])
        await pilot.pause()
        assert view.scroll_offset.y == jumped  # they landed in the room: no scrolling
        assert view.render_line(9).text.rstrip() == ""  # the open line at the bottom
        assert view.render_line(8).text.rstrip() == "line 14"
        view.append([("line 15\n", "target")])
        await pilot.pause()
        assert view.scroll_offset.y > jumped  # out of room: the next jump
        assert "line 15" in [view.render_line(y).text.rstrip() for y in range(10)]
        view.styles.height = 4  # the pane shrinks (the inspector opens): the end stays in view
        await pilot.pause()
        rows = [view.render_line(y).text.rstrip() for y in range(4)]
        # A view this short scrolls line by line: half of it would be most of it.
        assert rows == ["line 13", "line 14", "line 15", ""]


class TwoLineBox(App):
    """A FixedText of up to two lines, alone on the screen."""

    def compose(self):
        yield FixedText(max_lines=2)


@run_async
async def test_fixed_text_keeps_its_tail_whole_and_cuts_the_text_at_a_word():
    app = TwoLineBox()
    async with app.run_test(size=(30, 5)) as pilot:
        line = app.query_one(FixedText)
        line.text, line.tail = "measured · saved runs/a.json", "[race 1x · PAUSED]"
        await pilot.pause()
        # Where the tail does not fit after the text, it starts a line: never broken.
        assert str(line.render()).split("\n") == ["measured · saved runs/a.json",
                                                  "[race 1x · PAUSED]"]
        line.text = "measured one after another, each warmed up · saved runs/a.json"
        await pilot.pause()
        # Two lines are too few: the text is cut at a word, the tail still shows whole.
        assert str(line.render()).split("\n") == ["measured one after another,",
                                                  "each…   [race 1x · PAUSED]"]
        assert line.size.height == 2


@run_async
async def test_fixed_text_says_its_brief_where_the_whole_takes_more_lines():
    app = TwoLineBox()
    async with app.run_test(size=(40, 5)) as pilot:
        line = app.query_one(FixedText)
        line.text, line.brief, line.tail = ("race: each from its own t=0 · 0.20 s of 0.58 s",
                                            "race: 0.20 s of 0.58 s", "[race 1x]")
        await pilot.pause()
        assert str(line.render()).split("\n") == ["race: 0.20 s of 0.58 s   [race 1x]"]
        assert line.size.height == 1
        # Where the whole fits the line, it is said whole.
        await pilot.resize_terminal(80, 5)
        await pilot.pause()
        assert str(line.render()) == ("race: each from its own t=0 · 0.20 s of 0.58 s"
                                      "   [race 1x]")
        # A brief as long as the whole changes nothing: the whole is said.
        await pilot.resize_terminal(30, 5)
        line.brief = line.text
        await pilot.pause()
        assert str(line.render()).split("\n")[0] == "race: each from its own t=0 ·"


def test_the_sparkline_series_stays_short_and_keeps_each_spans_maximum():
    rng = random.Random(7)
    for length in (0, 1, 8, 9, 17, 63, 64, 65, 200):
        values = [float(rng.randrange(5)) for _ in range(length)]
        series = RoundSeries(limit=8)
        for v in values:
            series.add(v)
        points = series.points
        if length <= 8:
            assert points == values  # short runs are shown round by round
            continue
        span = 1  # halved each time a ninth point completes (one more may be filling)
        while length >= 9 * span:
            span *= 2
        assert points == [max(values[i : i + span]) for i in range(0, length, span)], length
        assert len(points) <= 9


def test_a_toast_still_on_screen_is_not_stacked_again(monkeypatch) -> None:
    """b held at round 1: one "round 1 is the first", not a screenful; another message
    shows at once, and the same one again once the first has left the screen."""
    from specdeck.safe_text import tui as safe_text

    class Shown:
        NOTIFICATION_TIMEOUT = 5.0

        def __init__(self) -> None:
            self.shown: list[str] = []

        def notify(self, message: str, **_) -> None:
            self.shown.append(message)

    class App(safe_text.LiteralNotify, Shown):
        pass

    clock = [100.0]
    monkeypatch.setattr(safe_text.time, "monotonic", lambda: clock[0])
    app = App()
    for _ in range(20):
        app.notify("draft: round 1 is the first")
    app.notify("k = 3: restarting")
    app.notify("an error", timeout=30)
    clock[0] += 5.5
    app.notify("draft: round 1 is the first")
    app.notify("an error")
    assert app.shown == ["draft: round 1 is the first", "k = 3: restarting", "an error",
                         "draft: round 1 is the first"]
    # Only the messages still on screen are remembered: a long session's do not pile up.
    for n in range(50):
        app.notify(f"round {n} saved")
    clock[0] += 40.0
    app.notify("k = 3: restarting")
    assert list(app._toasts_until) == [("k = 3: restarting", "")]
