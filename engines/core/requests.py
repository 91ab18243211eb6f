"""What a comparison or a sweep is asked to run: plain dataclasses without mlx.

The app edits these and hands them to the engine process; sessions and sweep files record
them. Nothing here imports mlx, so the TUI imports them directly.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field, replace

from specdeck.engines.core.config import DTYPES, DecodeSettings, DraftCount, Sampling
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.core.strategies import OWN, SWEPT, names, strategy_of

#: Timed repetitions of each strategy a comparison may ask for.
MAX_REPEATS = 20
#: Timed (and warm-up) runs of each cell a sweep may ask for.
MAX_SWEEP_REPS = 100


#: What ``mlx.launch`` sets in each process it starts: that process's rank in the group.
RANK_VARIABLE = "MLX_RANK"
#: The hosts as the user named them, which specdeck passes to every rank it starts.
HOSTS_VARIABLE = "SPECDECK_GROUP_HOSTS"
#: Seconds without progress before a split run counts as stalled (a rank stuck, a link
#: down): a long prefill of a large model over slow links stays well within it.
STALL_SECONDS = 300.0


def launched() -> bool:
    """Whether ``mlx.launch`` started this process as one rank of a group."""
    return RANK_VARIABLE in os.environ


#: How mlx-lm splits a target over a group of processes: each layer's weights across the
#: ranks (``model.shard``, tensor parallelism), or whole layers per rank
#: (``model.pipeline``, on the model classes that offer it).
SHARD_MODES = ("tensor", "pipeline")
#: The backends ``mlx.launch`` starts on Macs and Linux (``jaccl``: RDMA over
#: Thunderbolt 5; ``mpi``: an MPI installation on every host; ``ring``: TCP sockets).
BACKENDS = ("ring", "jaccl", "jaccl-ring", "mpi")
#: The most processes a group may have: each holds a share of the target and listens on
#: a port of its own; no group of Macs comes near it.
MAX_RANKS = 256


@dataclass(frozen=True)
class GroupSpec:
    """A target split over a group of processes started by ``mlx.launch``: how it is
    split and where the processes run. Sessions record it with the group's size."""

    shard: str = "tensor"
    backend: str = "ring"
    #: Hosts as the user named them (IP addresses for the ring backend); empty: this
    #: machine only.
    hosts: tuple[str, ...] = ()
    #: An ``mlx.launch`` hostfile (JSON) naming the hosts instead.
    hostfile: str | None = None
    #: Processes in the group (on this machine when no hosts are named); once running,
    #: the group's real size.
    ranks: int = 2

    def validate(self) -> None:
        if self.shard not in SHARD_MODES:
            raise SettingsError(
                f"unknown split {self.shard!r} (--shard {' or '.join(SHARD_MODES)})")
        if self.backend not in BACKENDS:
            raise SettingsError(
                f"unknown backend {self.backend!r} (choose from {', '.join(BACKENDS)})")
        if self.hosts and self.hostfile:
            raise SettingsError("name the hosts or a hostfile, not both")
        if any(not h or h != h.strip() or "," in h for h in self.hosts):
            raise SettingsError("hosts are comma-separated names or addresses, none empty")
        if not 1 <= self.ranks <= MAX_RANKS:
            raise SettingsError(f"a group has from 1 to {MAX_RANKS} processes (got {self.ranks})")
        if self.hosts and self.ranks % len(self.hosts):
            raise SettingsError(
                f"{self.ranks} processes do not divide evenly over {len(self.hosts)} hosts")
        if self.backend == "ring" and not launched():
            for host in self.hosts:
                try:
                    ipaddress.ip_address(host)
                except ValueError:
                    raise SettingsError(
                        f"the ring backend connects to IP addresses, not {host!r}: name the "
                        "hosts by address, or write a hostfile with each host's ssh name "
                        "and ips (--hostfile)") from None

    @property
    def wants_launch(self) -> bool:
        """Whether more than one process is asked for and this one is not a rank yet:
        it then starts the group (``mlx.launch``) instead of running."""
        return not launched() and (self.ranks > 1 or self.hostfile is not None)


def require_draft(strategies: list[str], draft: object) -> None:
    """Refuse strategies that need a draft model when none is given."""
    for strategy in map(strategy_of, strategies):
        if strategy and strategy.draft_model == "always" and not draft:
            raise SettingsError(strategy.needs)


@dataclass
class CompareRequest:
    """What to compare: models, strategies, prompt and settings."""

    target: str
    strategies: list[str]
    prompt: str
    settings: DecodeSettings = field(default_factory=DecodeSettings)
    draft: str | None = None
    #: The model whose MTP head drafts for the mtp strategy; None: the target itself.
    mtp_model: str | None = None
    revision: str | None = None
    #: Apply the tokenizer's chat template: True, False, or None for "if it has one".
    chat: bool | None = None
    warmup_tokens: int = 8
    #: Timed runs of each strategy, taking turns (a strategy's median one is kept). With
    #: one, plain is timed a second time after the others, to tell a speedup from noise.
    repeats: int = 1
    #: Refuse to load when the memory estimate does not fit in free memory (else warn).
    strict_memory: bool = False
    #: Run even when the estimate is beyond the machine's whole memory (else refused).
    force: bool = False
    #: Split the target over a group of processes (``engines.distributed``); None: one.
    group: GroupSpec | None = None
    #: ``fast`` (half precision run as float32 on the CPU) or ``native`` (as stored).
    dtype: str = "fast"

    def validate(self) -> None:
        self.settings.validate()
        if self.group is not None:
            self.group.validate()
        if self.dtype not in DTYPES:
            raise SettingsError(f"dtype must be one of {', '.join(DTYPES)} (got {self.dtype!r})")
        if not 1 <= self.repeats <= MAX_REPEATS:
            raise SettingsError(f"repeats must be between 1 and {MAX_REPEATS} (got {self.repeats})")
        if not self.strategies:
            raise SettingsError("choose at least one strategy")
        unknown = [s for s in self.strategies if strategy_of(s) is None]
        if unknown:
            raise SettingsError(f"unknown strategy {unknown[0]!r} (choose from {names()})")
        if len(set(self.strategies)) != len(self.strategies):
            raise SettingsError("a strategy is listed twice")
        for name in self.strategies:
            self.settings.for_pane(name)
        require_draft(self.strategies, self.draft)
        if not self.prompt:
            raise SettingsError("the prompt is empty")
        if self.warmup_tokens < 0:
            raise SettingsError("warm-up tokens must be >= 0")


@dataclass(frozen=True, slots=True)
class SweepPrompt:
    """One prompt of a sweep; ``kind`` groups prompts in the summary (code, prose...)."""

    name: str
    text: str
    kind: str = ""


@dataclass(frozen=True, slots=True)
class CellSpec:
    """One point of the grid."""

    prompt: str
    strategy: str
    temperature: float
    k: DraftCount | None = None
    depth: DraftCount | None = None
    n: int | None = None

    @property
    def label(self) -> str:
        if self.strategy == "draft":
            return f"draft k={self.k}"
        if self.strategy == "mtp":
            return f"mtp depth={self.depth}"
        if self.strategy == "ngram":
            return f"ngram n={self.n} k={self.k}"
        return self.strategy

    def settings(self, base: DecodeSettings, seed: int) -> DecodeSettings:
        changes: dict = {"sampling": replace(base.sampling, temperature=self.temperature, seed=seed)}
        if self.strategy == "draft":
            changes["num_draft_tokens"] = self.k
        elif self.strategy == "mtp":
            changes["mtp_depth"] = self.depth
        elif self.strategy == "ngram":
            changes["ngram_n"], changes["ngram_k"] = self.n, self.k
        return replace(base, **changes)


@dataclass
class SweepRequest:
    target: str
    prompts: list[SweepPrompt]
    strategies: list[str] = field(default_factory=lambda: ["draft"])
    draft: str | None = None
    mtp_model: str | None = None
    #: k values (and ``auto``) for draft and ngram, depths (and ``auto``) for mtp.
    ks: list[DraftCount] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    depths: list[DraftCount] = field(default_factory=lambda: [1, 2, 3])
    ngram_ns: list[int] = field(default_factory=lambda: [3])
    temperatures: list[float] = field(default_factory=lambda: [0.0])
    reps: int = 5
    warmup: int = 1
    max_tokens: int = 128
    #: Cells whose robust CV is above this are flagged as noisy.
    noisy_cv: float = 0.05
    #: Top-p and the like for every cell; each cell sets its own temperature, and its
    #: repetition r runs with seed ``sampling.seed + r``.
    sampling: Sampling = field(default_factory=Sampling)
    #: Refuse to load when the memory estimate does not fit in free memory (else warn).
    strict_memory: bool = False
    #: Run even when the estimate is beyond the machine's whole memory (else refused).
    force: bool = False
    #: Split the target over a group of processes (``engines.distributed``); None: one.
    group: GroupSpec | None = None
    #: How the weights are kept (``CompareRequest.dtype``).
    dtype: str = "fast"

    def cells(self) -> list[CellSpec]:
        cells = []
        for prompt in self.prompts:
            for temp in self.temperatures:
                cells.append(CellSpec(prompt.name, "plain", temp))
                if "draft" in self.strategies:
                    cells += [CellSpec(prompt.name, "draft", temp, k=k) for k in self.ks]
                if "mtp" in self.strategies:
                    cells += [CellSpec(prompt.name, "mtp", temp, depth=d) for d in self.depths]
                if "ngram" in self.strategies:
                    cells += [
                        CellSpec(prompt.name, "ngram", temp, k=k, n=n)
                        for n in self.ngram_ns for k in self.ks
                    ]
        return cells

    def validate(self) -> None:
        if not self.prompts:
            raise SettingsError("the sweep has no prompts")
        if not self.strategies:
            raise SettingsError(f"choose at least one strategy to sweep ({', '.join(SWEPT)})")
        for values, what in ((self.ks, "k"), (self.depths, "depth"), (self.ngram_ns, "n-gram n"),
                             (self.temperatures, "temperature")):
            if not values:
                raise SettingsError(f"the sweep has no {what} values")
        unknown = [s for s in self.strategies if s not in SWEPT]
        if unknown:
            own = ("; a sweep's drafts per round are its -k, --depth and --ngram-k lists"
                   if OWN in unknown[0] else "")
            raise SettingsError(
                f"cannot sweep {unknown[0]!r} (choose from {', '.join(SWEPT)}){own}")
        require_draft(self.strategies, self.draft)
        if self.group is not None:
            self.group.validate()
        if not (1 <= self.reps <= MAX_SWEEP_REPS and 0 <= self.warmup <= MAX_SWEEP_REPS):
            raise SettingsError(f"--reps must be from 1 to {MAX_SWEEP_REPS} and --warmup from 0 "
                                f"to {MAX_SWEEP_REPS} (got {self.reps} and {self.warmup})")
        if not 0.0 <= self.noisy_cv < float("inf"):
            raise SettingsError(f"--noisy-cv must be a number >= 0 (got {self.noisy_cv})")
        names = [p.name for p in self.prompts]
        if len(set(names)) != len(names):
            raise SettingsError("two prompts of the sweep have the same name")
        base = DecodeSettings(max_tokens=self.max_tokens, sampling=self.sampling)
        for cell in self.cells():  # rep r runs with seed + r: both ends must be seeds
            cell.settings(base, self.sampling.seed).validate()
            cell.settings(base, self.sampling.seed + self.reps - 1).validate()
