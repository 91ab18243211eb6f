"""A target larger than one machine: speculation over a target split with mlx.distributed.

``mlx.launch`` starts one process (a *rank*) per machine, or several on one. Every rank
loads its share of the target with mlx-lm's own split (``model.shard``: every layer's
heads and matrices, two collectives per layer; ``model.pipeline``: whole layers, one
hop per stage) and all of the draft model and the MTP head, which are small (prompt
lookup needs no model). Then every rank runs the same speculative loop on the same
prompt with the same seeded key stream. A split model's log-probabilities come out of
collectives identical on every rank, so every rank accepts the same drafts, rewinds the
same way and makes the same collective calls. Rank 0 alone reports; the others are
silent.

Where ranks could part, this keeps them in step:

- an error before the run (a model missing on one host, too little memory on another):
  every rank meets the others at ``Group.check`` once loading is over, and all stop
  naming the rank that failed;
- cancellation (Ctrl+C, the app's cancel) reaches ranks at different moments:
  ``AgreedFlag`` asks all ranks together every few events, so all stop after the same
  one;
- a lost rank makes a collective fail (and ``mlx.launch`` stop the others with
  SIGTERM), a stuck one makes it wait forever: ``Group.lost`` records the first,
  ``FaultGuard`` turns SIGTERM and a stall into a clean end, rank 0 saving what ran;
- a bug that made the ranks disagree shows at the end of each strategy
  (``Group.same_tokens``).

No networking of its own: every exchange is an mlx collective.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import statistics
import threading
import time
import zlib
from array import array
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import mlx.core as mx
from mlx_lm.generate import generation_stream
from mlx_lm.models.cache import make_prompt_cache

from specdeck.engines.models.catalog import describe_dir
from specdeck.engines.runs.compare import (
    CompareResult, encode_prompt, measure_strategies, start_compare,
)
from specdeck.engines.decode.shared import Clock, forward
from specdeck.engines.core.errors import GroupError, ModelError, SettingsError, UserError
from specdeck.engines.core.events import Done, Event
from specdeck.engines.core.formatting import byte_size
from specdeck.engines.distributed.costs import PASS_SIZES, PassCosts
from specdeck.engines.distributed.splittable import refusal
from specdeck.engines.models.loading import LoadedModel, ModelStore
from specdeck.engines.measure.memory import MemoryEstimate, cpu_backend, free_memory, weight_bytes
from specdeck.engines.core.requests import (
    HOSTS_VARIABLE, CompareRequest, GroupSpec, SweepRequest, launched,
)
from specdeck.engines.decode.rollback import checkpoint, restore
from specdeck.engines.runs.sweep import Cell, SweepProgress, run_sweep, sweep_models

#: How often (in events) the ranks agree on whether to stop.
AGREE_EVERY = 8
#: Exit status of a rank ended by ``FaultGuard``.
EXIT_FAULT = 1
#: Bytes of text one rank can tell the others (an error message).
_TEXT_WIDTH = 2048


def launched_backend() -> str | None:
    """The backend ``mlx.launch`` set this rank up for, from what it put in the
    environment; None when it was not launched (or by a launcher we do not know)."""
    env = os.environ
    if "MLX_IBV_DEVICES" in env:
        return "jaccl-ring" if env.get("MLX_JACCL_RING") else "jaccl"
    if "MLX_HOSTFILE" in env:
        return "ring"
    if any(name in env for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")):
        return "mpi"
    return None


def named_hosts() -> tuple[str, ...]:
    """The hosts as the user named them (``specdeck.hosts.launch`` passes them on), else
    the addresses in the ring backend's hostfile, else none (one machine)."""
    named = os.environ.get(HOSTS_VARIABLE, "")
    if named:
        return tuple(h for h in named.split(",") if h)
    path = os.environ.get("MLX_HOSTFILE")
    if not path:
        return ()
    import json

    try:
        with open(path, encoding="utf-8") as f:
            ring = json.load(f)
        hosts = [entry[0].rsplit(":", 1)[0] for entry in ring]
    except (OSError, ValueError, TypeError, IndexError, AttributeError):
        return ()
    return tuple(dict.fromkeys(h for h in hosts if type(h) is str))


@dataclass
class Group:
    """This process's place in a group of ranks, and the group's few agreements.

    ``spec`` is what was asked for, with the group's real size and backend.
    """

    handle: Any
    spec: GroupSpec
    rank: int
    #: Why the group cannot go on (a rank lost, ranks disagreeing); None while it can.
    lost: str | None = None
    #: Pass costs measured per target folder (the app's engine runs many comparisons).
    costs: dict[str, PassCosts] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.spec.ranks

    @property
    def lead(self) -> bool:
        """Rank 0: the one that reports, records and saves."""
        return self.rank == 0

    def _collective(self, build: Callable[[], mx.array]) -> mx.array | None:
        """Evaluate one collective; None (and ``lost`` set) when a rank is gone.

        On the stream the models decode on: the ring backend has no message tags, so a
        collective running beside a split model's in flight (plain decoding queues
        its next step early) would take the model's messages; one stream keeps every
        rank's collectives in one order.
        """
        if self.lost is not None:
            return None
        try:
            out = build()
            mx.eval(out)
            return out
        except RuntimeError as exc:  # mlx: "[ring] connection to a peer was lost"
            self.lost = f"the group lost a rank ({exc})"
            return None

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank (every rank must ask together); True
        once the group is lost, so a loop asking whether to stop stops."""
        if self.size == 1:
            return flag
        out = self._collective(lambda: mx.distributed.all_sum(
            mx.array([int(flag)], mx.int32), group=self.handle, stream=generation_stream))
        return True if out is None else out.item() > 0

    def gather_text(self, text: str) -> list[str] | None:
        """Every rank's ``text`` (cut to 2 KiB), in rank order; None when lost."""
        if self.size == 1:
            return [text]
        data = text.encode("utf-8", "replace")[:_TEXT_WIDTH].ljust(_TEXT_WIDTH, b"\0")
        out = self._collective(lambda: mx.distributed.all_gather(
            mx.array(list(data), mx.uint8), group=self.handle, stream=generation_stream))
        if out is None:
            return None
        raw = bytes(array("B", out.tolist()))
        return [raw[i:i + _TEXT_WIDTH].rstrip(b"\0").decode("utf-8", "replace")
                for i in range(0, len(raw), _TEXT_WIDTH)]

    def share(self, data: bytes) -> bytes | None:
        """Rank 0's ``data`` on every rank (the others pass anything); None when lost."""
        if self.size == 1:
            return data
        mine = len(data) if self.lead else 0
        size = self._collective(lambda: mx.distributed.all_sum(
            mx.array([mine], mx.int64), group=self.handle, stream=generation_stream))
        if size is None:
            return None
        length = size.item()
        payload = array("B", data if self.lead else bytes(length))
        out = self._collective(lambda: mx.distributed.all_sum(
            mx.array(payload, mx.uint8), group=self.handle, stream=generation_stream))
        return None if out is None else bytes(array("B", out.tolist()))

    def check(self, error: str | None) -> None:
        """Meet the other ranks; raise GroupError on every rank when any failed (the
        message names each failed rank and why)."""
        texts = self.gather_text(error or "")
        if texts is None:
            raise GroupError(self.lost)
        failed = {r: t for r, t in enumerate(texts) if t}
        if len(failed) == len(texts) and len(set(failed.values())) == 1:
            raise GroupError(texts[0])  # the same on every rank: said once
        if failed:
            raise GroupError("; ".join(f"rank {r}: {t}" for r, t in failed.items()))

    def same_tokens(self, strategy: str, tokens: list[int]) -> None:
        """Check that every rank made the same tokens (``lost`` set when not)."""
        digest = zlib.crc32(array("q", tokens).tobytes())
        texts = self.gather_text(f"{len(tokens)} tokens, crc {digest:08x}")
        if texts is not None and len(set(texts)) > 1:
            each = ", ".join(f"rank {r}: {t}" for r, t in enumerate(texts))
            self.lost = (f"the ranks disagree on {strategy}'s output ({each}): their "
                         "collectives no longer match, so the run stops")

    def record(self) -> dict:
        """The group as a session records it."""
        s = self.spec
        return {"size": s.ranks, "backend": s.backend, "shard": s.shard,
                "hosts": list(s.hosts), "hostfile": s.hostfile}


def start_group(spec: GroupSpec) -> Group:
    """Join the group ``mlx.launch`` started this process in; a group of one when it
    was not launched (the target then runs whole, as a baseline)."""
    if not launched():
        handle = mx.distributed.init(strict=False, backend="ring")
        return Group(handle, replace(spec, ranks=1), 0)
    backend = launched_backend() or spec.backend
    try:
        handle = mx.distributed.init(strict=True, backend=backend.removesuffix("-ring"))
    except (RuntimeError, ValueError) as exc:
        raise GroupError(
            f"cannot join the {backend} group: {exc}. Start specdeck with `specdeck launch` "
            "(or mlx.launch), and check that every host reaches the others"
        ) from None
    hosts = named_hosts() or spec.hosts
    return Group(handle, replace(spec, ranks=handle.size(), backend=backend, hosts=hosts),
                 handle.rank())


# -- splitting the target ----------------------------------------------------------------


def split_model(model: Any, config: dict, group: Group, name: str) -> None:
    """Keep this rank's share of ``model`` (called before its weights are read), with
    mlx-lm's own ``shard`` or ``pipeline``; GroupError when it has neither."""
    if group.size == 1:
        return
    mode, kind = group.spec.shard, str(config.get("model_type", "unknown"))
    if mode == "tensor":
        method = getattr(model, "shard", None)
    else:
        method = getattr(getattr(getattr(model, "language_model", model), "model", None),
                         "pipeline", None)
    if method is None:
        raise GroupError(refusal(name, kind, mode))
    try:
        method(group.handle)
    except (AssertionError, ValueError) as exc:
        raise GroupError(
            f"cannot split {name} over {group.size} ranks by {mode}: {exc or 'sizes'} "
            "(head counts and hidden and vocabulary sizes must divide by the ranks)"
        ) from None


def split_store(group: Group, target: str) -> ModelStore:
    """A model store that keeps this rank's share of ``target`` and loads every other
    model (draft, MTP model) whole."""
    return ModelStore(split=(target, lambda model, config: split_model(
        model, config, group, target)))


# -- agreeing on when to stop ------------------------------------------------------------


class AgreedFlag:
    """``local`` (Ctrl+C on some rank, the app's cancel on rank 0) as all ranks see it:
    every ``every`` calls all ranks ask together, so all stop after the same event.
    True from then on, and once the group is lost."""

    def __init__(self, group: Group, local: Callable[[], bool], every: int = AGREE_EVERY):
        self.group, self.local, self.every = group, local, every
        self._calls = 0
        self._set = False

    def __call__(self) -> bool:
        if self._set or self.group.lost is not None:
            self._set = True
            return True
        self._calls += 1
        if self.group.size > 1 and self._calls % self.every:
            return False
        self._set = self.group.any(self.local())
        return self._set


# -- what a pass costs --------------------------------------------------------------------


def pass_seconds(model: Any, prompt: list[int], reps: int = 3) -> tuple[float, ...]:
    """Median seconds of one forward pass (log-probabilities included) of each of
    ``PASS_SIZES`` tokens after the prompt, each undone before the next; on a split
    model every rank must call it together."""
    with mx.stream(generation_stream):  # as the strategies decode (see Group._collective)
        return _pass_seconds(model, prompt, reps)


def _pass_seconds(model: Any, prompt: list[int], reps: int) -> tuple[float, ...]:
    cache = make_prompt_cache(model)
    context = mx.array(prompt[:64] or [0], mx.uint32)
    model(context[None], cache=cache)
    mx.eval([c.state for c in cache])
    feed = mx.array((prompt * PASS_SIZES[-1])[: PASS_SIZES[-1]] or [0] * PASS_SIZES[-1],
                    mx.uint32)
    times: dict[int, list[float]] = {size: [] for size in PASS_SIZES}
    for rep in range(reps + 1):  # the first round warms up
        for size in PASS_SIZES:
            point = checkpoint(cache, size)
            start = time.perf_counter()
            mx.eval(forward(model, cache, feed[:size]))
            elapsed = time.perf_counter() - start
            restore(cache, point, discard=size)
            mx.eval([c.state for c in cache])
            if rep:
                times[size].append(elapsed)
    return tuple(statistics.median(times[size]) for size in PASS_SIZES)


def _one_rank_seconds(target: LoadedModel, prompt: list[int],
                      progress: Callable[[str], None]) -> tuple[float, ...] | None:
    """Pass times of the whole target in this process alone, when it fits in half the
    free memory (loaded for the measurement, then dropped); None when it does not."""
    info = describe_dir(target.path, name=target.source)
    needed = weight_bytes(info, cpu_backend())
    free = free_memory()
    if free is None or needed > free / 2:
        progress(f"one-rank pass costs not measured: the whole target needs "
                 f"{byte_size(needed)}, {byte_size(free)} is free")
        return None
    progress("measuring pass costs of the whole target on rank 0 (the others wait)")
    whole = ModelStore().get(target.source, target.revision)
    try:
        return pass_seconds(whole.model, prompt)
    finally:
        del whole
        mx.clear_cache()


def measure_pass_costs(group: Group, target: LoadedModel, prompt: list[int],
                       progress: Callable[[str], None] = lambda _: None) -> PassCosts:
    """Pass times on the group (every rank together) and, on rank 0 while the others
    wait, of the whole target on one rank when it fits there; once per target."""
    known = group.costs.get(str(target.path))
    if known is not None:
        return known
    progress(f"measuring pass costs on {group.size} rank{'s' if group.size > 1 else ''}")
    on_group = pass_seconds(target.model, prompt)
    one_rank = None
    if group.size > 1:
        if group.lead:
            one_rank = _one_rank_seconds(target, prompt, progress)
        group.any(False)  # the others wait here while rank 0 measures alone
    costs = group.costs[str(target.path)] = PassCosts(group.size, on_group, one_rank)
    return costs


# -- a comparison on every rank -----------------------------------------------------------


def group_compare(
    request: CompareRequest,
    group: Group,
    store: ModelStore,
    on_event: Callable[[str, Event], None] = lambda name, event: None,
    progress: Callable[[str], None] = lambda _: None,
    cancelled: Callable[[], bool] = lambda: False,
    clock: Clock = time.perf_counter,
    on_estimates: Callable[[dict[str, MemoryEstimate] | None], None] = lambda e: None,
    on_not_run: Callable[[dict[str, str]], None] = lambda reasons: None,
    on_started: Callable[[CompareResult], None] = lambda result: None,
    guard: FaultGuard | None = None,
) -> CompareResult:
    """``compare.run_compare`` on every rank of ``group`` at once (``store`` from
    ``split_store``). ``on_started`` hears the result before the first strategy; its
    traces fill as strategies run, so a fault can save what ran. A lost group ends
    the run early: ``group.lost`` says why."""
    request = replace(request, group=group.spec)
    result, error = None, None
    try:
        result = start_compare(request, store, progress, on_estimates, on_not_run)
    except (UserError, SettingsError, ModelError) as exc:
        error = str(exc)
    except Exception as exc:  # any failure must reach the check: the others wait there
        error = f"{type(exc).__name__}: {exc}"
    group.check(error)
    costs = measure_pass_costs(group, result.models.target, result.prompt_tokens, progress)
    result.group = {**group.record(), "pass_costs": costs.to_dict()}
    settings = request.settings
    progress(costs.line(max(settings.max_drafts(name) for name in request.strategies)))
    on_started(result)

    def event(name: str, e: Event) -> None:
        on_event(name, e)
        if isinstance(e, Done):
            group.same_tokens(name, result.traces[name].tokens)

    def said(text: str) -> None:
        if guard is not None:
            guard.beat()
        progress(text)

    with guard.running() if guard is not None else _nothing():
        measure_strategies(result, event, said, _asked(group, cancelled, guard), clock)
    if group.lost is not None:
        result.group["lost"] = group.lost  # why the run ended early (the session says)
    return result


def group_sweep(
    request: SweepRequest,
    group: Group,
    store: ModelStore,
    progress: Callable[[SweepProgress], None] = lambda p: None,
    on_message: Callable[[str], None] = lambda m: None,
    cancelled: Callable[[], bool] = lambda: False,
    guard: FaultGuard | None = None,
) -> tuple[list[Cell], bool, dict]:
    """``sweep.run_sweep`` on every rank of ``group`` at once; also returns the group's
    record (with its pass costs), and each cell's why-line says what a target step and
    its verify pass cost on the group and on one rank."""
    request = replace(request, group=group.spec)
    models, error = None, None
    try:
        models = sweep_models(request, store, on_message)
    except (UserError, SettingsError, ModelError) as exc:
        error = str(exc)
    except Exception as exc:  # any failure must reach the check: the others wait there
        error = f"{type(exc).__name__}: {exc}"
    group.check(error)
    prompt = encode_prompt(models.target.tokenizer, request.prompts[0].text)
    costs = measure_pass_costs(group, models.target, prompt, on_message)

    with guard.running() if guard is not None else _nothing():
        cells, complete = run_sweep(request, store, progress, on_message,
                                    _asked(group, cancelled, guard), models)
    for cell in cells:
        drafts = cell.depth if cell.strategy == "mtp" else cell.k
        if isinstance(drafts, int) and drafts:  # a policy's passes vary: its why-line says enough
            cell.why += "; " + costs.line(drafts)
    return cells, complete, {**group.record(), "pass_costs": costs.to_dict()}


def _asked(group: Group, cancelled: Callable[[], bool],
           guard: FaultGuard | None) -> Callable[[], bool]:
    """The group's stop flag, asked after every event of every run: each answer is
    progress for the stall clock, in the runs that stream nothing too (warm-ups,
    repetitions, plain timed again, a sweep's cells)."""
    flag = AgreedFlag(group, cancelled)
    if guard is None:
        return flag

    def asked() -> bool:
        guard.beat()
        return flag()

    return asked


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# -- ending cleanly when the group cannot go on --------------------------------------------


class FaultGuard:
    """Ends this rank cleanly when its group cannot go on, even while a collective
    blocks the main thread: on SIGTERM (``mlx.launch`` sends it to every rank once one
    fails) and when nothing moved for ``stall_seconds`` during a run (a rank stuck or
    a link down: a collective would wait forever). ``on_fault(reason)`` runs in the
    guard's own thread (rank 0 saves what ran there), then the process exits with
    ``EXIT_FAULT``.

    A Python signal handler would only run once the main thread leaves the blocked
    collective, so the guard listens on the interpreter's wakeup fd instead, which the
    signal itself writes to.
    """

    def __init__(self, on_fault: Callable[[str], None], stall_seconds: float) -> None:
        self.on_fault = on_fault
        self.stall_seconds = stall_seconds
        self._ending = threading.Lock()
        self._finished = False
        self._armed = False
        self._last = time.monotonic()
        self._stop = threading.Event()

    def __enter__(self) -> FaultGuard:
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)
        self._handler = signal.signal(signal.SIGTERM, lambda signum, frame: None)
        self._wakeup = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="specdeck-fault-guard",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        signal.set_wakeup_fd(self._wakeup)
        signal.signal(signal.SIGTERM, self._handler)
        self._read.close()
        self._write.close()

    def beat(self) -> None:
        """Something moved: the stall clock starts again."""
        self._last = time.monotonic()

    @contextmanager
    def running(self) -> Iterator[None]:
        """Watch for stalls while the block runs (not while idle or loading)."""
        self.beat()
        self._armed = True
        try:
            yield
        finally:
            self._armed = False

    @contextmanager
    def ending(self) -> Iterator[None]:
        """The main thread's own ending (saving, reporting): a fault waits for it and
        then leaves the process to exit as the main thread decides."""
        with self._ending:
            yield
            self._finished = True

    def _watch(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._read], [], [], 0.5)
            signals = self._read.recv(64) if ready else b""
            if signal.SIGTERM in signals:
                self._fault("stopped by SIGTERM (mlx.launch stops every rank once one "
                            "has failed: see the lines of the others)")
            elif self._armed and time.monotonic() - self._last > self.stall_seconds:
                self._fault(f"no progress for {self.stall_seconds:g} s: a rank is stuck "
                            "or the network is down, and a collective would wait forever")

    def _fault(self, reason: str) -> None:
        with self._ending:
            if self._finished:  # the main thread ended the run already
                self._stop.set()
                return
            try:
                self.on_fault(reason)
            finally:
                os._exit(EXIT_FAULT)
