"""The draft-length policies through the decoding loop: ``-k auto``, ``-k grow`` and
``-k pmin:P`` as settings, each lossless (token for token at temperature 0, the target's
distribution above it), each round's record of what its policy chose, and ``grow``'s and
``pmin``'s own rules."""

from __future__ import annotations

from dataclasses import replace
from itertools import accumulate

import pytest

from specdeck.engines.auto.adaptive import AutoLength
from specdeck.engines.auto.explain import choice_words
from specdeck.engines.auto.grow import GrowLength
from specdeck.engines.auto.length import FixedLength, draft_length
from specdeck.engines.auto.pmin import PMinLength
from specdeck.engines.core.config import AUTO, GROW, DecodeSettings, Sampling, parse_draft_count
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.core.events import LengthChoice, Round, Trace
from specdeck.engines.core.stats import compute_stats
from specdeck.engines.decode.run import Models, run_strategy
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.proposers import draft, mtp, ngram
from specdeck.engines.proposers.mtp import load_mtp
from helpers.app import shared_store
from helpers.auto import made_calibration, synthetic
from helpers.lossless import lossless_pvalues

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return"
TOKENS = 40
#: Runs of two tokens a distribution test draws: enough to catch drafts judged by a
#: wrong rule (every draft kept fails each case at p = 0, and so does a q without its
#: temperature), few enough for about a second; the rule itself is tested exactly in
#: tests/test_acceptance_rule.py.
SAMPLES = 200
#: At 0.9 the tiny models' distributions are too flat to show a wrong q (test_chain's).
SAMPLING = Sampling(temperature=0.2, top_k=30)


# --- the settings ------------------------------------------------------------------------


def test_counts_are_a_number_or_a_policy() -> None:
    assert parse_draft_count(" Auto ") == AUTO and parse_draft_count("3") == 3
    assert parse_draft_count("GROW") == GROW
    assert parse_draft_count("pmin:0.60") == "pmin:0.6"
    assert parse_draft_count("pmin") == "pmin:0.75"  # llama.cpp's default
    for bad in ("lots", "pmin:1.5", "pmin:0", "pmin:x", "pmin:nan", "grow:"):
        with pytest.raises(ValueError):
            parse_draft_count(bad)
    settings = DecodeSettings(num_draft_tokens="pmin:0.6", mtp_depth=GROW, ngram_k=AUTO)
    settings.validate()
    assert (settings.max_drafts("draft"), settings.max_drafts("mtp")) == (16, 8)
    assert DecodeSettings.from_dict(settings.to_dict()) == settings
    assert DecodeSettings.from_dict({"num_draft_tokens": "pmin:2"}) is None
    with pytest.raises(SettingsError, match="or auto, grow or pmin:P"):
        DecodeSettings(num_draft_tokens="many").validate()
    policies = {name: type(draft_length(settings, name)) for name in ("draft", "mtp", "ngram")}
    assert policies == {"draft": PMinLength, "mtp": GrowLength, "ngram": AutoLength}
    assert isinstance(draft_length(DecodeSettings(), "draft"), FixedLength)


def test_the_command_lines_and_the_settings_dialog_take_each_policy(tiny_family) -> None:
    from specdeck.cli import build_parser
    from specdeck.engines.core.requests import CompareRequest
    from specdeck.tui.settings_screen import apply_form, form_values

    parser = build_parser()
    args = parser.parse_args(["compare", "--prompt", "x", "-k", "pmin:0.6", "--depth", "grow",
                              "--ngram-k", "auto"])
    assert (args.num_draft_tokens, args.depth, args.ngram_k) == ("pmin:0.6", GROW, AUTO)
    sweep = parser.parse_args(["sweep", "-k", "1,grow,pmin:0.6,auto"])
    assert sweep.num_draft_tokens == [1, GROW, "pmin:0.6", AUTO]
    with pytest.raises(SystemExit):
        parser.parse_args(["compare", "--prompt", "x", "-k", "pmin:2"])
    request = CompareRequest(target="t", draft="d", strategies=["draft"], prompt="x")
    values = form_values(request)
    assert apply_form(request, {**values, "k": "pmin:0.6"}).settings.num_draft_tokens == "pmin:0.6"
    assert apply_form(request, {**values, "k": "grow"}).settings.num_draft_tokens == GROW
    with pytest.raises(SettingsError, match="a number, auto, grow or pmin:P"):
        apply_form(request, {**values, "k": "pmin:7"})


def test_a_pane_named_with_its_own_drafts_runs_its_strategy_so() -> None:
    """``draft@grow`` beside ``draft``: one strategy under two settings, side by side."""
    from specdeck.engines.core.requests import CompareRequest, SweepPrompt, SweepRequest

    settings = DecodeSettings(num_draft_tokens=2)
    assert settings.for_pane("draft") is settings
    assert settings.for_pane("draft@grow").num_draft_tokens == GROW
    assert settings.for_pane("draft@PMIN").num_draft_tokens == "pmin:0.75"
    assert settings.for_pane("mtp@3").mtp_depth == 3
    assert settings.for_pane("ngram@auto").ngram_k == AUTO
    assert (settings.max_drafts("draft@4"), settings.max_drafts("mtp@auto")) == (4, 8)
    assert settings.max_drafts("draft@x") == 0  # a session's name: no strategy of ours
    for bad, why in (("plain@2", "only draft, mtp, ngram take"), ("chain@2", "only draft"),
                     ("draft@x", "after @ comes a number"), ("draft@", "after @"),
                     ("draft@17", "between 1 and 16"), ("mtp@9", "between 1 and 8")):
        with pytest.raises(SettingsError, match=why):
            settings.for_pane(bad)

    def request(*names: str, draft: str | None = "d") -> CompareRequest:
        return CompareRequest(target="t", draft=draft, strategies=list(names), prompt="x")

    request("plain", "draft", "draft@grow", "draft@3", "mtp@2").validate()
    for names, why in ((["draft@3", "draft@3"], "listed twice"), (["draft@x"], "after @"),
                       (["drafts@2"], "unknown strategy 'drafts@2'")):
        with pytest.raises(SettingsError, match=why):
            request(*names).validate()
    with pytest.raises(SettingsError, match="needs a draft model"):
        request("plain", "draft@grow", draft=None).validate()
    sweep = SweepRequest(target="t", draft="d", prompts=[SweepPrompt("p", "x")],
                         strategies=["draft@2"])
    with pytest.raises(SettingsError, match="sweep's drafts per round are its -k"):
        sweep.validate()


def test_panes_of_one_strategy_under_several_policies_run_and_save_side_by_side(
        tiny_family) -> None:
    from specdeck.engines.core.requests import CompareRequest
    from specdeck.engines.runs.compare import run_compare
    from specdeck.sessions.session import result_document, session_from_document
    from specdeck.sessions.store import session_filename
    from specdeck.tui.pane import pane_detail

    names = ["plain", "draft", "draft@grow", "draft@pmin:0.6", "draft@3", "ngram@auto"]
    result = run_compare(CompareRequest(
        target=str(tiny_family["llama_target"]), draft=str(tiny_family["llama_draft"]),
        strategies=names, prompt=PROMPT, warmup_tokens=0,
        settings=greedy(num_draft_tokens=1, max_tokens=TOKENS)))
    traces = result.traces
    assert list(traces) == names
    assert all(traces[n].tokens == traces["plain"].tokens for n in names)
    most = {n: max(len(r.drafted) for r in traces[n].rounds) for n in names}
    assert (most["draft"], most["draft@3"]) == (1, 3)
    policies = {n: {r.length.policy for r in traces[n].rounds if r.length} for n in names}
    assert policies["draft@grow"] == {"grow"} and policies["draft@pmin:0.6"] == {"pmin"}
    assert policies["ngram@auto"] == {"auto"} and policies["draft@3"] <= {"fixed"}

    document = result_document(result)
    session = session_from_document(document)
    assert list(session.traces) == names
    assert session_filename(document).endswith(  # no colon: not every file system keeps it
        "_plain-draft-draft@grow-draft@pmin_0.6-draft@3-ngram@auto.json")
    titles = [pane_detail(n, session.settings) for n in names]
    assert titles == ["", "k=1", "", "", "", "n=3"]


# --- grow's rule ------------------------------------------------------------------------


def test_grow_adds_two_after_a_round_kept_whole_and_takes_one_otherwise() -> None:
    policy = GrowLength(16, start=20)
    assert (policy.choose().k, policy.choose().why) == (16, "start")  # capped at the most
    assert GrowLength(16).choose().k == 5 and GrowLength(4).choose().k == 4
    ks = []
    for drafted, accepted in ((16, 3), (15, 15), (16, 16), (16, 0), (15, 2), (0, 0)):
        policy.observe(synthetic(drafted, accepted, draft_step=0.001, verify=0.01))
        ks.append((policy.choose().k, policy.choose().why))
    assert ks == [(15, "shrank"), (16, "grew"), (16, "grew"), (15, "shrank"),
                  (14, "shrank"), (14, "shrank")]  # a round that drafted nothing judges nothing
    low = GrowLength(8, start=1)
    low.observe(synthetic(1, 0, draft_step=0.001, verify=0.01))
    assert low.choose().k == 1  # never under one
    low.observe(synthetic(1, 1, draft_step=0.001, verify=0.01))
    assert low.choose().k == 3


# --- through the loop -------------------------------------------------------------------


@pytest.fixture(scope="module")
def store() -> ModelStore:
    return shared_store()  # the tiny models, loaded once per test process


@pytest.fixture(scope="module")
def pair(tiny_family, store) -> Models:
    return Models(store.get(str(tiny_family["llama_target"])),
                  store.get(str(tiny_family["llama_draft"])))


def run(name: str, models: Models, settings: DecodeSettings) -> Trace:
    ids = models.target.tokenizer.encode(PROMPT)
    return Trace(name, list(run_strategy(name, models, ids, settings)))


def greedy(**kw) -> DecodeSettings:
    kw.setdefault("max_tokens", TOKENS)
    return DecodeSettings(stop_at_eos=False, **kw)


POLICIES = [AUTO, GROW, "pmin:0.3", "pmin:0.9"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", ["draft", "ngram", "chain"])
def test_each_policy_equals_plain_and_records_its_choices(pair, policy, name) -> None:
    settings = greedy(num_draft_tokens=policy, ngram_k=policy, max_tokens=64)
    trace = run(name, pair, settings)
    assert trace.tokens == run("plain", pair, greedy(max_tokens=64)).tokens
    chosen = [r for r in trace.rounds if r.length is not None]
    assert len(chosen) == len(trace.rounds)
    assert {r.length.policy for r in chosen} == {policy.partition(":")[0]}
    assert all(len(r.drafted) <= r.length.k for r in chosen)
    assert all(choice_words(r) for r in chosen)


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_with_an_mtp_head_equals_plain(tiny_family, store, policy) -> None:
    target = store.get(str(tiny_family["mtp_target"]))
    models = Models(target, mtp=load_mtp(target))
    trace = run("mtp", models, greedy(mtp_depth=policy))
    assert trace.tokens == run("plain", models, greedy()).tokens
    assert all(r.length is not None and r.length.k <= 8 for r in trace.rounds)


@pytest.mark.parametrize("drafter", ["llama_draft", "hybrid_draft", "mtp"])
def test_pmin_drafts_while_the_draft_is_sure_and_records_where_it_stopped(
        tiny_family, store, drafter) -> None:
    """At temperature 0 a draft's probability is its top one: every draft kept in a round
    is at least the threshold, and a round that stopped short records the probability
    under it that stopped it. The output is plain's, and the draft step that found the
    probability is undone (a recurrent draft's state too): each round's drafts are what
    the draft model makes from the whole text so far."""
    target = store.get(str(tiny_family["mtp_target" if drafter == "mtp" else "llama_target"]))
    if drafter == "mtp":
        models, name = Models(target, mtp=load_mtp(target)), "mtp"
    else:
        models, name = Models(target, store.get(str(tiny_family[drafter]))), "draft"
    plain = run("plain", models, greedy(max_tokens=64)).tokens

    def rounds(count: str, check_drafts: bool = False) -> list[tuple[Round, int]]:
        """The rounds of a run but the first (an MTP head's drafts nothing), each with
        how many tokens the run had left when it drafted."""
        trace = run(name, models, greedy(num_draft_tokens=count, mtp_depth=count,
                                         max_tokens=64))
        assert trace.tokens == plain
        made = list(accumulate((len(r.tokens) for r in trace.rounds), initial=0))
        prompt = target.tokenizer.encode(PROMPT)
        for r, done in zip(trace.rounds, made):
            if check_drafts and r.drafted and models.draft is not None:
                own = run_strategy("plain", Models(models.draft), prompt + plain[:done],
                                   greedy(max_tokens=len(r.drafted)))
                assert r.drafted == Trace("plain", list(own)).tokens
        return [(r, 64 - done) for r, done in zip(trace.rounds, made)][1:]

    # Thresholds where some drafts pass and some do not: quartiles of the tiny models'
    # probabilities, drafted with a threshold that never stops.
    sure = sorted(q for r, _ in rounds("pmin:1e-09") for q in r.draft_probs)
    for p_min, check_drafts in ((sure[len(sure) // 4], False), (sure[len(sure) // 2], True)):
        count = parse_draft_count(f"pmin:{p_min:g}")
        p_min = float(count.partition(":")[2])
        ran = rounds(count, check_drafts)
        assert all(q >= p_min for r, _ in ran for q in r.draft_probs or ())
        stopped = [r for r, _ in ran if r.length.stopped is not None]
        assert all(r.length.stopped < p_min for r in stopped)
        assert all(len(r.drafted) == min(r.length.k, left)
                   for r, left in ran if r.length.stopped is None)
        assert {bool(r.drafted) for r in stopped} == {True, False}  # so it can fail


def test_a_round_cut_by_the_token_limit_says_so(pair) -> None:
    # grow's first round asks for 5 drafts: a limit of 3 tokens cuts it, whatever the
    # models write; 12 tokens run whole rounds before the limit.
    rounds = [r for limit in (3, 12)
              for r in run("draft", pair, greedy(num_draft_tokens=GROW, max_tokens=limit)).rounds]
    cut = [r for r in rounds if 0 < len(r.drafted) < r.length.k]
    assert cut and len(cut) < len(rounds)
    assert all(choice_words(r).endswith(f"; {len(r.drafted)} drafted: the token limit "
                                        "left no room for more") for r in cut)
    assert not any("drafted:" in choice_words(r) for r in rounds if r not in cut)


def test_auto_at_temperature_zero_learns_from_the_drafts_guesses(pair) -> None:
    trace = run("draft", pair, greedy(num_draft_tokens=AUTO, max_tokens=96))
    assert trace.rounds[0].length.why == "time"  # no calibration: a plain step is timed
    assert any(r.drafted for r in trace.rounds)
    # It learns past the k it drafts: the draft's guesses judged at plain steps (only
    # there), or an exploration while it drafts. The run's timings decide which.
    judged = [r for r in trace.rounds if r.length.guesses]
    assert all(not r.drafted and len(r.length.guesses) >= 8 for r in judged)
    assert judged or any(r.length.why == "explore" for r in trace.rounds)


# --- any sequence of k ------------------------------------------------------------------


class Scripted:
    """A policy that asks for the ks of a script in turn (0 included): the proposers'
    catching up after a plain step, and every k after every other."""

    def __init__(self, script: list[int]) -> None:
        self.script, self.turn = script, 0

    def choose(self) -> LengthChoice:
        self.turn += 1
        return LengthChoice("auto", self.script[(self.turn - 1) % len(self.script)], "best")

    def observe(self, event: Round) -> None:
        pass


SCRIPT = [0, 3, 1, 0, 0, 5, 2, 0, 4, 1]


@pytest.fixture
def scripted(monkeypatch):
    for module in (draft, mtp, ngram):
        monkeypatch.setattr(module, "draft_length",
                            lambda settings, name, calibration=None: Scripted(SCRIPT))


@pytest.mark.parametrize("target,drafter", [
    ("llama_target", "llama_draft"), ("hybrid_target", "hybrid_draft"),
    ("llama_target", "hybrid_draft"),
])
def test_any_sequence_of_k_equals_plain_at_temperature_zero(
        tiny_family, store, scripted, target, drafter) -> None:
    models = Models(store.get(str(tiny_family[target])), store.get(str(tiny_family[drafter])))
    plain = run("plain", models, greedy())
    for name in ("draft", "ngram"):
        assert run(name, models, greedy()).tokens == plain.tokens, name
    # Choices are made one round late: the first serves the first two rounds.
    lengths = [len(r.drafted) for r in run("draft", models, greedy()).rounds]
    assert lengths[:len(SCRIPT) + 1] == [SCRIPT[0], *SCRIPT]


def test_mtp_with_any_sequence_of_k_equals_plain(tiny_family, store, scripted) -> None:
    target = store.get(str(tiny_family["mtp_target"]))
    models = Models(target, mtp=load_mtp(target))
    assert run("mtp", models, greedy()).tokens == run("plain", models, greedy()).tokens


def test_a_round_that_drafts_nothing_is_all_the_targets_time(pair, scripted) -> None:
    trace = run("draft", pair, greedy())
    plain_steps = [r for r in trace.rounds if not r.drafted]
    assert plain_steps and all(r.draft_seconds == 0.0 for r in plain_steps)
    assert all(r.proposer is None for r in plain_steps)
    assert all(r.proposer == "draft" for r in trace.rounds if r.drafted)
    assert compute_stats(trace.events).single_pass_seconds > 0


@pytest.mark.parametrize("drafter", ["llama_draft", "hybrid_draft"])
def test_a_draft_catches_up_on_the_rounds_it_skipped(tiny_family, store, scripted,
                                                     drafter) -> None:
    """After plain steps (a script's 0s, two in a row too) the draft model proposes what
    it would from the whole text so far: its catching up fed every skipped token."""
    draft_model = store.get(str(tiny_family[drafter]))
    models = Models(store.get(str(tiny_family["llama_target"])), draft_model)
    trace = run("draft", models, greedy())
    prompt = models.target.tokenizer.encode(PROMPT)
    done: list[int] = []
    after_skips = 0
    for i, r in enumerate(trace.rounds):
        if r.drafted:
            own = run_strategy("plain", Models(draft_model), prompt + done,
                               greedy(max_tokens=len(r.drafted)))
            assert r.drafted == Trace("plain", list(own)).tokens, f"round {i}"
            after_skips += i > 1 and not trace.rounds[i - 1].drafted
        done += r.tokens
    assert after_skips >= 3


# --- the target's distribution above temperature 0 --------------------------------------


@pytest.mark.parametrize("policy,temperature", [
    (AUTO, 0.2), (GROW, 0.2),
    # At 0.9 the draft's first guess here is sure at 0.18 and its second at 0.16 to 0.6
    # by what the first drew: some rounds stop at one draft, the others draft two.
    ("pmin:0.17", 0.9)])
def test_each_policy_keeps_the_targets_distribution(tiny_family, store, policy,
                                                    temperature) -> None:
    """``auto`` priced by a calibration where drafting pays (so it drafts from its first
    round), ``grow``, and ``pmin`` with a threshold that stops some rounds after their
    first draft, at temperature > 0: the first two tokens follow the target's law."""
    models = Models(store.get(str(tiny_family["llama_target"])),
                    store.get(str(tiny_family["llama_draft"])),
                    calibration=made_calibration(draft_step=0.05, slope=0.05))
    ids = models.target.tokenizer.encode(PROMPT)
    sampling = replace(SAMPLING, temperature=temperature)
    firsts: list[Round] = []

    def tokens(seed: int) -> list[int]:
        settings = DecodeSettings(max_tokens=2, stop_at_eos=False, num_draft_tokens=policy,
                                  sampling=replace(sampling, seed=seed))
        trace = Trace("draft", list(run_strategy("draft", models, ids, settings)))
        firsts.append(trace.rounds[0])
        return trace.tokens

    assert min(lossless_pvalues(tokens, models.target.model, ids, sampling, SAMPLES)) > 1e-3
    assert all(r.drafted and r.length.policy == policy.partition(":")[0] for r in firsts)
    if policy.startswith("pmin"):
        assert {len(r.drafted) for r in firsts} == {1, 2}, "some rounds stop, some do not"


def test_a_sweep_runs_the_policies_beside_fixed_k(tiny_family) -> None:
    """``-k 1,auto,grow``: each policy is a cell like any other (checked against plain,
    saved, read back); the chart draws auto as a level across the fixed k."""
    from specdeck.engines.core.requests import SweepPrompt, SweepRequest
    from specdeck.engines.runs.sweep import recommendations, run_sweep
    from specdeck.sessions.chart import auto_levels, series_of
    from specdeck.sessions.session import sweep_document
    from specdeck.sessions.sweep_file import sweep_from_document

    request = SweepRequest(
        target=str(tiny_family["llama_target"]), draft=str(tiny_family["llama_draft"]),
        prompts=[SweepPrompt("p", PROMPT)], strategies=["draft"], ks=[1, AUTO, GROW],
        reps=1, warmup=0, max_tokens=24)
    cells, complete = run_sweep(request)
    assert complete and all(c.correct for c in cells)
    assert [c.label for c in cells] == ["plain", "draft k=1", "draft k=auto", "draft k=grow"]
    sweep = sweep_from_document(sweep_document(request, cells, recommendations(cells),
                                               True, {}))
    assert [c["k"] for c in sweep.cells] == [None, 1, AUTO, GROW]
    assert series_of(sweep.cells) == {"p: draft": [(1, sweep.cells[1]["speedup"])]}
    assert auto_levels(sweep.cells) == {"p: draft": sweep.cells[2]["speedup"]}
