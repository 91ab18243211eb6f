"""``auto`` replayed on a text's recorded acceptance: controllers compared without timing noise.

This VM's speed drifts 10-15 % within minutes, so two versions of ``auto`` that differ by
2-5 % cannot be told apart by timing them (per-repetition ratios on smollm2 spread
0.76-1.10). At temperature 0, though, what a draft keeps is fixed by the text: a round
drafting k tokens after the first p of the target's output keeps the shorter of k and
the run of the draft's right greedy guesses from p. This records that once per prompt
(one plain run of the target, one pass of the draft over the prompt and the output; a
round of a real ``-k 3`` run keeps exactly what it predicts) and replays the controller
on it many times: every round's seconds come from this machine's calibration of the
pair (``specdeck calibrate``), off from it by a per-replay error and a per-round noise
(seeded), and the loop's order is kept (a choice runs one round late; the draft's
guesses over plain steps are judged after ``guess_after`` of them, a draft step and
``--guess-token`` plain steps a token; the first drafting round after plain steps also
feeds the draft the tokens it has not seen, ``--catch-up-token`` each; a round that kept
all k judges the next position). With ``--drafter mtp`` the target's MTP head drafts:
what its round from each token keeps (``engines.guess_probe.mtp_runs``, chained as the
head drafts; a real run's rounds keep exactly that), no guesses judged.

It prints, per prompt, the share of tokens from which a first draft is right, the tokens per
plain step of auto (and of ``--against``, another
copy of ``engines/auto/draft_length.py``, e.g. ``git show HEAD~:engines/auto/draft_length.py``) and
of each fixed k, and auto over the best of plain and the fixed k: a model of the
speedup, not a measurement of it. ``--against`` also takes a git revision (the
``draft_length`` of its whole ``engines/``, ``bench/revisions.py``). Last, what choosing costs a round, in
wall-clock milliseconds (the model of the speedup leaves it out; on this CPU it runs on
the decode loop's critical path), side by side. A change it favours is
then measured for real (``bench/auto_k.py``); one it does not is not worth the VM's time.

    python bench/auto_replay.py --family smollm2 --max-tokens 96 [--prompts code,csv]
                                [--seeds 30] [--against /tmp/old_draft_length.py | HEAD~]
                                [--costs 0.15,0.06]   # another machine's costs
                                [--drafter mtp --linger 1.46,0.08,0.08]  # the MTP head
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from auto_k import HELD_OUT, HELD_OUT_FILES, prompt_text  # noqa: E402
from revisions import engines_at  # noqa: E402

#: Where recorded acceptance is kept between runs (a prompt's costs a plain run).
RECORDS = Path(tempfile.gettempdir()) / "specdeck-auto-replay"


def record(family: str, name: str, tokens: int, drafter: str = "draft") -> dict:
    """What a greedy round drafting at each token of the target's greedy output keeps
    (``runs``): for the draft model, from whether its guess at each token is right
    (``matches``, judged over plain steps too); for the MTP head (``--drafter mtp``),
    its chained drafts from each token (``engines.guess_probe.mtp_runs``). With the
    calibration's draft step and verify passes (``drafter``'s, in plain steps) and the
    drafter's survival on the built-in prompts (``typical``)."""
    from specdeck.engines.measure.calibration import load_calibration
    from specdeck.engines.models.families import require_family
    from specdeck.engines.auto.guess_probe import runs_of

    pair = require_family(family)
    text = prompt_text(name)
    probe = "guess_probe" if drafter == "draft" else "mtp_runs"
    key = hashlib.sha256(f"{family}\0{tokens}\0{text}\0{probe}".encode()).hexdigest()[:16]
    path = RECORDS / f"{key}.json"
    calibration = load_calibration(pair.target, pair.draft)
    if calibration is None:
        raise SystemExit(f"no calibration of the {family} pair: run "
                         f"`specdeck calibrate --family {family}` first")
    draft_step, passes = calibration.drafting_costs(drafter)
    typical = list(calibration.typical_survival(drafter) or ())
    if path.is_file():
        judged = json.loads(path.read_text())
    else:
        judged = (guesses_right if drafter == "draft" else head_runs)(pair, text, tokens)
        RECORDS.mkdir(exist_ok=True)
        path.write_text(json.dumps(judged))
    guessed = drafter == "draft"
    return {"matches": judged if guessed else None,
            "runs": runs_of(judged) if guessed else judged,
            "draft_step": draft_step, "passes": list(passes), "typical": typical}


@functools.cache
def model_store():
    """One store for every prompt recorded: the models load once."""
    from specdeck.engines.runs.compare import ModelStore

    return ModelStore()


def guesses_right(pair, text: str, tokens: int) -> list[bool]:
    """The draft's guesses as ``specdeck calibrate`` judges them (``engines.guess_probe``:
    through the draft's own output layer, cut down where its folder lists its tokens)."""
    from specdeck.engines.auto.guess_probe import greedy_output, guesses_right as judged

    models, prompt = pair_models(pair, text, tokens, "draft")
    return judged(models.draft, prompt, greedy_output(models.target, prompt, tokens))


def head_runs(pair, text: str, tokens: int) -> list[int]:
    """What a greedy round of the target's MTP head drafting at each output token keeps
    (``engines.guess_probe.mtp_runs``: a real run's rounds keep exactly that)."""
    from specdeck.engines.auto.guess_probe import greedy_output, mtp_runs

    models, prompt = pair_models(pair, text, tokens, "mtp")
    return mtp_runs(models.mtp, prompt, greedy_output(models.mtp.model, prompt, tokens))


def pair_models(pair, text: str, tokens: int, drafter: str):
    """The family's models ``drafter`` needs, loaded once, and ``text`` encoded."""
    from specdeck.engines.runs.compare import encode_prompt
    from specdeck.engines.core.config import AUTO
    from specdeck.engines.core.requests import SweepPrompt, SweepRequest
    from specdeck.engines.runs.sweep import sweep_models

    request = SweepRequest(target=pair.target, draft=pair.draft,
                           prompts=[SweepPrompt("p", text, "p")], strategies=[drafter],
                           ks=[AUTO], depths=[AUTO], reps=1, max_tokens=tokens)
    models = sweep_models(request, model_store())
    return models, list(encode_prompt(models.target.tokenizer, text))


def load_module(path: str, name: str = "replayed_draft_length") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class ChoiceClock:
    """Wall-clock seconds spent in a policy's ``choose`` over replays: what choosing
    costs the decode loop each round, which the replay's model of the speedup leaves
    out (on this CPU it runs on the loop's critical path)."""

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


def replay(policy, data: dict, rng: random.Random, noise: float, error: float,
           guess_token: float, catch_up_token: float,
           clock: ChoiceClock | None = None, blind: bool = False,
           round_work: float = 0.0, linger: tuple[float, ...] = (),
           slow: frozenset[int] = frozenset(), slow_factor: float = 1.0) -> float:
    """Tokens per plain step of ``policy`` over the recorded output (its choices timed
    on ``clock``; ``blind``: no guesses judged, as for an MTP head or prompt lookup;
    ``round_work``: plain steps each drafting round costs besides its draft steps and
    verify pass; ``linger``: what the plain steps after a drafting round cost above one,
    by their position after it; ``slow``: the output positions where every round costs
    ``slow_factor`` times as much, the machine slowed as a whole)."""
    choose = functools.partial((clock or ChoiceClock()).choose, policy)
    from specdeck.engines.auto.draft_length import LearnsFromGuesses
    from specdeck.engines.core.events import Round

    matches, run, passes = data["matches"], data["runs"], data["passes"]
    n = len(run)
    off = rng.uniform(-error, error)  # the machine is not as calibrated
    draft_step = data["draft_step"] * (1 + rng.uniform(-error, error))
    verify = [1.0] + [1 + (c - 1) * (1 + off) for c in passes[1:]]
    guessing = isinstance(policy, LearnsFromGuesses) and matches is not None and not blind
    if guessing:
        policy.expect_guesses()
    unit = 0.01  # seconds of a plain step; every cost scales with it
    steps = 0.0
    p = index = seen = 0  # seen: the tokens the draft has fed
    after = len(linger)  # plain steps since the last drafting round
    running = following = choose()
    while p < n:
        k = min(running.k, n - p)
        jitter = rng.lognormvariate(0, noise)
        kept = min(run[p], k)
        after = 0 if k else after + 1
        extra = round_work if k else (linger[after - 1] if after <= len(linger) else 0.0)
        if p in slow:
            jitter *= slow_factor
        seconds = (k * draft_step + verify[k] + extra) * unit * jitter
        event = Round(index=index, drafted=[0] * k, accepted=kept, tokens=[0] * (kept + 1),
                      end=None, pieces=[], rejected_pieces=[],
                      draft_seconds=k * draft_step * unit * jitter if k else 0.0,
                      verify_seconds=(verify[k] + extra) * unit * jitter, t=0.0)
        event.auto_k, event.auto_tokens, event.auto_cost = k, running.tokens, running.cost
        event.auto_explored, event.auto_hoped = running.explored, running.hoped
        steps += seconds / unit
        if k:
            steps += catch_up_token * (p - seen)
        if guessing and k and kept == k and p + k < n:
            policy.observe_bonus(k, matches[p + k])
        p += kept + 1
        policy.observe(event)
        if k:
            seen = p
        elif guessing and p < n and (wait := policy.guess_after()) is not None and p - seen >= wait:
            policy.observe_guesses(matches[seen:p])
            steps += draft_step + guess_token * (p - seen)
            seen = p
        running, following = following, choose()
        index += 1
    return n / steps


def slow_positions(n: int, stretches: float, seed: int) -> frozenset[int]:
    """The output positions inside slow stretches of 18-31 tokens, ``stretches`` of them
    in ``n`` tokens on average, drawn from ``seed`` alone (every policy meets the same)."""
    rng = random.Random(f"slow {seed}")
    slow: set[int] = set()
    for start in range(n):
        if rng.random() < stretches / n:
            slow.update(range(start, start + rng.randint(18, 31)))
    return frozenset(slow)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="demo")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--prompts", default=",".join(
                        ["code", "prose", *HELD_OUT,
                         *sorted(path.stem for path in HELD_OUT_FILES.glob("*.txt"))]),
                    help="built-in or held-out prompt names, or text files (comma-separated)")
    ap.add_argument("--ks", default="1,2,3,4,6", help="the fixed k replayed alongside")
    ap.add_argument("--seeds", type=int, default=30, help="replays per prompt and policy")
    ap.add_argument("--noise", type=float, default=0.08,
                    help="per-round timing noise (sigma of a log-normal factor)")
    ap.add_argument("--calibration-error", type=float, default=0.08,
                    help="how far this run's costs may be from the calibration's (+-)")
    ap.add_argument("--guess-token", type=float, default=0.0035,
                    help="plain steps per draft guess judged, above a draft step for "
                         "each judging (bench/draft_catch_up.py on smollm2: 8 guesses "
                         "24 ms, 128 guesses 87 ms, a target step 150 ms)")
    ap.add_argument("--catch-up-token", type=float, default=0.0015,
                    help="plain steps per token the draft feeds without guessing "
                         "(bench/draft_catch_up.py on smollm2: 1 token 20 ms, 128 "
                         "tokens 49 ms)")
    ap.add_argument("--blind", action="store_true",
                    help="judge no guesses over plain steps (auto as it runs for an MTP "
                         "head, prompt lookup or at temperature > 0)")
    ap.add_argument("--drafter", choices=("draft", "mtp"), default="draft",
                    help="who drafts: the family's draft model, or the target's MTP head "
                         "(its own chained drafts from each token, no guesses judged, "
                         "priced by its calibrated step and round work)")
    ap.add_argument("--round-work", type=float, default=0.0,
                    help="plain steps a drafting round costs besides its draft steps, its "
                         "verify pass and the round work calibrated")
    ap.add_argument("--linger", default="",
                    help="what the plain steps after a drafting round cost above one, by "
                         "position, comma-separated (the demo's MTP head, OpenBLAS on one "
                         "thread as the app runs it: 1.46,0.08,0.08,0.06,0.06)")
    ap.add_argument("--slow", metavar="STRETCHES,FACTOR",
                    help="stretches of 18-31 output tokens (as many as STRETCHES a run on "
                         "average, placed by the seed, the same for every policy) where "
                         "the machine runs FACTOR times slower: the demo's MTP head on "
                         "this VM showed such stretches at 2x in 6 of 15 runs of 128 "
                         "tokens (e.g. 0.4,2)")
    ap.add_argument("--against", help="another draft_length.py to replay beside auto, "
                                      "or a git revision (its own engines/ whole)")
    ap.add_argument("--costs", metavar="DRAFT_STEP,SLOPE",
                    help="price rounds as another machine would instead of by this one's "
                         "calibration: a draft step and each draft's share of a verify "
                         "pass, in plain steps (a pass of k drafts costs 1 + SLOPE k; "
                         "memory-bound on Apple Silicon, e.g. 0.15,0.06)")
    ap.add_argument("--uncalibrated", action="store_true",
                    help="auto gets no calibration, as for a pair never calibrated on the "
                         "machine (--target T --draft T): it prices rounds by what it "
                         "times alone; the rounds still cost what the calibration (or "
                         "--costs) says")
    args = ap.parse_args()

    from specdeck.engines.auto import draft_length
    from specdeck.engines.core.config import MAX_MTP_DEPTH

    policies = {"auto": draft_length}
    if args.against:
        if Path(args.against).is_file():
            policies["against"] = load_module(args.against)
        else:
            then = engines_at(args.against, Path(tempfile.mkdtemp(prefix="auto-replay-")))
            policies["against"] = importlib.import_module(f"{then.__name__}.draft_length")
    clocks = {label: ChoiceClock() for label in policies}
    fixed = [int(k) for k in args.ks.split(",")]
    linger = tuple(float(v) for v in args.linger.split(",") if v)
    stretches, slow_factor = (float(v) for v in (args.slow or "0,1").split(","))
    print(f"{'prompt':<12} {'right':>5} " + "".join(f"{name:>8}" for name in policies)
          + "".join(f"{'k=' + str(k):>7}" for k in fixed) + "  auto/best")
    # Per policy: auto / the best fixed k (plain included), and auto / plain where no
    # fixed k beat plain.
    against_best = {label: [] for label in policies}
    against_plain = {label: [] for label in policies}
    for name in args.prompts.split(","):
        data = record(args.family, name, args.max_tokens, args.drafter)
        most = len(data["passes"]) - 1 if args.drafter == "draft" else MAX_MTP_DEPTH
        if args.costs:
            step, slope = (float(v) for v in args.costs.split(","))
            data = {**data, "draft_step": step,
                    "passes": [1.0 + slope * k for k in range(most + 1)]}

        def mean_speed(make, clock: ChoiceClock | None = None) -> float:
            return statistics.mean(
                replay(make(), data, random.Random(seed), args.noise,
                       args.calibration_error, args.guess_token, args.catch_up_token, clock,
                       args.blind, args.round_work, linger,
                       slow_positions(len(data["runs"]), stretches, seed), slow_factor)
                for seed in range(args.seeds))

        costs = None if args.uncalibrated else (data["draft_step"], tuple(data["passes"]))

        def typical(module: ModuleType) -> list:
            """The calibration's survival of the draft's guesses, for an ``auto`` that
            takes it (an older copy replayed with ``--against`` may not)."""
            takes = "typical" in inspect.signature(module.AdaptiveLength).parameters
            known = tuple(data["typical"]) if not args.uncalibrated else ()
            return [known or None] if takes else []
        autos = {label: mean_speed(lambda m=module: m.AdaptiveLength(most, costs, *typical(m)),
                                   clocks[label])
                 for label, module in policies.items()}
        ks = {k: mean_speed(lambda k=k: draft_length.FixedLength(k)) for k in fixed}
        right = sum(run > 0 for run in data["runs"]) / len(data["runs"])
        # Plain decoding meets the slow stretches too.
        plain = mean_speed(lambda: draft_length.FixedLength(0)) if stretches else 1.0
        best = max(max(ks.values()), plain)
        for label, speed in autos.items():
            against_best[label].append(speed / best)
            if best == plain:
                against_plain[label].append(speed / plain)
        print(f"{Path(name).stem[:12]:<12} {right:>5.2f} "
              + "".join(f"{v:>7.3f}x" for v in autos.values())
              + "".join(f"{v:>6.3f}x" for v in ks.values())
              + f"  {against_best['auto'][-1]:.3f}")
    for label in policies:
        print(f"{label}: " + summary_line(against_best[label], against_plain[label]))
    print("choosing: " + ", ".join(f"{label} {clock.ms:.3f} ms a round"
                                   for label, clock in clocks.items())
          + (f" ({clocks['auto'].seconds / clocks['against'].seconds:.2f}x)"
             if "against" in clocks else ""))
    return 0


def summary_line(against_best: list[float], against_plain: list[float]) -> str:
    """auto / the best fixed k over the prompts (mean, lowest, how many within 5 %), and
    auto / plain on the prompts where no fixed k beat plain."""
    line = (f"auto/best: mean {statistics.mean(against_best):.3f}, lowest "
            f"{min(against_best):.3f}, within 5 % on "
            f"{sum(r >= 0.95 for r in against_best)} of {len(against_best)}")
    if against_plain:
        line += (f"; where every k loses ({len(against_plain)}): auto "
                 f"{min(against_plain):.3f}-{max(against_plain):.3f}x plain")
    return line


if __name__ == "__main__":
    raise SystemExit(main())
