"""A target split over a group of processes (``engines.distributed``).

The group tests start two ranks on this machine with ``mlx.launch --backend ring -n 2``
(through ``specdeck compare -n 2``, which runs it) on the tiny models: every fixture's
head counts, hidden sizes and vocabulary (320) divide by two. Each launch is bounded by
a timeout.

Tensor parallelism sums each layer's output from two partial matrix products
(``all_sum``), where one process computes one product: float32 rounding may differ in
the last bits. On these fixtures no greedy choice is that close, so the two ranks
decode exactly what one process decodes, and the tests say so. Were a token ever to
flip, the property that must still hold is the lossless one: on the group, every
strategy equals the group's own plain decoding; each test checks that first.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from helpers.processes import gone

from specdeck.engines.runs.compare import run_compare
from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.core.errors import GroupError, SettingsError
from specdeck.engines.distributed.costs import PASS_SIZES, PassCosts
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.core.requests import (
    STALL_SECONDS, CompareRequest, GroupSpec, SweepPrompt, SweepRequest,
)
from specdeck.sessions.diff import diff_sessions
from specdeck.sessions.session import (
    SCHEMA_PATH, load_session, read_document, result_document, session_from_document,
)

#: One worker starts the groups, one after another: two groups at once on two cores wait
#: on each other's ranks.
pytestmark = pytest.mark.xdist_group("ranks")

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):"
#: Seconds one launch of two ranks may take on a busy machine.
LAUNCH_TIMEOUT = 300
#: The processor time rank 0 spends decoding before a fault test breaks a rank: enough
#: for the partial trace to hold tokens however loaded the machine (0.5 s of wall time
#: gave none in 1 run of ~30 on a loaded CI machine; 0.2 s of processor time is ~100
#: tokens), far short of the 5000 tokens' end (~60 s on two ranks of the tiny model).
DECODING_A_WHILE = 0.2


def specdeck(*args: str, env: dict | None = None, timeout: int = LAUNCH_TIMEOUT):
    return subprocess.run([sys.executable, "-m", "specdeck", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def one_process(target: Path, draft: Path | None, strategies: list[str], max_tokens: int):
    request = CompareRequest(
        target=str(target), draft=str(draft) if draft else None, strategies=strategies,
        prompt=PROMPT, settings=DecodeSettings(max_tokens=max_tokens, stop_at_eos=False),
        warmup_tokens=0)
    return run_compare(request, ModelStore())


def one_process_tokens(target: Path, draft: Path | None, strategies: list[str],
                       max_tokens: int) -> dict[str, list[int]]:
    result = one_process(target, draft, strategies, max_tokens)
    return {name: trace.tokens for name, trace in result.traces.items()}


def group_run(tmp_path: Path, shard: str, target: Path, draft: Path | None,
              strategies: list[str], max_tokens: int) -> dict:
    out = tmp_path / f"{shard}.json"
    args = ["compare", "--headless", "--shard", shard, "-n", "2", "--target", str(target),
            "--strategies", ",".join(strategies), "--max-tokens", str(max_tokens),
            "--ignore-eos", "--warmup-tokens", "2", "--prompt", PROMPT, "--json", str(out)]
    if draft:
        args += ["--draft", str(draft)]
    run = specdeck(*args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    # Rank 0 alone reports: one summary line per strategy, one "saved" line.
    lines = [line for line in run.stdout.splitlines() if line.strip().split(":")[0] in strategies]
    assert [line.split(":")[0].strip() for line in lines] == strategies, run.stdout
    assert run.stderr.count("specdeck: saved ") == 1
    return read_document(out)


def assert_lossless_on_the_group(doc: dict, strategies: list[str]) -> None:
    tokens = {name: doc["strategies"][name]["tokens"] for name in strategies}
    for name in strategies[1:]:
        assert tokens[name] == tokens["plain"], f"{name} differs from plain on the group"


# -- two ranks decode what one process decodes ---------------------------------------------


@pytest.mark.slow
def test_two_ranks_decode_what_one_process_decodes(tiny_family, tmp_path) -> None:
    """``compare --headless`` on a hybrid target split by pipeline: the document says so
    (the group, what a pass costs, each rank's memory), every strategy decodes what one
    process decodes, and mlx-optiq's capture pass, which runs the layers without the
    collectives, gives way to checkpoint and replay. (By tensor: the playground's engine
    below, and the llama pair in the fault tests.)"""
    strategies = ["plain", "ngram", "mtp"]
    target = tiny_family["mtp_target"]
    doc = group_run(tmp_path, "pipeline", target, None, strategies, 12)
    assert_lossless_on_the_group(doc, strategies)
    # See the module docstring: exact on these fixtures.
    alone = result_document(one_process(target, None, strategies, 12))
    assert {n: doc["strategies"][n]["tokens"] for n in strategies} == \
        {n: alone["strategies"][n]["tokens"] for n in strategies}
    rewinds = {r["rollback"] for n in strategies for r in doc["strategies"][n]["rounds"]}
    assert "captured" not in rewinds and "replay" in rewinds, rewinds
    # The diff of the two runs names the group, and finds the outputs identical.
    report = diff_sessions(session_from_document(alone), session_from_document(doc))
    changed = {c.path: (c.a, c.b) for c in report.changes}
    assert changed["config.group.size"] == (None, 2)
    assert changed["config.group.shard"] == (None, "pipeline") and report.identical

    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)
    group = doc["config"]["group"]
    assert (group["size"], group["backend"], group["shard"]) == (2, "ring", "pipeline")
    assert group["hosts"] == ["127.0.0.1"] and "lost" not in group
    costs = PassCosts.from_dict(group["pass_costs"])
    assert costs is not None and costs.ranks == 2 and len(costs.group) == len(PASS_SIZES)
    assert costs.one_rank is not None  # the tiny target fits on rank 0 whole
    assert doc["partial"] is False
    # Each rank holds half the target's layers: fewer weights, half the KV cache.
    per_rank = doc["config"]["memory_estimates"]["mtp"]
    request = CompareRequest(target=str(target), strategies=strategies, prompt=PROMPT)
    from specdeck.engines.runs.compare import describe_models, estimate_memory

    whole = estimate_memory(request, len(doc["config"]["prompt_tokens"]),
                            describe_models(request, ModelStore()))["mtp"]
    assert per_rank["kv_cache"] < whole.kv_cache and per_rank["weights"] < whole.weights


def test_a_model_mlx_lm_cannot_split_that_way_is_refused_in_one_line(tiny_family) -> None:
    """Before any rank starts: the ranks would load the model only to say so."""
    run = specdeck("compare", "--headless", "--shard", "pipeline", "-n", "2", "--target",
                   str(tiny_family["llama_target"]), "--strategies", "plain",
                   "--prompt", PROMPT, "--no-save")
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert run.returncode == 2, run.stderr[-2000:]
    assert errors == [f"specdeck: error: {tiny_family['llama_target']} is a llama model, which "
                      "mlx-lm cannot split by pipeline: use --shard tensor"], run.stderr[-2000:]
    assert "starting 2 ranks" not in run.stderr


_AGREEMENTS = """
import json
from specdeck.engines.distributed.split import AgreedFlag, start_group
from specdeck.engines.core.errors import GroupError
from specdeck.engines.core.requests import GroupSpec

group = start_group(GroupSpec())
shared = group.share(b"from rank 0" if group.lead else b"").decode()
out = {"rank": group.rank, "size": group.size, "shared": shared}
try:
    group.check("no model here" if group.rank == 1 else None)
except GroupError as exc:
    out["check"] = str(exc)
flag = AgreedFlag(group, lambda: group.rank == 1, every=4)  # rank 1 alone interrupted
out["stopped_at"] = next(i for i in range(1, 100) if flag())
group.same_tokens("plain", [1, 2, 3] if group.lead else [1, 2, 4])
out["lost"] = group.lost
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.mark.slow
def test_the_ranks_agree_through_collectives() -> None:
    """Rank 0's data reaches every rank; an error on one rank stops all, naming it; a
    Ctrl+C on one rank stops every rank after the same event; ranks that decoded
    differently are caught."""
    from specdeck.hosts.launch import launch_argv

    argv = launch_argv(GroupSpec(ranks=2), ["-c", _AGREEMENTS])
    run = subprocess.run(argv, stdin=subprocess.PIPE, capture_output=True, text=True,
                         timeout=LAUNCH_TIMEOUT)
    results = sorted((json.loads(line[len("RESULT "):]) for line in run.stdout.splitlines()
                      if line.startswith("RESULT ")), key=lambda r: r["rank"])
    assert [r["rank"] for r in results] == [0, 1], run.stdout + run.stderr[-2000:]
    for r in results:
        assert r["size"] == 2 and r["shared"] == "from rank 0"
        assert r["check"] == "rank 1: no model here"
        assert r["stopped_at"] == 4  # the first time all ranks asked together
        assert r["lost"].startswith("the ranks disagree on plain's output (rank 0: 3 tokens")


# -- a group that cannot go on ---------------------------------------------------------------


def _rank_pid(mark: str, rank: int) -> int | None:
    """The process of ``rank`` among those started with ``SPECDECK_TEST_MARK=mark``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SPECDECK_TEST_MARK={mark}".encode() in environ and \
                f"MLX_RANK={rank}".encode() in environ:
            return int(entry.name)
    return None


def _cpu_seconds(pid: int) -> float:
    """User and system time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Launched:
    """``specdeck compare -n 2`` running in the background, its stderr read line by line."""

    def __init__(self, args: list[str]) -> None:
        self.mark = uuid.uuid4().hex
        self.process = subprocess.Popen(
            [sys.executable, "-m", "specdeck", *args], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
            env={**os.environ, "SPECDECK_TEST_MARK": self.mark})
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.put(line)

    def wait_for(self, text: str, seconds: float = LAUNCH_TIMEOUT) -> None:
        deadline = time.monotonic() + seconds
        while not any(text in line for line in self.seen):
            try:
                self.seen.append(self.lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                pass
            if time.monotonic() > deadline:
                self.fail(f"no {text!r} in time")

    def fail(self, why: str) -> None:
        self.process.kill()
        self.reader.join(timeout=5)  # ranks left behind may hold the pipe open
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        pytest.fail(f"{why}; stderr:\n{''.join(self.seen)[-3000:]}")

    def rank_pid(self, rank: int) -> int:
        pid = _rank_pid(self.mark, rank)
        assert pid is not None, f"rank {rank} not found"
        return pid

    def decode_a_while(self) -> None:
        """Once plain runs, until rank 0 has spent ``DECODING_A_WHILE`` seconds of
        processor time decoding (a loaded machine takes longer to get there)."""
        self.wait_for("specdeck: running plain")
        rank0 = self.rank_pid(0)
        start = _cpu_seconds(rank0)
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        while True:
            try:
                if _cpu_seconds(rank0) - start >= DECODING_A_WHILE:
                    return
            except FileNotFoundError:
                self.fail("rank 0 ended before it decoded a while")
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.fail("rank 0 never decoded")
            time.sleep(0.05)

    def finish(self) -> tuple[int, str]:
        self.process.wait(timeout=LAUNCH_TIMEOUT)
        self.reader.join(timeout=LAUNCH_TIMEOUT)  # to the end of its stderr
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return self.process.returncode, "".join(self.seen)


def _fault_run(tiny_family, sessions: Path, *extra: str) -> Launched:
    return Launched(["compare", "--headless", "--shard", "tensor", "-n", "2",
                     "--target", str(tiny_family["llama_target"]), "--strategies",
                     "plain,ngram", "--max-tokens", "5000", "--ignore-eos", "--warmup-tokens",
                     "0", "--prompt", PROMPT, "--sessions-dir", str(sessions), *extra])


def _partial_session(sessions: Path, target: Path):
    """The one partial session of a broken run: plain's tokens, as far as they got, are
    what one process decodes (the llama pair split by tensor, exact on these fixtures)."""
    saved = sorted(sessions.glob("*.json"))
    assert len(saved) == 1 and saved[0].name.endswith("_plain_partial.json"), saved
    session = load_session(saved[0])
    assert session.partial and session.strategies == ["plain"]  # ngram never started
    got = session.traces["plain"].tokens
    assert 0 < len(got) < 5000
    assert got == one_process_tokens(target, None, ["plain"], len(got))["plain"]
    return session


@pytest.mark.slow
def test_a_killed_rank_ends_the_run_with_an_error_and_a_partial_session(
        tiny_family, tmp_path) -> None:
    run = _fault_run(tiny_family, tmp_path / "sessions")
    run.decode_a_while()
    os.kill(run.rank_pid(1), signal.SIGKILL)
    status, stderr = run.finish()
    assert status == 1, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("specdeck: error:")]
    assert len(errors) == 1, stderr[-3000:]
    assert "lost a rank" in errors[0] or "SIGTERM" in errors[0], errors
    assert "(partial)" in stderr and "Traceback" not in stderr
    session = _partial_session(tmp_path / "sessions", tiny_family["llama_target"])
    assert session.config["group"]["size"] == 2


@pytest.mark.slow
def test_a_stuck_rank_cannot_hang_the_run(tiny_family, tmp_path) -> None:
    """Rank 1 stopped (alive, silent): rank 0 waits in a collective that never
    completes, until the stall guard ends the run and saves what ran."""
    # 3 s, not 2: with the whole suite and a profiler on two cores, rank 0 once ended
    # before rank 1 was stopped (no progress for 2 s while it streamed).
    run = _fault_run(tiny_family, tmp_path / "sessions", "--stall-timeout", "3")
    run.decode_a_while()
    stuck = run.rank_pid(1)
    os.kill(stuck, signal.SIGSTOP)
    started = time.monotonic()
    try:
        run.wait_for("specdeck: error:", seconds=60)
        waited = time.monotonic() - started
    finally:
        os.kill(stuck, signal.SIGKILL)  # mlx.launch would wait for it to stop forever
    status, stderr = run.finish()
    assert status == 1
    assert 3 <= waited < 60
    assert "no progress for 3 s" in stderr and "(partial)" in stderr, stderr[-3000:]
    _partial_session(tmp_path / "sessions", tiny_family["llama_target"])


# -- sweeps and the playground's engine --------------------------------------------------------


@pytest.mark.slow
def test_a_sweep_on_two_ranks_names_what_a_pass_costs_on_the_group(tiny_family,
                                                                    tmp_path) -> None:
    out = tmp_path / "sweep.json"
    run = specdeck("sweep", "--shard", "tensor", "-n", "2", "--target",
                   str(tiny_family["llama_target"]), "--draft", str(tiny_family["llama_draft"]),
                   "--strategies", "draft", "-k", "1,2", "--reps", "1", "--warmup", "0",
                   "--max-tokens", "12", "--prompt", PROMPT, "--json", str(out))
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(out.read_bytes())
    assert doc["config"]["group"]["size"] == 2 and doc["config"]["group"]["pass_costs"]
    drafts = [c for c in doc["cells"] if c["strategy"] == "draft"]
    assert [c["k"] for c in drafts] == [1, 2] and all(c["correct"] for c in drafts)
    for cell in drafts:
        assert "a target step takes" in cell["why"] and "on 2 ranks" in cell["why"]
        assert f"a verify pass of {cell['k'] + 1} tokens" in cell["why"]
    assert run.stdout.count("specdeck sweep") == 1  # rank 0's table alone


@pytest.mark.slow
def test_the_playground_engine_runs_on_a_group(tiny_family) -> None:
    """The playground's engine on two ranks, a hybrid pair split by tensor, several runs
    on one launch: every strategy decodes what one process decodes (rewinding by replay,
    as above); sampling, every rank drawing the same keys; a cancel."""
    from specdeck.hosts.engine import EventBatch, RunCommand, RunEnded
    from specdeck.hosts.group import GroupHost

    ended: queue.SimpleQueue = queue.SimpleQueue()
    tokens: dict[str, list[int]] = {}
    rewinds: set[str] = set()

    def deliver(message) -> None:
        if isinstance(message, EventBatch):
            for name, event in message.batch:
                tokens.setdefault(name, []).extend(getattr(event, "tokens", []))
                rewinds.add(getattr(event, "rollback", "none"))
        elif isinstance(message, RunEnded):
            ended.put(message)

    spec = GroupSpec(shard="tensor", ranks=2)
    strategies = ["plain", "draft", "ngram", "mtp"]
    target, draft = tiny_family["mtp_target"], tiny_family["hybrid_draft"]
    request = CompareRequest(
        target=str(target), draft=str(draft), strategies=strategies, prompt=PROMPT,
        group=spec, warmup_tokens=0, settings=DecodeSettings(max_tokens=12, stop_at_eos=False))
    host = GroupHost(deliver, spec)
    try:
        host.submit(RunCommand(1, request, save=False))
        first = ended.get(timeout=LAUNCH_TIMEOUT)
        assert first.run_id == 1 and first.error is None
        assert tokens == one_process_tokens(target, draft, strategies, 12)
        assert "captured" not in rewinds and "replay" in rewinds, rewinds
        launcher = host.pid
        tokens.clear()
        # The same ranks, models loaded; sampling at temperature 0.8, every rank drawing
        # the same keys: a rank that accepted differently would end the run with an error
        # (each strategy's tokens are compared across ranks at its end).
        hot = replace(request, strategies=["plain", "draft"], settings=replace(
            request.settings, sampling=Sampling(temperature=0.8, seed=3)))
        host.submit(RunCommand(2, hot, save=False))
        second = ended.get(timeout=LAUNCH_TIMEOUT)
        assert second.run_id == 2 and second.error is None and host.pid == launcher
        assert len(tokens["plain"]) == len(tokens["draft"]) == 12
        # Cancelled on rank 0 by the app: every rank stops after the same event.
        tokens.clear()
        long = replace(hot, settings=replace(request.settings, max_tokens=5000))
        host.submit(RunCommand(3, long, save=False))
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        while not tokens.get("plain") and time.monotonic() < deadline:
            time.sleep(0.05)
        host.cancel(3)
        third = ended.get(timeout=LAUNCH_TIMEOUT)
        assert third.run_id == 3 and third.error is None and host.pid == launcher
        assert 0 < len(tokens["plain"]) < 5000 and "draft" not in tokens
    finally:
        host.close()
    assert host.pid is None and gone(launcher, 10)


# -- pieces, without a group ---------------------------------------------------------------------


def test_a_model_type_without_a_module_of_its_own_is_left_to_the_ranks(tiny_family,
                                                                     tmp_path) -> None:
    """The check before launch reads mlx-lm's sources: a type mlx-lm maps to another's
    module (mistral to llama) or a name that is no module is not refused there."""
    import shutil

    from specdeck.engines.distributed.splittable import refuse_unsplittable

    with pytest.raises(GroupError, match="cannot split by pipeline"):
        refuse_unsplittable(str(tiny_family["llama_target"]), "pipeline")
    for kind in ("mistral", "../../llama", "llama\n"):
        folder = tmp_path / f"m{len(list(tmp_path.iterdir()))}"
        shutil.copytree(tiny_family["llama_target"], folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "model_type": kind}))
        assert refuse_unsplittable(str(folder), "pipeline") is None, kind


def test_the_playground_refuses_a_target_its_group_cannot_split(tiny_family) -> None:
    """The app's group host says so at once, before any rank starts, as the command does."""
    from specdeck.hosts.engine import RunCommand, RunEnded
    from specdeck.hosts.group import GroupHost

    said: list = []
    spec = GroupSpec(shard="pipeline", ranks=2)
    host = GroupHost(said.append, spec)
    request = CompareRequest(target=str(tiny_family["llama_target"]), strategies=["plain"],
                             prompt=PROMPT, group=spec)
    host.submit(RunCommand(1, request, save=False))
    assert [type(m) for m in said] == [RunEnded] and host.pid is None
    assert said[0].error.endswith("which mlx-lm cannot split by pipeline: use --shard tensor")


def test_group_settings_are_checked_with_messages_a_user_can_act_on() -> None:
    with pytest.raises(SettingsError, match="IP addresses, not 'mac-1'"):
        GroupSpec(hosts=("mac-1", "mac-2")).validate()
    with pytest.raises(SettingsError, match="hosts or a hostfile, not both"):
        GroupSpec(hosts=("10.0.0.1",), hostfile="hosts.json").validate()
    with pytest.raises(SettingsError, match="unknown split 'layers'"):
        GroupSpec(shard="layers").validate()
    with pytest.raises(SettingsError, match="3 processes do not divide evenly over 2 hosts"):
        GroupSpec(hosts=("10.0.0.1", "10.0.0.2"), ranks=3).validate()
    GroupSpec(backend="jaccl", hosts=("mac-1", "mac-2")).validate()  # names are fine there
    run = specdeck("compare", "--headless", "-n", "2", "--prompt", "x", timeout=60)
    assert run.returncode == 2 and "add --shard tensor" in run.stderr


def test_the_mlx_launch_command_line_and_its_exit_status() -> None:
    from specdeck.hosts.launch import launch_argv, rank_status

    local = launch_argv(GroupSpec(ranks=2), ["-m", "specdeck", "sweep"])
    assert local[:3] == [sys.executable, "-m", "specdeck.hosts.mlx_launcher"]
    assert local[local.index("-n") + 1] == "2" and "--starting-port" in local
    assert local[local.index("--python") + 1] == sys.executable
    assert local[local.index("--"):] == ["--", "-m", "specdeck", "sweep"]
    hosts = launch_argv(GroupSpec(hosts=("10.0.0.1", "10.0.0.2"), ranks=2, backend="ring"),
                        ["-m", "specdeck"], python="/opt/venv/bin/python")
    assert hosts[hosts.index("--hosts") + 1] == "10.0.0.1,10.0.0.2"
    assert "SPECDECK_GROUP_HOSTS=10.0.0.1,10.0.0.2" in hosts and "--starting-port" not in hosts
    assert hosts[hosts.index("--python") + 1] == "/opt/venv/bin/python"
    hostfile = launch_argv(GroupSpec(hostfile="h.json", backend="jaccl"), ["-m", "specdeck"])
    assert hostfile[hostfile.index("--hostfile") + 1] == "h.json" and "-n" not in hostfile
    # mlx.launch exits 0 whatever its ranks did: the status comes from its warnings.
    assert rank_status([]) == 0
    assert rank_status([(1, -9), (0, 1)]) == 1
    assert rank_status([(1, 3)]) == 3 and rank_status([(1, None)]) == 1
    assert rank_status([(1, 3), (0, -15)]) == 3 and rank_status([(1, 3), (0, 2)]) == 2


def test_the_launcher_waits_without_spinning() -> None:
    """Two ranks that sleep 1.5 s: mlx.launch as it comes spends ~1 processor-second
    relaying them (a thread per rank polls its stdin, always writable); the launcher
    specdeck runs spends a small fraction of that."""
    from specdeck.hosts.launch import launch_argv

    argv = launch_argv(GroupSpec(ranks=2), ["-c", "import time; time.sleep(1.5)"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(argv, stdin=subprocess.PIPE, capture_output=True, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert run.returncode == 0, run.stderr
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert used < 0.5, f"{used:.2f} processor-seconds for two sleeping ranks"


def test_a_refusal_names_the_models_that_can_be_split() -> None:
    from specdeck.engines.distributed.split import Group, split_model
    from specdeck.engines.distributed.splittable import refusal

    two = Group(None, GroupSpec(shard="pipeline", ranks=2), 0)
    with pytest.raises(GroupError, match="cannot split by pipeline: use --shard tensor"):
        split_model(object(), {"model_type": "llama"}, two, "t")
    message = refusal("t", "gpt2", "tensor")
    assert "cannot split over machines" in message
    assert "--shard tensor splits" in message and "llama" in message and "qwen3_5" in message
    assert "--shard pipeline splits" in message


def test_a_split_hybrid_never_takes_the_capture_pass(tiny_family) -> None:
    """A one-rank split (what ``shard`` leaves is the same model with the collectives in
    place) already turns the capture pass off; decoding stays exact."""
    import mlx.core as mx

    from specdeck.engines.decode.capture import is_split, supports_capture
    from specdeck.engines.decode.run import Models, run_strategy

    store = ModelStore()
    whole = store.get(str(tiny_family["mtp_target"]))
    assert supports_capture(whole.model) and not is_split(whole.model)
    split = ModelStore(split=(str(tiny_family["mtp_target"]),
                              lambda model, config: model.shard(mx.distributed.init())))
    target = split.get(str(tiny_family["mtp_target"]))
    assert is_split(target.model) and not supports_capture(target.model)
    prompt = whole.tokenizer.encode(PROMPT)
    settings = DecodeSettings(max_tokens=16, stop_at_eos=False)
    plain = [t for e in run_strategy("plain", Models(whole), prompt, settings)
             for t in getattr(e, "tokens", [])]
    events = list(run_strategy("ngram", Models(target), prompt, settings))
    assert [t for e in events for t in getattr(e, "tokens", [])] == plain
    assert {getattr(e, "rollback", None) for e in events} <= {None, "none", "trim", "replay"}


def test_runs_that_stream_nothing_tell_the_stall_guard_they_move(tiny_family) -> None:
    """A warm-up, plain timed again and a sweep's cells stream no event, yet each step
    is progress: plain's second timing, longer than ``--stall-timeout``, read as a stuck
    rank (2 s, 400 tokens on two ranks: 2 of 5 runs on a loaded machine)."""
    from specdeck.engines.distributed.split import (
        FaultGuard, group_compare, group_sweep, start_group,
    )

    said: list[str] = []
    beats: list[int] = []  # how many progress lines were said at each beat

    class Guard(FaultGuard):
        def beat(self) -> None:
            beats.append(len(said))
            super().beat()

    group, target = start_group(GroupSpec()), str(tiny_family["llama_target"])
    request = CompareRequest(target=target, strategies=["plain", "ngram"], prompt=PROMPT,
                             settings=DecodeSettings(max_tokens=20, stop_at_eos=False),
                             warmup_tokens=6)
    with Guard(lambda reason: None, STALL_SECONDS) as guard:
        group_compare(request, group, ModelStore(), progress=said.append, guard=guard)
        for line, steps in (("warming up plain", 6), ("timing plain again", 20)):
            after = next(i for i, text in enumerate(said) if text.startswith(line)) + 1
            assert beats.count(after) >= steps, (line, said, beats)
        beats.clear()
        sweep = SweepRequest(target=target, prompts=[SweepPrompt("p", PROMPT)],
                             strategies=["ngram"], reps=2, warmup=0, max_tokens=12)
        group_sweep(sweep, group, ModelStore(), guard=guard)
        assert len(beats) >= 2 * 12  # plain's two runs alone


def test_pass_costs_read_back_and_say_what_the_network_adds() -> None:
    group = tuple(0.010 + 0.0002 * i for i in range(len(PASS_SIZES)))
    one = tuple(0.004 * (1 + 0.5 * i) for i in range(len(PASS_SIZES)))
    costs = PassCosts(2, group, one)
    assert PassCosts.from_dict(costs.to_dict()) == costs
    line = costs.line(4)
    assert line.startswith("a target step takes 10 ms on 2 ranks (4.0 ms on one)")
    assert "a verify pass of 5 tokens 11 ms (12 ms): 1.08 target steps against 3.00" in line
    assert PassCosts(1, group).line(0) == "a target step takes 10 ms on one rank"
    for damaged in ({"ranks": 2, "group": [1.0] * 3}, {"ranks": 0, "group": list(group)},
                    {"ranks": 2, "group": list(group), "one_rank": "fast"}, [],
                    {"ranks": 2, "group": [float("nan")] * len(PASS_SIZES)}):
        assert PassCosts.from_dict(damaged) is None


def test_the_memory_estimate_is_per_rank(tiny_family) -> None:
    from specdeck.engines.models.catalog import describe_dir
    from specdeck.engines.measure.memory import Split, estimate

    info = describe_dir(tiny_family["mtp_target"])
    settings = DecodeSettings(max_tokens=200)
    whole = estimate("ngram", info, settings, 20)
    for shard in ("tensor", "pipeline"):
        half = estimate("ngram", info, settings, 20, split=Split(info.path, 2, shard))
        assert half.kv_cache == whole.kv_cache // 2
        assert half.recurrent_state == whole.recurrent_state // 2
        assert whole.weights // 2 < half.weights < whole.weights  # embeddings stay whole
        # A split hybrid restores one state instead of keeping one per verified token.
        assert half.rollback_snapshot == half.recurrent_state


def test_the_settings_dialog_edits_the_group_and_the_app_picks_its_engine() -> None:
    from specdeck.hosts.engine import ProcessHost
    from specdeck.hosts.group import GroupHost
    from helpers.app import live_app
    from specdeck.tui.settings_screen import apply_form, form_values

    request = CompareRequest(target="t", strategies=["plain"], prompt="p")
    values = form_values(request)
    assert (values["shard"], values["ranks"], values["hosts"]) == ("", "", "")
    split = apply_form(request, {**values, "shard": "tensor", "ranks": "",
                                 "hosts": "10.0.0.1, 10.0.0.2"})
    assert split.group == GroupSpec(shard="tensor", hosts=("10.0.0.1", "10.0.0.2"), ranks=2)
    assert form_values(split)["hosts"] == "10.0.0.1,10.0.0.2"
    hostfile = apply_form(request, {**values, "shard": "pipeline", "hosts": "macs.json",
                                    "backend": "jaccl"})
    assert (hostfile.group.hostfile, hostfile.group.backend) == ("macs.json", "jaccl")
    with pytest.raises(SettingsError, match="ranks must be a whole number"):
        apply_form(request, {**values, "shard": "tensor", "ranks": "two"})
    with pytest.raises(SettingsError, match="unknown split"):
        apply_form(request, {**values, "shard": "rows"})
    assert apply_form(split, {**form_values(split), "shard": ""}).group is None

    # The app runs a group's comparisons on a GroupHost (started on the first run).
    app = live_app(replace(split, group=GroupSpec(shard="tensor", ranks=2)), engine_process=True)
    assert isinstance(app._host, GroupHost) and app._host.pid is None
    app.request = request
    assert isinstance(app._engine(), ProcessHost)
