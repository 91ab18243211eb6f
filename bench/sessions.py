"""How big sessions behave: save time, load time, file size and the cost of a replay frame.

Builds a synthetic 20,000-token session with four strategies (plain, and three drafting
strategies with different k and acceptance), every drafted round carrying draft and
target probabilities and the target's top-5 alternatives at each verified position, then
measures, in one run:

- save: build_document + orjson + atomic write (and the file size, compact vs indented);
- load: load_session (parse + structural check + rebuilding every event);
- the choices behind those numbers, side by side: shallow event dicts vs
  ``dataclasses.asdict``, parsing with the garbage collector paused vs running;
- replay: ``specdeck.sessions.playback`` at the app's 30 frames/s and 10x (the fastest speed), per frame
  handing the due events to their panes and, for each changed pane, what its statistics
  strip does: the numbers, their text and the sparkline (drawn 40 cells wide). Side by
  side: the app's way (an ``engines.stats.StatsAccumulator`` fed the new events, the
  sparkline's bounded ``RoundSeries``) and the way before it (``compute_stats`` over every
  event shown so far and a sparkline of every round, at 30 fps: quadratic over a race).
  A flat cost shows as the same time per frame in the first and the last tenth.

Times are CPU time of this process (``time.process_time``): on a shared machine wall time
swings with other people's load, CPU time much less; on an idle machine they agree.

Run: python bench/sessions.py [--tokens 20000] [--alternatives 5]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from specdeck.blas import reexec_with_openblas

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdeck.engines.core.events import Done, Prefill, Round, Trace  # noqa: E402
from specdeck.engines.core.stats import StatsAccumulator, compute_stats  # noqa: E402
from specdeck.sessions.playback import SPEEDS, Playback, Schedule  # noqa: E402
from specdeck.sessions.session import (  # noqa: E402
    build_document, event_to_dict, load_session, save_document,
)
from specdeck.tui.stats_strip import RoundSeries, pack_figures, stats_figures  # noqa: E402

#: Cells of a pane's sparkline and strip lines in the bench (a third of a 120-column
#: terminal).
SPARKLINE_WIDTH = 40
STRIP_WIDTH = 36

WORDS = [" the", " cache", " token", " draft", " model", "(", ")", ":", "\n    ", " return",
         " é", " speculative", " verify", " accept", "_", "x", " = ", "0", "1", "."]

#: name -> (drafts per round, per-draft acceptance probability)
STRATEGIES = {"plain": (0, 0.0), "draft": (2, 0.7), "mtp": (3, 0.6), "ngram": (4, 0.4)}


def synthetic_trace(name: str, tokens: int, k: int, accept: float, alternatives: int,
                    rng: random.Random) -> Trace:
    """A run of ``tokens`` tokens: k drafts per round, each kept with probability
    ``accept`` until the first rejection (plain: k = 0)."""
    t = 0.05
    events: list = [Prefill(prompt_tokens=120, seconds=t, t=t)]
    made = 0
    index = 0
    while made < tokens:
        drafted = [rng.randrange(4096) for _ in range(k)]
        accepted = 0
        while accepted < k and rng.random() < accept:
            accepted += 1
        out = drafted[:accepted] + [rng.randrange(4096)]
        end = "target" if not k else ("bonus" if accepted == k else "correction")
        if len(out) > tokens - made:  # the run stops inside the accepted drafts
            out, end = out[: tokens - made], None
        draft_s, verify_s = 0.002 * k, 0.01 + 0.001 * k
        t += draft_s + verify_s
        alts = None
        if alternatives:
            alts = [[[rng.randrange(4096), rng.random()] for _ in range(alternatives)]
                    for _ in range(accepted + 1)]
        events.append(Round(
            index=index, drafted=drafted, accepted=accepted, tokens=out, end=end,
            pieces=[rng.choice(WORDS) for _ in out],
            rejected_pieces=[rng.choice(WORDS) for _ in drafted[accepted:]],
            draft_seconds=draft_s, verify_seconds=verify_s, t=t,
            draft_probs=[rng.random() for _ in drafted] if k else None,
            target_probs=[rng.random() for _ in drafted] if k else None,
            alternatives=alts, rollback="trim" if accepted < k else "none",
        ))
        made += len(out)
        index += 1
    events.append(Done("length", made, t + 0.001, 2_000_000_000))
    return Trace(name, events)


def synthetic_traces(tokens: int, alternatives: int, seed: int = 0) -> dict[str, Trace]:
    rng = random.Random(seed)
    return {name: synthetic_trace(name, tokens, k, a, alternatives, rng)
            for name, (k, a) in STRATEGIES.items()}


def best_of(fn, repeat: int) -> float:
    """Fastest of ``repeat`` calls; freeing the result is not part of the time."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
        del result
    return min(times)


class StripWork:
    """What one pane's statistics strip does each frame, without the widgets: the app's
    way (``folded``) or recomputed from every event shown (the way before it)."""

    def __init__(self, folded: bool) -> None:
        from io import StringIO

        from rich.console import Console

        self.folded = folded
        self.accumulator = StatsAccumulator()
        self.series = RoundSeries()
        self.console = Console(file=StringIO(), width=SPARKLINE_WIDTH, color_system="truecolor")

    def frame(self, events: list, shown: int, due: int) -> None:
        from textual.renderables.sparkline import Sparkline

        if self.folded:
            for event in events[shown:due]:
                self.accumulator.add(event)
                if isinstance(event, Round):
                    self.series.add(float(event.accepted))
            stats, data = self.accumulator.stats, self.series.points
        else:
            stats = compute_stats(events[:due])
            data = [float(e.accepted) for e in events[:due] if isinstance(e, Round)]
        pack_figures(stats_figures(stats, 100.0, False, 2**30), STRIP_WIDTH)
        self.console.print(Sparkline(data, width=SPARKLINE_WIDTH))


def replay_frames(traces: dict[str, Trace], fps: float,
                  strips: str | None) -> list[tuple[float, int]]:
    """Cost of each frame of a replay at the fastest speed, driven by a simulated clock:
    take the events now due, hand each to its pane, and with ``strips`` (``folded`` or
    ``recomputed``) do each changed pane's statistics strip's work. Per frame: seconds,
    and how many panes changed."""
    playback = Playback(Schedule.of(traces), speed=SPEEDS[-1])
    shown = {name: 0 for name in traces}
    work = {name: StripWork(strips == "folded") for name in traces} if strips else {}
    received = 0
    costs = []
    while not playback.finished:
        start = time.process_time()
        changed = 0
        for name, due in playback.advance(1 / fps).items():
            events = traces[name].events
            for _event in events[shown[name] : due]:
                received += 1
            if due > shown[name]:
                changed += 1
                if work:
                    work[name].frame(events, shown[name], due)
            shown[name] = due
        costs.append((time.process_time() - start, changed))
    assert received == sum(len(t.events) for t in traces.values())
    return costs


def tenth_ms(costs: list[tuple[float, int]], last: bool) -> float:
    """Median cost of one pane's update in ms over the first (or last) tenth of the race
    (panes finish at different times: a frame late in the race updates fewer)."""
    per_pane = [seconds / changed for seconds, changed in costs if changed]
    n = max(1, len(per_pane) // 10)
    return statistics.median(per_pane[-n:] if last else per_pane[:n]) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--alternatives", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fps", type=float, default=30.0, help="frames per second (app: 30)")
    args = parser.parse_args()

    traces = synthetic_traces(args.tokens, args.alternatives)
    rounds = {name: len(trace.rounds) for name, trace in traces.items()}
    config = {"prompt": "synthetic", "strategies": list(traces)}
    machine = {"chip": "synthetic"}
    document = build_document(config, machine, traces)
    compact = orjson.dumps(document)
    indented = orjson.dumps(document, option=orjson.OPT_INDENT_2)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json"
        save_s = best_of(lambda: save_document(path, build_document(config, machine, traces)),
                         args.repeat)
        load_s = best_of(lambda: load_session(path), args.repeat)
        session = load_session(path)
    assert all(session.traces[n].tokens == traces[n].tokens for n in traces)

    # The choices session.py makes, each against the obvious alternative.
    shallow_s = best_of(lambda: [list(map(event_to_dict, t.events)) for t in traces.values()],
                        args.repeat)
    deep_s = best_of(lambda: [list(map(asdict, t.events)) for t in traces.values()], args.repeat)
    gc_on_s = best_of(lambda: orjson.loads(compact), args.repeat)
    gc.disable()
    gc_off_s = best_of(lambda: orjson.loads(compact), args.repeat)
    gc.enable()

    print(f"session: {args.tokens} tokens x {len(traces)} strategies, "
          f"rounds {rounds}, alternatives {args.alternatives}")
    print(f"file size      {len(compact) / 1e6:8.2f} MB  (indented: {len(indented) / 1e6:.2f} MB, "
          f"{len(indented) / len(compact):.1f}x)")
    print(f"save           {save_s * 1e3:8.1f} ms  (build_document + orjson + atomic write)")
    print(f"load           {load_s * 1e3:8.1f} ms  (parse + check + events; {load_s:.2f} of "
          "the 1 s budget)")
    print(f"events->dicts  {shallow_s * 1e3:8.1f} ms  (dataclasses.asdict: {deep_s * 1e3:.1f} ms, "
          f"{deep_s / shallow_s:.1f}x)")
    print(f"parse, no gc   {gc_off_s * 1e3:8.1f} ms  (collector running: {gc_on_s * 1e3:.1f} ms, "
          f"{gc_on_s / gc_off_s:.1f}x)")
    for strips in (None, "folded", "recomputed"):
        frames = replay_frames(session.traces, args.fps, strips)
        costs = [seconds for seconds, _ in frames]
        ordered = sorted(costs)
        label = {None: "events only", "folded": "+ strips (app)",
                 "recomputed": "+ strips (before)"}[strips]
        first, last = tenth_ms(frames, last=False), tenth_ms(frames, last=True)
        print(
            f"replay frame   {label:<18} {len(costs)} frames at {args.fps:g} fps, "
            f"{SPEEDS[-1]:g}x: median {statistics.median(costs) * 1e3:.3f} ms, "
            f"p95 {ordered[int(len(costs) * 0.95)] * 1e3:.2f} ms (budget {1e3 / args.fps:.1f} ms); "
            f"per pane updated: {first:.3f} ms in the first tenth, {last:.3f} ms in the last "
            f"({last / first:.1f}x)"
        )


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    main()
