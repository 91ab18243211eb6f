"""What the playground costs a measured run, and whether pane appends stay flat.

1. Tokens/s of one strategy measured by ``run_compare`` headless vs inside the running
   app (headless Textual driver: the compositor renders every batch), on the same
   models, interleaved headless/app/headless/app... The ratio app / headless should be
   >= 0.95: the app measures in its engine process and events reach the UI batched.
   ``--in-process`` measures in a thread of the app's process instead (what the app did
   before: rendering then takes the interpreter lock from the measured run). The app
   run measured is a restart (``r``), so the engine's start-up and model loading do not
   land inside the timed run. The UI thread's CPU use during the run is printed too.
2. Time to append 5,000 tokens to a pane in batches of 10 (what the batcher delivers),
   each batch followed by rendering the pane's visible lines: mean milliseconds per batch
   over the first and the last 500 tokens. Flat means the last/first ratio stays near 1.

Models: ``--target``/``--draft`` directories, or the tiny test models (where tokens come
fastest, so UI overhead is a worst case).

    python bench/ui_overhead.py --tokens 200 --reps 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from textual.app import App, ComposeResult  # noqa: E402

from specdeck.engines.runs.compare import run_compare  # noqa: E402
from specdeck.engines.core.requests import CompareRequest  # noqa: E402
from specdeck.engines.core.config import DecodeSettings  # noqa: E402
from specdeck.engines.models.loading import ModelStore  # noqa: E402
from specdeck.engines.core.stats import compute_stats  # noqa: E402
from specdeck.hosts.engine import ThreadHost  # noqa: E402
from specdeck.tui.app import SpecdeckApp  # noqa: E402
from specdeck.tui.sources import LiveSource  # noqa: E402
from specdeck.tui.token_view import TokenView  # noqa: E402
from specdeck.testing.pilot import settle  # noqa: E402
from specdeck.testing.traces import words  # noqa: E402

PROMPT = "def fibonacci(n):\n    if n < 2:\n        return n\n    return"


async def app_run(request: CompareRequest, store: ModelStore | None, strategy: str
                  ) -> tuple[float, float]:
    """Tokens/s of ``strategy`` measured inside the app (in its engine process, or with
    ``store`` in a thread of its own), and the UI thread's CPU use meanwhile (CPU seconds
    per wall second)."""
    host = (lambda post: ThreadHost(post, store)) if store is not None else None
    app = SpecdeckApp(LiveSource(request), host=host, save_sessions=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        wall, cpu = time.perf_counter(), time.thread_time()
        await app.start_run()  # measure a restart: the models are loaded and warm
        await settle(app, pilot)
        ui_load = (time.thread_time() - cpu) / (time.perf_counter() - wall)
        events = app.pane(strategy).events
    return compute_stats(events).tokens_per_s, ui_load


def headless_tokens_per_s(request: CompareRequest, store: ModelStore, strategy: str) -> float:
    result = run_compare(request, store)
    return compute_stats(result.traces[strategy].events).tokens_per_s


class PaneOnly(App[None]):
    """One token view, styled by the playground's stylesheet (a pane's width)."""

    CSS_PATH = str(ROOT / "tui" / "app.tcss")

    def compose(self) -> ComposeResult:
        yield TokenView()


async def append_costs(total: int, batch: int) -> list[float]:
    """Seconds per batch of appends + repaint, as the pane grows to ``total`` tokens."""
    pieces = words() * (total // len(words()) + 1)
    kinds = ("accepted", "accepted", "rejected", "correction", "target", "bonus")
    costs = []
    app = PaneOnly()
    async with app.run_test(size=(80, 48)) as pilot:
        view = app.query_one(TokenView)
        for start in range(0, total, batch):
            chunk = [(pieces[i], kinds[i % len(kinds)]) for i in range(start, start + batch)]
            began = time.perf_counter()
            view.append(chunk)
            for y in range(view.size.height):  # what a repaint of the pane asks for
                view.render_line(y)
            costs.append(time.perf_counter() - began)
            await pilot.pause()  # let the app scroll to the new end
    return costs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target")
    parser.add_argument("--draft")
    parser.add_argument("--strategy", default="draft", choices=("plain", "draft"))
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--append-tokens", type=int, default=5000)
    parser.add_argument("--in-process", action="store_true",
                        help="measure in a thread of the app's process, not its engine process")
    args = parser.parse_args(argv)

    if args.target:
        target, draft = args.target, args.draft
    else:
        from specdeck.testing.tiny_models import build_family

        family = build_family(Path(tempfile.mkdtemp(prefix="specdeck-bench-")))
        target, draft = str(family["llama_target"]), str(family["llama_draft"])
    strategies = ["plain"] if args.strategy == "plain" else ["draft"]
    request = CompareRequest(
        target=target, draft=draft, strategies=strategies, prompt=PROMPT,
        settings=DecodeSettings(max_tokens=args.tokens, stop_at_eos=False, alternatives=5),
    )
    store = ModelStore()
    headless_tokens_per_s(request, store, args.strategy)  # load and warm once, untimed
    headless, in_app, ui_loads = [], [], []
    for rep in range(args.reps):
        headless.append(headless_tokens_per_s(request, store, args.strategy))
        tokens_per_s, ui_load = asyncio.run(
            app_run(request, store if args.in_process else None, args.strategy))
        in_app.append(tokens_per_s)
        ui_loads.append(ui_load)
        print(f"rep {rep + 1}: headless {headless[-1]:.1f} tok/s, app {in_app[-1]:.1f} tok/s, "
              f"UI thread {ui_load:.2f} CPU s/s")
    h, a = statistics.median(headless), statistics.median(in_app)
    # Each app run against the headless run just before it: drift in machine load cancels.
    paired = statistics.median(x / y for x, y in zip(in_app, headless))
    where = "a thread of the app" if args.in_process else "the app's engine process"
    print(f"{args.strategy}, {args.tokens} tokens, measured in {where}, median of {args.reps}: "
          f"headless {h:.1f} "
          f"tok/s, in the app {a:.1f} tok/s; ratio app/headless, median of pairs "
          f"{paired:.3f} (target >= 0.95); UI thread busy "
          f"{statistics.median(ui_loads):.2f} CPU s per s")

    batch = 10
    costs = asyncio.run(append_costs(args.append_tokens, batch))
    window = max(1, 500 // batch)
    first, last = statistics.median(costs[:window]), statistics.median(costs[-window:])
    print(f"pane append, batches of {batch}: first 500 tokens median {first * 1000:.2f} ms/batch, "
          f"last 500 of {args.append_tokens} {last * 1000:.2f} ms/batch, "
          f"ratio last/first {last / first:.2f} (flat: ~1)")
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    sys.exit(main())
