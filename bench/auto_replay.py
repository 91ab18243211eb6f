"""Draft-length policies replayed on a text's recorded acceptance, side by side, without
timing noise.

This VM's speed drifts 10-15 % within minutes, so two policies that differ by a few
percent cannot be told apart by timing them. At temperature 0, though, what a round
keeps is fixed by the text: a round drafting at output token p keeps the drafts its
drafter's greedy chain from p gets right, and ``pmin`` stops where that chain's top
probability falls under its threshold. Each prompt is recorded once: the target's greedy
output, and from every token the drafter's chain (a draft model: its guesses, teacher
forced, and past its first wrong one its own chain; an MTP head: chained on its own
drafts), right or wrong and how sure, at each depth. Then every policy is replayed on it
``--seeds`` times, each round priced in plain steps by this machine's calibration of the
pair (or ``--costs``), off by a per-replay error and a per-round noise (seeded, the same
for every policy), in the loop's order (a choice runs one round late; the draft's guesses
at plain steps are judged when the policy asks, for a draft step and ``--guess-token``
plain steps a token; a drafting round after plain steps feeds the draft what it skipped,
``--catch-up-token`` each; a ``pmin`` round that stops pays the draft step that stopped
it). A real ``-k 3`` run's rounds keep exactly what the record says.

Per prompt it prints tokens per plain step of each policy and fixed k: a model of the
speedup over plain decoding, not a measurement of it. Then, per policy, its mean over the
prompts of policy / best fixed k (plain included) and, against ``--against`` (``auto`` at
a git revision, its own ``engines/`` whole), the mean ratio with its standard error: the
gate a change to ``auto`` passes before it is measured for real. ``hindsight`` is a
yardstick beside the policies (the fixed k best on the text so far, every past token
known); ``--why`` says where ``auto``'s time went on each prompt where it misses the best
fixed k by more than 5 %.

    python bench/auto_replay.py --family demo [--drafter mtp] [--max-tokens 256]
                                [--prompts a,b | --tuning] [--seeds 20]
                                [--policies auto,grow,pmin:0.6,hindsight] [--why]
                                [--against 92e24a8]
                                [--costs 0.18,0.13]  # a draft step, a draft's verify share
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import importlib
import importlib.util
import inspect
import itertools
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from draft_policies import HELD_OUT_FILES, TUNING, prompt_text  # noqa: E402
from revisions import engines_at  # noqa: E402
from specdeck.engines.core import events

#: Prompts written to tune ``auto`` on besides ``TUNING`` and the built-in ones (none held
#: out): copied text the demo's target loops on, and code it does not.
TUNING_FILES = Path(__file__).resolve().parent / "tuning"
#: Where recordings are kept between runs (a prompt's costs a plain run and a probe).
RECORDS = Path(tempfile.gettempdir()) / "specdeck-policy-replay"
#: Past its first wrong draft a draft model's chain is followed while it is this sure (a
#: ``pmin`` below it would have stopped there anyway).
SURE = 0.3


def record(family: str, name: str, tokens: int, drafter: str) -> dict:
    """From every token of the target's greedy output to prompt ``name``: how many drafts
    a greedy round of ``drafter`` keeps (``runs``), and its top probability at each depth
    of its own chain (``sure``); for a draft model also whether its guess at each token is
    right (``matches``, what judging guesses at plain steps sees)."""
    from specdeck.engines.models.families import require_family

    pair = require_family(family)
    text = prompt_text(name)
    key = hashlib.sha256(f"2\0{family}\0{tokens}\0{text}\0{drafter}".encode()).hexdigest()
    path = RECORDS / f"{key[:16]}.json"
    if path.is_file():
        return json.loads(path.read_text())
    models, prompt = pair_models(pair, text, drafter)
    output = greedy_output(models, prompt, tokens)
    data = (draft_chains(models.draft, prompt, output) if drafter == "draft"
            else head_chains(models.mtp, prompt, output))
    RECORDS.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return data


@functools.cache
def model_store():
    """One store for every prompt recorded: the models load once."""
    from specdeck.engines.models.loading import ModelStore

    return ModelStore()


def pair_models(pair, text: str, drafter: str):
    """The family's models ``drafter`` needs, loaded once, and ``text`` encoded."""
    from specdeck.engines.core.requests import SweepPrompt, SweepRequest
    from specdeck.engines.runs.compare import encode_prompt
    from specdeck.engines.runs.sweep import sweep_models

    request = SweepRequest(target=pair.target, draft=pair.draft,
                           prompts=[SweepPrompt("p", text, "p")], strategies=[drafter],
                           ks=["auto"], depths=["auto"], reps=1, max_tokens=1)
    models = sweep_models(request, model_store())
    return models, list(encode_prompt(models.target.tokenizer, text))


def greedy_output(models, prompt: list[int], tokens: int) -> list[int]:
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.core.events import Round
    from specdeck.engines.decode.run import Models, run_strategy

    settings = DecodeSettings(max_tokens=tokens, num_draft_tokens=1, stop_at_eos=False)
    return [t for event in run_strategy("plain", Models(models.target), prompt, settings)
            if isinstance(event, Round) for t in event.tokens]


def draft_chains(draft, prompt: list[int], output: list[int]) -> dict:
    """A draft model's chain from every output token: right and sure while its guesses
    (teacher forced) are right, then its own greedy chain after its first wrong one."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from specdeck.engines.core.config import MAX_DRAFT_TOKENS
    from specdeck.engines.proposers.draft_vocab import WholeVocabulary

    vocabulary = draft.vocabulary or WholeVocabulary(draft.model)

    def read(cache, tokens: list[int]) -> tuple[list[int], list[float]]:
        logits = vocabulary.logits(cache, mx.array(tokens, mx.uint32))
        top = mx.softmax(logits.astype(mx.float32), axis=-1).max(axis=-1)
        return vocabulary.pick(mx.argmax(logits, -1)).tolist(), top.tolist()

    cache = make_prompt_cache(draft.model)
    read(cache, prompt[:-1])
    guessed, sure, after_wrong = [], [], {}
    for p, token in enumerate(output):
        guess, top = read(cache, [output[p - 1] if p else prompt[-1]])
        guessed.append(guess[0])
        sure.append(top[0])
        if guess[0] != token:  # its own chain past the wrong guess
            fork, chain, last = copy.deepcopy(cache), [], guess[0]
            while len(chain) < MAX_DRAFT_TOKENS - 1:
                nexts, tops = read(fork, [last])
                chain.append(tops[0])
                if tops[0] < SURE:
                    break
                last = nexts[0]
            after_wrong[p] = chain
    matches = [g == t for g, t in zip(guessed, output)]
    runs = runs_of(matches)
    chains = []
    for p in range(len(output)):
        end = p + min(runs[p], MAX_DRAFT_TOKENS)  # the first wrong guess, or past the most
        chain = sure[p:end + 1] + after_wrong.get(end, [])
        chains.append(chain[:MAX_DRAFT_TOKENS])
    return {"matches": matches, "runs": runs, "sure": chains}


def head_chains(mtp, prompt: list[int], output: list[int]) -> dict:
    """An MTP head's chain from every output token, all at once (each position attends
    only to itself): its first draft from the target's hidden state behind the token
    before and that token, each next one chained on its own hidden state and draft."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from specdeck.engines.core.config import MAX_MTP_DEPTH
    from specdeck.engines.decode.shared import forward_hidden

    n, start = len(output), len(prompt)
    sequence = mx.array(prompt + output, mx.uint32)
    model = mtp.model.model
    _, hidden = forward_hidden(model, make_prompt_cache(model), sequence[:-1])
    # Row p - 1 drafts from output token p (the first has no verified state behind it).
    state = hidden[start - 1:start + n - 2][:, None, :]
    fed = sequence[start:start + n - 1][:, None]
    at = mx.arange(1, n)
    alive = mx.ones((n - 1,), mx.bool_)
    runs = mx.zeros((n - 1,), mx.int32)
    sure = []
    for j in range(MAX_MTP_DEPTH):
        state, logprobs = mtp.head(state, fed)
        draft = mx.argmax(logprobs, axis=-1)
        sure.append(mx.exp(logprobs.max(axis=-1)))
        target = sequence[start + mx.minimum(at + j, n - 1)]
        alive = alive & (draft == target) & (at + j < n)
        runs = runs + alive
        fed = draft[:, None]
    sure_rows = mx.stack(sure, axis=1).tolist()
    return {"matches": None, "runs": [0] + runs.tolist(), "sure": [[0.0]] + sure_rows}


def runs_of(matches: list[bool]) -> list[int]:
    """From each token, how many guesses in a row are right (cut by the text's end)."""
    runs, run = [], 0
    for right in reversed(matches):
        run = run + 1 if right else 0
        runs.append(run)
    return runs[::-1]


class ChoiceClock:
    """Wall-clock seconds spent in a policy's ``choose``: what choosing costs the decode
    loop each round (on a CPU it runs on the loop's critical path)."""

    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def choose(self, policy):
        start = time.perf_counter()
        choice = policy.choose()
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return choice

    @property
    def ms(self) -> float:
        return 1000 * self.seconds / max(self.calls, 1)


def drafted_under(p_min: float | None, chain: list[float], k: int) -> tuple[int, bool]:
    """How many of ``k`` drafts a round drafts, and whether ``p_min`` stopped it."""
    if p_min is None:
        return k, False
    for j, top in enumerate(chain[:k]):
        if top < p_min:
            return j, True
    return min(k, len(chain)), len(chain) < k


def replay(policy, data: dict, rng: random.Random, costs: dict, clock: ChoiceClock,
           log: list | None = None) -> float:
    """Tokens per plain step of ``policy`` over the recorded output; each round's k, why,
    plain steps and tokens appended to ``log``."""
    if isinstance(policy, Hindsight):
        policy.see(data["runs"], costs)
    module = sys.modules[type(policy).__module__]
    Round = getattr(module, "Round", events.Round)
    runs, sure, matches = data["runs"], data["sure"], data["matches"]
    n = len(runs)
    off = rng.uniform(-costs["error"], costs["error"])  # the machine is not as calibrated
    draft_step = costs["draft_step"] * (1 + rng.uniform(-costs["error"], costs["error"]))
    verify = [1.0] + [1 + (c - 1) * (1 + off) for c in costs["passes"][1:]]
    guessing = hasattr(policy, "expect_guesses") and matches is not None
    if guessing:
        policy.expect_guesses()
    unit, steps = 0.01, 0.0  # seconds of a plain step; every cost scales with it
    p = index = seen = 0  # seen: the tokens the draft has fed
    after = len(costs["linger"])  # plain steps since the last drafting round
    choose = functools.partial(clock.choose, policy)
    running, following = choose(), choose()
    while p < n:
        asked = min(running.k, n - p)
        p_min = getattr(running, "p_min", None)
        k, stopped = drafted_under(p_min, sure[p], asked)
        kept = min(runs[p], k)
        jitter = rng.lognormvariate(0, costs["noise"])
        after = 0 if k else after + 1
        extra = costs["round_work"] if k else (
            costs["linger"][after - 1] if after <= len(costs["linger"]) else 0.0)
        drafting = (k + stopped) * draft_step
        event = Round(index=index, drafted=[0] * k, accepted=kept, tokens=[0] * (kept + 1),
                      end=None, pieces=[], rejected_pieces=[],
                      draft_seconds=drafting * unit * jitter,
                      verify_seconds=(verify[k] + extra) * unit * jitter, t=0.0)
        if hasattr(event, "length"):
            event.length = running if running.policy != "fixed" else None
        else:  # ``auto`` at a revision before the record
            event.auto_k, event.auto_tokens, event.auto_cost = k, running.tokens, running.cost
            event.auto_explored, event.auto_hoped = running.explored, running.hoped
        spent = event.seconds / unit
        if k or stopped:
            spent += costs["catch_up_token"] * (p - seen)
        steps += spent
        if log is not None:
            log.append((k, running.why, spent, kept + 1))
        if hasattr(policy, "observe_bonus") and guessing and k and kept == k and p + k < n:
            policy.observe_bonus(k, matches[p + k])
        p += kept + 1
        policy.observe(event)
        if k or stopped:
            seen = p
        elif guessing and p < n and (wait := policy.guess_after()) is not None \
                and p - seen >= wait:
            policy.observe_guesses(matches[seen:p])
            steps += draft_step + costs["guess_token"] * (p - seen)
            seen = p
        running, following = following, choose()
        index += 1
    return n / steps


class Hindsight:
    """A yardstick, not a policy: each round the fixed k (of ``--ks``, or plain) that
    would have run fastest over the text so far, with every past token's acceptance
    known (not only what its own rounds judged) and rounds priced at the replay's mean
    costs; nothing of the future. Where it misses the best fixed k too, the miss is not
    for want of knowing the past."""

    def __init__(self, ks: list[int]) -> None:
        self.ks, self.at, self.k = [0, *ks], 0, 1

    def see(self, runs: list[int], costs: dict) -> None:
        self.runs = runs
        self.cost = {k: k * costs["draft_step"] + costs["passes"][k]
                     + (costs["round_work"] if k else 0.0) for k in self.ks}

    def observe(self, event) -> None:
        self.at = min(self.at + event.accepted + 1, len(self.runs))

    def choose(self) -> events.LengthChoice:
        def rate(k: int) -> float:
            p = rounds = 0
            while p < self.at:
                p, rounds = p + min(self.runs[p], k) + 1, rounds + 1
            return p / (rounds * self.cost[k])

        if self.at:
            self.k = max(self.ks, key=rate)
        return events.LengthChoice("auto", self.k, "best")


def losses(logs: list[list], rate: float) -> str:
    """Where replays' time went against the best fixed k's rate: each round's plain steps
    beyond what its tokens cost at that rate, by why it was chosen and by stretch of the
    run (a mean over the replays), and the first replay's k over the run."""
    by_why: dict[str, float] = {}
    by_stretch = [0.0, 0.0, 0.0]  # rounds 1-16, 17-48, the rest
    for log in logs:
        for i, (_, why, spent, tokens) in enumerate(log):
            excess = (spent - tokens / rate) / len(logs)
            by_why[why] = by_why.get(why, 0.0) + excess
            by_stretch[(i >= 16) + (i >= 48)] += excess
    ks = [f"{k}x{len(list(group))}" for k, group in itertools.groupby(k for k, *_ in logs[0])]
    return ("plain steps lost by why " + ", ".join(f"{w} {v:+.1f}" for w, v in by_why.items())
            + "; rounds 1-16 / 17-48 / rest " + " / ".join(f"{v:+.1f}" for v in by_stretch)
            + f"\n    k over the run (k x rounds): {' '.join(ks)}")


def policies_of(names: list[str], most: int, prior, typical, against: ModuleType | None,
                variants: ModuleType | None, fixed: list[int]) -> dict:
    """A factory per policy replayed: ``auto`` (priced by ``prior``, as a run with this
    machine's calibration is), ``grow`` (``grow:N`` starts at N), ``pmin:P``,
    ``hindsight`` (the yardstick over the fixed k ``fixed``), ``auto`` at
    ``against`` (as ``before``), and each ``VARIANTS`` entry of ``variants`` (a file of
    rules tried on ``auto``)."""
    from specdeck.engines.auto.adaptive import AutoLength
    from specdeck.engines.auto.grow import START, GrowLength
    from specdeck.engines.auto.pmin import PMinLength

    def made(name: str):
        policy, _, value = name.partition(":")
        if policy == "auto":
            return functools.partial(AutoLength, most, prior)
        if policy == "hindsight":
            return functools.partial(Hindsight, fixed)
        if policy == "grow":
            return functools.partial(GrowLength, most, int(value or START))
        return functools.partial(PMinLength, most, float(value))

    factories = {name: made(name) for name in names}
    if against is not None:
        takes = inspect.signature(against.AdaptiveLength).parameters
        extra = [typical] if "typical" in takes else []
        factories["before"] = lambda: against.AdaptiveLength(most, prior, *extra)
    for name, factory in getattr(variants, "VARIANTS", {}).items():
        factories[name] = functools.partial(factory, most, prior)
    return factories


def load_module(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="demo")
    ap.add_argument("--drafter", choices=("draft", "mtp"), default="draft")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--prompts", default=",".join(
        sorted(path.stem for path in HELD_OUT_FILES.glob("*.txt"))),
        help="held-out prompt names (the default: every one), built-in ones or text files")
    ap.add_argument("--tuning", action="store_true",
                    help="the prompts rules may be chosen on instead of the held-out ones: "
                         "draft_policies' ten, the other built-in ones and tuning/'s")
    ap.add_argument("--policies", default="auto,grow,pmin:0.6,pmin:0.75")
    ap.add_argument("--ks", default="1,2,3,4,6,8,12,16", help="the fixed k replayed alongside")
    ap.add_argument("--against", help="a git revision: its auto replayed as 'before'")
    ap.add_argument("--variants", help="a file whose VARIANTS maps names to policies "
                                       "(made from the most drafts and the calibration)")
    ap.add_argument("--why", action="store_true",
                    help="where auto misses the best fixed k by more than 5 %% and that k "
                         "gains more than 5 %%: where its time went, and its k over the run")
    ap.add_argument("--seeds", type=int, default=20, help="replays per prompt and policy")
    ap.add_argument("--noise", type=float, default=0.08,
                    help="per-round timing noise (sigma of a log-normal factor)")
    ap.add_argument("--calibration-error", type=float, default=0.08,
                    help="how far this run's costs may be from the calibration's (+-)")
    ap.add_argument("--costs", metavar="DRAFT_STEP,SLOPE",
                    help="price rounds by a straight line instead of this machine's "
                         "calibration: a draft step and each verified draft's share of a "
                         "pass, in plain steps (this VM's demo pair, quiet, ~0.18,0.13; "
                         "memory-bound Apple Silicon ~0.15,0.06)")
    ap.add_argument("--guess-token", type=float, default=0.0035,
                    help="plain steps per draft guess judged, above a draft step for "
                         "each judging (bench/draft_catch_up.py on smollm2)")
    ap.add_argument("--catch-up-token", type=float, default=0.0015,
                    help="plain steps per token the draft feeds without guessing")
    ap.add_argument("--round-work", type=float, default=0.0,
                    help="plain steps a drafting round costs besides its passes")
    ap.add_argument("--linger", default="",
                    help="what the plain steps after a drafting round cost above one, by "
                         "position (the demo's MTP head here: 1.46,0.08,0.08,0.06,0.06)")
    args = ap.parse_args()

    from specdeck.engines.core.config import MAX_DRAFT_TOKENS, MAX_MTP_DEPTH
    from specdeck.engines.measure.calibration import load_calibration
    from specdeck.engines.models.families import require_family

    most = MAX_MTP_DEPTH if args.drafter == "mtp" else MAX_DRAFT_TOKENS
    pair = require_family(args.family)
    calibration = load_calibration(pair.target, pair.draft)
    if calibration is None:
        raise SystemExit(f"no calibration of the {args.family} pair: run "
                         f"`specdeck calibrate --family {args.family}` first")
    step, passes = calibration.drafting_costs(args.drafter)
    if args.costs:
        step, slope = (float(v) for v in args.costs.split(","))
        passes = tuple(1.0 + slope * k for k in range(MAX_DRAFT_TOKENS + 1))
    costs = {"draft_step": step, "passes": passes, "error": args.calibration_error,
             "noise": args.noise, "guess_token": args.guess_token,
             "catch_up_token": args.catch_up_token, "round_work": args.round_work,
             "linger": [float(v) for v in args.linger.split(",") if v]}
    against = None
    if args.against:
        then = engines_at(args.against, Path(tempfile.mkdtemp(prefix="auto-replay-")))
        against = importlib.import_module(f"{then.__name__}.auto.draft_length")
    variants = load_module(args.variants) if args.variants else None
    variant_names = list(getattr(variants, "VARIANTS", {}))
    fixed = [int(k) for k in args.ks.split(",") if int(k) <= most]
    factories = policies_of(args.policies.split(","), most, (step, tuple(passes)),
                            calibration.typical_survival(args.drafter), against, variants,
                            fixed)
    clocks = {name: ChoiceClock() for name in factories}
    prompts = tuning_prompts() if args.tuning else args.prompts.split(",")
    print(f"{args.family} {args.drafter}, {args.max_tokens} tokens, {args.seeds} seeds, "
          f"draft step {step:.2f}, a pass of 2 / 5 / {most + 1} tokens {passes[1]:.2f} / "
          f"{passes[4]:.2f} / {passes[most]:.2f} plain steps")
    print(f"{'prompt':<11} {'right':>5}" + "".join(f"{n[:9]:>10}" for n in factories)
          + "".join(f"{'k=' + str(k):>7}" for k in fixed))
    speeds: dict[str, list[float]] = {name: [] for name in factories}
    bests: list[tuple[float, float]] = []  # (best fixed k or plain, plain) per prompt
    for name in prompts:
        data = record(args.family, name, args.max_tokens, args.drafter)

        logs: list[list] = [[] for _ in range(args.seeds)]

        def mean_speed(make, clock: ChoiceClock, log_to: list | None = None) -> float:
            return statistics.mean(replay(make(), data, random.Random(seed), costs, clock,
                                          log_to[seed] if log_to else None)
                                   for seed in range(args.seeds))

        from specdeck.engines.auto.length import FixedLength
        by_k = {k: mean_speed(functools.partial(FixedLength, k), ChoiceClock())
                for k in [0, *fixed]}
        for policy, make in factories.items():
            speeds[policy].append(mean_speed(make, clocks[policy],
                                                 logs if policy == "auto" else None))
        best = max(by_k.values())
        bests.append((best, by_k[0]))
        right = sum(run > 0 for run in data["runs"]) / len(data["runs"])
        print(f"{Path(name).stem[:11]:<11} {right:>5.2f}"
              + "".join(f"{s[-1]:>9.3f}x" for s in speeds.values())
              + "".join(f"{by_k[k]:>6.3f}x" for k in fixed), flush=True)
        if args.why and "auto" in speeds and best > 1.05 * by_k[0] \
                and speeds["auto"][-1] < 0.95 * best:
            k = max(by_k, key=by_k.get)
            print(f"    auto {speeds['auto'][-1] / best:.3f} of k={k}: " + losses(logs, best))
    print()
    for policy, values in speeds.items():
        print(f"{policy}: " + summary(values, bests))
    for other in [name for name in speeds if name == "before" or name in variant_names]:
        print(f"{other} against auto: " + against_auto(speeds[other], speeds["auto"]))
    print("choosing: " + ", ".join(f"{name} {clock.ms:.3f} ms" for name, clock in clocks.items()
                                   if clock.calls))
    return 0


def tuning_prompts() -> list[str]:
    """Every prompt rules may be chosen on, none of them held out."""
    from specdeck.prompts import PROMPTS_DIR

    built_in = sorted(path.stem for path in PROMPTS_DIR.glob("*.txt") if path.stem not in TUNING)
    return [*TUNING, *built_in, *sorted(str(path) for path in TUNING_FILES.glob("*.txt"))]


def against_auto(other: list[float], auto: list[float]) -> str:
    """Another policy against ``auto`` over the prompts: the mean of auto's speed over
    its (the gate's ratio), and the time it saves per token in plain steps (a share of
    plain decoding's time), each with its standard error."""
    def mean_error(values: list[float]) -> tuple[float, float]:
        error = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        return statistics.mean(values), error

    ratios = [a / o for o, a in zip(other, auto)]
    ratio, ratio_error = mean_error(ratios)
    saved, saved_error = mean_error([1 / a - 1 / o for o, a in zip(other, auto)])
    return (f"auto / it {ratio:.4f} +- {ratio_error:.4f} (lowest {min(ratios):.3f} over "
            f"{len(auto)} prompts); it saves {saved:+.2%} +- {saved_error:.2%} of plain's "
            "time")


def summary(values: list[float], bests: list[tuple[float, float]]) -> str:
    """A policy over the prompts: its mean against the best fixed k (plain included);
    where that k beats plain by more than 5 %, how many it is within 5 % of; where every
    k loses, its range against plain."""
    against_best = [v / best for v, (best, _) in zip(values, bests)]
    gaining = [v / best for v, (best, plain) in zip(values, bests) if best > 1.05 * plain]
    losing = [v / plain for v, (best, plain) in zip(values, bests) if best <= plain]
    line = (f"/ best fixed k: mean {statistics.mean(against_best):.3f}, lowest "
            f"{min(against_best):.3f}")
    if gaining:
        line += (f"; where the best k gains > 5 %: within 5 % on "
                 f"{sum(r >= 0.95 for r in gaining)} of {len(gaining)}")
    if losing:
        line += (f"; where every k loses ({len(losing)}): {min(losing):.3f}-"
                 f"{max(losing):.3f}x plain")
    return line


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    raise SystemExit(main())
