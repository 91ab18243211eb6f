"""On screen: the drafts a policy chose (a second sparkline, ``auto k``, the inspector's
why, in each policy's terms), what mlx-lm's exact-match rule would have kept (strip and inspector),
and chain's copied drafts (their own token kind, in the legend)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specdeck.engines.runs.compare import run_compare
from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.models.demo import require_demo_models
from specdeck.engines.core.events import LengthChoice, Round
from specdeck.engines.core.requests import CompareRequest
from specdeck.engines.core.stats import compute_stats
from specdeck.prompts import get_prompt
from specdeck.sessions.session import build_document, save_document
from specdeck.testing.pilot import run_async
from specdeck.tui.inspector import verdict
from specdeck.tui.legend import Legend
from specdeck.tui.stats_strip import stats_figures
from specdeck.tui.token_view import round_tokens
from helpers.app import inside, raced, replay_of, shows

#: The module's tests share one recording: one xdist worker runs them all.
pytestmark = pytest.mark.xdist_group("tui_auto")

COPYABLE = "def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n    return a + b\n\n\ndef"


def _round(**kw) -> Round:
    base = dict(index=4, drafted=[5, 6, 7], accepted=1, tokens=[5, 8], end="correction",
                pieces=["a", "c"], rejected_pieces=["x", "y"], draft_seconds=0.01,
                verify_seconds=0.02, t=1.0)
    return Round(**{**base, **kw})


def test_a_chain_pane_marks_copied_drafts_and_no_other_pane_does() -> None:
    copied = _round(proposer="ngram")
    assert [k for _, k in round_tokens(copied, by_proposer=True)][:1] == ["copied"]
    assert [k for _, k in round_tokens(copied)][:1] == ["accepted"]
    model = _round(proposer="draft")
    assert [k for _, k in round_tokens(model, by_proposer=True)][:1] == ["accepted"]


def test_the_verdict_says_who_drafted_what_mlx_lm_would_keep_and_why_this_k() -> None:
    sampled = _round(proposer="ngram", uniforms=[0.1, 0.5, 0.9], exact_match_accepted=0,
                     draft_probs=[1.0] * 3, target_probs=[0.5] * 3)
    lines = verdict("chain", sampled, 4, 10).split("\n")
    assert lines[0].endswith("· drafted by prompt lookup")
    assert lines[2].startswith("mlx-lm's rule would have kept 0 of 3 here")
    chose = LengthChoice("auto", 3, "best", 2.4, 1.9)
    greedy = _round(exact_match_accepted=1, length=chose)
    lines = verdict("draft", greedy, 4, 10).split("\n")
    assert len(lines) == 3 and "drafted by" not in lines[0]
    assert lines[2] == ("auto chose 3 drafts: expects 2.40 tokens for 1.90 one-token "
                        "passes (1.26x a plain step)")
    explored = replace(greedy, length=replace(chose, why="explore"))
    assert verdict("draft", explored, 4, 10).split("\n")[2].endswith(
        "; exploring: a neighbour of the best k, tried every 8 rounds to keep its "
        "estimates honest")
    step = _round(drafted=[], accepted=0, tokens=[8], rejected_pieces=[], pieces=["c"],
                  length=LengthChoice("auto", 0, "best", 1.0, 1.0, guesses=[
                      True, False, True, True, False, False, True, True]))
    assert verdict("draft", step, 4, 10).split("\n")[2:] == [
        "auto chose a plain step: no k was predicted to pay for its cost",
        "then auto judged the draft's guesses at the last 8 tokens: 5 right (62%), as "
        "drafting rounds there would have, with none run"]
    timing = replace(step, length=LengthChoice("auto", 0, "time"))
    assert "it times plain steps" in verdict("draft", timing, 4, 10)
    # The other policies, each in its own terms.
    grew = _round(length=LengthChoice("grow", 3, "grew"))
    assert verdict("draft", grew, 4, 10).split("\n")[2] == (
        "grow chose 3 drafts: the round before last kept every draft (transformers' "
        "schedule: +2 after a round kept whole, -1 after one that was not)")
    stopped = _round(length=LengthChoice("pmin", 16, "p_min", p_min=0.6, stopped=0.41))
    assert verdict("draft", stopped, 4, 10).split("\n")[2] == (
        "pmin drafted 3, then stopped drafting where the draft's top probability fell to "
        "0.41, under 0.6 (llama.cpp's --draft-p-min)")
    unsure = replace(stopped, drafted=[], accepted=0, tokens=[8], rejected_pieces=[])
    assert verdict("draft", unsure, 4, 10).split("\n")[2].startswith(
        "pmin stopped drafting where the draft's top probability fell to 0.41")
    assert verdict("draft", _round(), 4, 10).count("\n") == 1  # a fixed k: nothing to say


def test_the_headless_summary_says_what_each_policy_chose() -> None:
    from specdeck.engines.auto.explain import length_summary

    step = _round(drafted=[], accepted=0, tokens=[8], pieces=["c"], rejected_pieces=[],
                  length=LengthChoice("auto", 0, "best", guesses=[True, False]))
    rounds = [_round(length=LengthChoice("auto", 2, "best")), step,
              _round(length=LengthChoice("auto", 3, "explore"))]
    assert length_summary(rounds) == (
        "auto drafted k = 0..3, mostly 0; plain steps in 33% of rounds; 1 exploring, 0 "
        "tried from plain steps; 2 of the draft's guesses judged at plain steps, 50% right")
    uncalibrated = [_round(length=LengthChoice("auto", 1, "start"))] * 2 + rounds
    assert length_summary(uncalibrated).endswith(
        "; 2 rounds drafted to time drafting (no calibration here: specdeck calibrate times "
        "it once for every run)")
    grow = [_round(length=LengthChoice("grow", k, why))
            for k, why in ((16, "start"), (15, "shrank"), (14, "shrank"), (16, "grew"))]
    assert length_summary(grow) == "grow drafted k = 14..16, mostly 16; grew 1 times, shrank 2"
    pmin = [_round(length=LengthChoice("pmin", 16, "p_min", p_min=0.6, stopped=0.3)),
            _round(drafted=[5, 6, 7, 8], tokens=[5, 6, 7, 8, 9], accepted=4,
                   rejected_pieces=[], pieces=list("abcde"),
                   length=LengthChoice("pmin", 16, "p_min", p_min=0.6, stopped=0.5))]
    assert length_summary(pmin) == (
        "pmin:0.6 drafted 3..4 a round, mostly 3; it stopped under the draft's top "
        "probability 0.6 in 2 of 2 rounds")
    assert length_summary([_round()]) is None


def test_the_strip_shows_the_mlx_lm_rule_only_for_sampled_runs_and_the_chosen_k() -> None:
    rounds = [_round(exact_match_accepted=0, index=i, t=float(i + 1)) for i in range(3)]
    stats = compute_stats(rounds)
    texts = [f.text for f in stats_figures(stats, None, False, sampled=True, chosen_k=2)]
    assert "mlx-lm rule 0%" in texts and "accept 33%" in texts and "auto k 2" in texts
    texts = [f.text for f in stats_figures(stats, None, False, chosen_k=7, policy="grow")]
    assert "grow k 7" in texts
    texts = [f.text for f in stats_figures(stats, None, False)]
    assert not any("mlx-lm" in t or " k " in t for t in texts)


def saved(tmp_path_factory, name: str, request: CompareRequest):
    result = run_compare(request)
    path = tmp_path_factory.mktemp("auto") / f"{name}.json"
    save_document(path, build_document(
        {"prompt": request.prompt, "strategies": request.strategies,
         "settings": request.settings.to_dict()}, {}, result.traces))
    return path


@pytest.fixture(scope="module")
def sampled_path(tmp_path_factory):
    """plain, draft with k = auto and chain at temperature 0.7 on the demo family,
    recorded once for the module (whose tests share one xdist worker, ``pytestmark``)."""
    demo = require_demo_models()
    return saved(tmp_path_factory, "sampled", CompareRequest(
        target=demo.target, draft=demo.draft, strategies=["plain", "draft", "chain"],
        prompt=COPYABLE, warmup_tokens=0,
        settings=DecodeSettings(max_tokens=64, stop_at_eos=False, ngram_n=2,
                                num_draft_tokens="auto",
                                sampling=Sampling(temperature=0.7, seed=4))))


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=str)
@run_async
async def test_auto_and_the_mlx_lm_rule_on_screen(sampled_path, size):
    """The legend wraps under 120 columns; the chosen k's sparkline shows from 160."""
    app = replay_of(sampled_path)
    async with app.run_test(size=size) as pilot:
        await raced(app, pilot)
        legend = app.query_one(Legend)
        assert legend.chained and "copied draft" in str(legend.render())
        assert legend.size.height == (2 if size[0] < 120 else 1)  # wrapped, never cut
        draft, chain = app.pane("draft"), app.pane("chain")
        stats = draft.stats
        assert draft.detail == "k=auto" and chain.detail == "n=2 k=auto"
        seen = inside(app, draft.region)
        rule = f"mlx-lm rule {stats.exact_match_acceptance_rate:.0%}"
        assert shows(seen, f"accept {stats.acceptance_rate:.0%}") and shows(seen, rule)
        if size[0] >= 160:
            last = draft.rounds[-1].length.k
            assert shows(seen, f"auto k {last}")
            chosen = draft.strip.query_one(".stats-k-sparkline")
            assert chosen.display and list(chosen.data) == [
                float(r.length.k) for r in draft.rounds]
            assert not app.pane("plain").strip.query_one(".stats-k-sparkline").display
        # The inspector on a round auto chose: why it chose that k.
        app.screen.set_focus(draft)
        await pilot.press("i")
        await pilot.pause()
        head = str(app.query_one("#inspector-verdict").render())
        assert "auto chose" in head


@run_async
async def test_a_chain_pane_marks_what_prompt_lookup_copied(tmp_path_factory):
    """Greedy on a prompt whose text the demo model copies: the chain pane's copied
    tokens are exactly the accepted drafts of rounds prompt lookup drafted."""
    demo = require_demo_models()
    path = saved(tmp_path_factory, "greedy", CompareRequest(
        target=demo.target, draft=demo.draft, strategies=["plain", "chain"],
        prompt=get_prompt("code").text, warmup_tokens=0,
        settings=DecodeSettings(max_tokens=96, stop_at_eos=False)))
    app = replay_of(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await raced(app, pilot)
        chain = app.pane("chain")
        copied = [text for text, kind in chain.view.tokens if kind == "copied"]
        expected = [piece for r in chain.rounds if r.proposer == "ngram"
                    for piece in r.pieces[: r.accepted]]
        assert copied == expected and len(copied) >= 5
        assert {kind for _, kind in chain.view.tokens} >= {"copied", "accepted"}
