"""Issue 18 on screen: the drafts auto chose (a second sparkline, ``auto k``, the
inspector's why), what mlx-lm's exact-match rule would have kept (strip and inspector),
and chain's copied drafts (their own token kind, in the legend)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specdeck.engines.runs.compare import run_compare
from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.models.demo import require_demo_models
from specdeck.engines.core.events import Round
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
    greedy = _round(exact_match_accepted=1, auto_k=3, auto_tokens=2.4, auto_cost=1.9)
    lines = verdict("draft", greedy, 4, 10).split("\n")
    assert len(lines) == 3 and "drafted by" not in lines[0]
    assert lines[2] == ("auto chose 3 drafts: expects 2.40 tokens for 1.90 one-token "
                        "passes (1.26x a plain step)")
    for hoped, why in ((False, "; exploring: a k other than the best predicted"),
                       (True, "; hoping: deeper than the best predicted, as too few drafts "
                              "were judged there to rule it out")):
        lines = verdict("draft", replace(greedy, auto_explored=True, auto_hoped=hoped),
                        4, 10).split("\n")
        assert lines[2].startswith("auto chose 3 drafts: expects 2.40 tokens for 1.90 "
                                   "one-token passes (1.26x a plain step)" + why)
    lines = verdict("draft", replace(greedy, auto_held=6), 4, 10).split("\n")
    assert " ".join(lines[2:]) == (
        "auto chose 3 drafts: expects 2.40 tokens for 1.90 one-token passes (1.26x a plain "
        "step); not k=6, predicted faster: too few rounds have reached its deeper drafts "
        "to trust that")
    step = _round(drafted=[], accepted=0, tokens=[8], rejected_pieces=[], pieces=["c"],
                  auto_k=0, auto_tokens=1.0, auto_cost=1.0,
                  guesses=[True, False, True, True, False, False, True, True])
    lines = verdict("draft", step, 4, 10).split("\n")
    assert lines[2:] == [
        "auto chose a plain step: no k was predicted to pay for its cost",
        "then auto judged the draft's guesses at the last 8 tokens: 5 right (62%), as "
        "drafting rounds there would have, with none run"]
    lines = verdict("draft", replace(step, auto_held=3, guesses=None), 4, 10).split("\n")
    assert lines[2:] == ["auto chose a plain step: k=3 was predicted to pay, but too few "
                         "rounds have reached its deeper drafts to trust that"]
    lines = verdict("draft", replace(step, auto_ruled_out=True, guesses=None),
                    4, 10).split("\n")
    assert " ".join(lines[2:]) == (
        "auto chose a plain step: no k could pay for its cost even were every draft kept, "
        "at the draft and verify costs measured so far")


def test_the_headless_summary_counts_the_guesses_judged_and_steps_ruled_out() -> None:
    from specdeck.engines.auto.draft_length import auto_summary

    rounds = [_round(auto_k=2), _round(drafted=[], accepted=0, tokens=[8], pieces=["c"],
                                       rejected_pieces=[], auto_k=0, guesses=[True, False])]
    assert auto_summary(rounds).endswith(
        "0 exploring rounds, 0 hopeful; 2 of the draft's guesses judged at plain steps, "
        "50% right")
    rounds += [_round(auto_k=3, auto_explored=True), _round(auto_k=4, auto_explored=True,
                                                            auto_hoped=True)]
    assert "1 exploring round, 1 hopeful;" in auto_summary(rounds)
    assert "no k could pay" not in auto_summary(rounds)
    step = rounds[1]
    rounds += [replace(step, index=i, guesses=None, auto_ruled_out=True) for i in (9, 10)]
    assert auto_summary(rounds).endswith(
        "; no k could pay even were every draft kept at 2 plain steps (from round 9)")


def test_the_strip_shows_the_mlx_lm_rule_only_for_sampled_runs_and_auto_k() -> None:
    rounds = [_round(exact_match_accepted=0, index=i, t=float(i + 1)) for i in range(3)]
    stats = compute_stats(rounds)
    texts = [f.text for f in stats_figures(stats, None, False, sampled=True, auto_k=2)]
    assert "mlx-lm rule 0%" in texts and "accept 33%" in texts and "auto k 2" in texts
    texts = [f.text for f in stats_figures(stats, None, False)]
    assert not any("mlx-lm" in t or "auto k" in t for t in texts)


def saved(tmp_path_factory, name: str, request: CompareRequest):
    result = run_compare(request)
    path = tmp_path_factory.mktemp("issue18") / f"{name}.json"
    save_document(path, build_document(
        {"prompt": request.prompt, "strategies": request.strategies,
         "settings": request.settings.to_dict()}, {}, result.traces))
    return path


@pytest.fixture(scope="module")
def sampled_path(tmp_path_factory):
    """plain, draft with k = auto and chain at temperature 0.7 on the demo family."""
    demo = require_demo_models()
    return saved(tmp_path_factory, "sampled", CompareRequest(
        target=demo.target, draft=demo.draft, strategies=["plain", "draft", "chain"],
        prompt=COPYABLE, warmup_tokens=0,
        settings=DecodeSettings(max_tokens=64, stop_at_eos=False, ngram_n=2,
                                num_draft_tokens="auto",
                                sampling=Sampling(temperature=0.7, seed=4))))


@pytest.mark.parametrize("size", [(80, 24), (160, 45), (220, 60)], ids=str)
@run_async
async def test_auto_and_the_mlx_lm_rule_on_screen(sampled_path, size):
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
            last = draft.rounds[-1].auto_k
            assert shows(seen, f"auto k {last}")
            chosen = draft.strip.query_one(".stats-k-sparkline")
            assert chosen.display and list(chosen.data) == [
                float(r.auto_k) for r in draft.rounds]
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
