"""The draft's guesses on ordinary text, judged by ``specdeck calibrate`` (issue 18): how
far they run, and what ``auto`` makes of them (no hope for deep drafts where no k past
one pays)."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from specdeck.engines.measure.calibration import Calibration, Timing
from specdeck.engines.runs.compare import encode_prompt
from specdeck.engines.core.config import (
    AUTO, MAX_DRAFT_TOKENS, MAX_MTP_DEPTH, DecodeSettings, Sampling,
)
from specdeck.engines.core.events import Round
from specdeck.engines.auto.draft_length import (
    HOPE_BUDGET, START, TIMED_MIN, AdaptiveLength, auto_estimate_line, draft_length,
    hope_budget,
)
from specdeck.engines.distributed.costs import PASS_SIZES
from specdeck.engines.auto.guess_probe import (
    greedy_output, guesses_right, runs_of, survival_of_guesses, survival_of_runs,
)
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.decode.run import Models, run_strategy
from helpers.auto import feed, synthetic

#: Survivals by position: a third of guesses right and each one after a right one less
#: so (smollm2's pair: 32 %, 10 %, 2 % ...), and a drafter right at 80 % of tokens.
POOR = tuple(0.2 ** i for i in range(1, MAX_DRAFT_TOKENS + 1))
GOOD = tuple(0.8 ** i for i in range(1, MAX_DRAFT_TOKENS + 1))


def calibration(survival: tuple[float, ...] | None) -> Calibration:
    """A 10 ms target step, a pass of n tokens 1 + 0.1 (n - 1) steps, a draft step of
    0.1 steps, and the draft's guesses on ordinary text surviving as ``survival``."""
    return Calibration(
        machine="m", target="t", target_identity="ti", draft="d", draft_identity="di",
        passes=tuple(Timing(0.010 * (1 + 0.1 * (n - 1)), 0.0) for n in PASS_SIZES),
        draft_step=Timing(0.001, 0.0), mtp_step=Timing(0.001, 0.0), reps=5,
        measured="2026-12-02T00:00:00+00:00", guess_survival=survival)


def test_the_survival_counts_the_run_of_right_guesses_from_every_token() -> None:
    # Runs from each token: 2, 1, 0, 1 and 0; a run cut by the text's end counts as far
    # as it went.
    assert survival_of_guesses([[True, True, False, True], [False]], most=3) == (
        pytest.approx(3 / 5), pytest.approx(1 / 5), 0.0)
    assert survival_of_guesses([]) == ()
    assert runs_of([True, True, False, True]) == [2, 1, 0, 1]
    # Runs given as they are (an MTP head's, chained, are not runs of right guesses).
    assert survival_of_runs([[0, 3, 1], [2]], most=3) == (0.75, 0.5, 0.25)


def test_the_guesses_are_what_drafting_rounds_keep(tiny_family) -> None:
    """A model guesses its own greedy output right at every token; for a draft, each
    round of one draft at temperature 0 keeps its draft exactly where the guess there
    is right (the one pass over the text judges what the rounds judge one by one)."""
    store = ModelStore()
    target = store.get(str(tiny_family["llama_target"]))
    draft = store.get(str(tiny_family["llama_draft"]))
    prompt = encode_prompt(target.tokenizer, "def add(a, b):\n    return", chat=False)
    answer = greedy_output(target, prompt, 24)
    itself = guesses_right(target, prompt, answer)
    assert len(itself) == 24 and all(itself)
    right = guesses_right(draft, prompt, answer)
    settings = DecodeSettings(max_tokens=24, num_draft_tokens=1, stop_at_eos=False,
                              sampling=Sampling(temperature=0.0))
    at, kept = 0, []
    for event in run_strategy("draft", Models(target, draft), prompt, settings):
        if isinstance(event, Round) and event.drafted and at < 24:
            kept.append((at, event.accepted == 1))
            at += len(event.tokens)
    assert len(kept) >= 12 and {False, True} <= set(right)  # both verdicts, so it can fail
    assert all(right[position] == verdict for position, verdict in kept)


def test_no_hope_where_no_k_past_one_pays_on_ordinary_text() -> None:
    """Priced by the calibration, k = 1 at the poor survival makes 1.2 tokens for 1.2
    steps, k = 2 1.24 for 1.4 (0.89x): every k past one is more than 10 % slower, so
    ``auto`` hopes for none; with good guesses, or none judged, it keeps its budget."""
    costs = calibration(POOR).drafting_costs("draft")
    assert hope_budget(8, costs, POOR) == 0.0
    assert hope_budget(8, costs, GOOD) == HOPE_BUDGET
    assert hope_budget(8, costs, None) == HOPE_BUDGET
    assert hope_budget(8, None, POOR) == HOPE_BUDGET  # nothing to price it by

    def hopeful(typical: tuple[float, ...]) -> int:
        # Three rounds in five keep every draft: a run that hopes deeper at once.
        policy = AdaptiveLength(8, costs, typical)
        policy.expect_guesses()
        for i in range(1, TIMED_MIN + 3):  # the one-token pass timed, as near break-even
            policy.observe(synthetic(0, 0, draft_step=0.0, verify=1.0, index=i))
        choices = feed(policy, 0.6, draft_step=0.1, pass_cost=lambda n: 1.0 + 0.1 * (n - 1),
                       rounds=24, bonus=True)
        return sum(c.hoped for c in choices)

    assert hopeful(GOOD) >= 3
    assert hopeful(POOR) == 0


def test_each_drafter_takes_its_own_survival_from_the_calibration() -> None:
    settings = DecodeSettings(num_draft_tokens=AUTO, mtp_depth=AUTO, ngram_k=AUTO)
    poor = calibration(POOR)  # the draft's guesses judged, the MTP head's drafts not
    assert draft_length(settings, "draft", poor).hope_budget == 0.0
    assert draft_length(settings, "mtp", poor).hope_budget == HOPE_BUDGET
    assert draft_length(settings, "ngram", poor).hope_budget == HOPE_BUDGET
    poor_head = replace(calibration(GOOD), mtp_survival=POOR[:MAX_MTP_DEPTH])
    assert draft_length(settings, "mtp", poor_head).hope_budget == 0.0
    assert draft_length(settings, "draft", poor_head).hope_budget == HOPE_BUDGET


def mtp_policy(survival: tuple[float, ...] | None) -> AdaptiveLength:
    """``auto`` for an MTP head whose step costs 0.3 plain steps (k = 1 at the poor
    survival: 1.2 tokens for 1.4 steps), its drafts on ordinary text surviving as
    ``survival``."""
    cal = replace(calibration(None), mtp_step=Timing(0.003, 0.0), mtp_survival=survival)
    policy = draft_length(DecodeSettings(mtp_depth=AUTO), "mtp", cal)
    assert isinstance(policy, AdaptiveLength)
    return policy


def test_no_tries_where_the_heads_drafts_lose_on_ordinary_text() -> None:
    """Where every k loses at the head's survival on ordinary text, ``auto`` starts at
    plain steps, and a round trying drafting from them (each losing 1.9 plain steps:
    0.4 its own, 1.5 the plain step after it) waits until 2 % of the plain steps run
    cover what the ones before lost: one in 90 rounds, where a floor of three plain
    steps had paid for two. With a good survival, or none judged, it tries first."""
    policy = mtp_policy(POOR[:MAX_MTP_DEPTH])
    assert policy.typical_loses
    choices, after_round = [], False
    for i in range(1, 91):
        choice = policy.choose()
        choices.append(choice)
        seconds = 0.3 * choice.k + 1.0 + 0.1 * choice.k if choice.k else (
            2.5 if after_round else 1.0)
        event = synthetic(choice.k, 0, draft_step=0.3 if choice.k else 0.0,
                          verify=seconds - 0.3 * choice.k, index=i)
        event.auto_k, event.auto_explored = choice.k, choice.explored
        policy.observe(event)
        after_round = bool(choice.k)
    assert choices[0].k == 0
    drafting = [c for c in choices if c.k]
    assert len(drafting) == 1 and drafting[0].explored and not drafting[0].hoped
    for survival in (GOOD[:MAX_MTP_DEPTH], None):
        other = mtp_policy(survival)
        assert not other.typical_loses
        assert other.choose().k == START
    # Said before a run: of the head; of a draft model only where no guesses are judged.
    cal = replace(calibration(POOR), draft_step=Timing(0.003, 0.0), mtp_step=Timing(0.003, 0.0),
                  mtp_survival=POOR[:MAX_MTP_DEPTH])
    assert "auto starts at plain steps, with no tries" in auto_estimate_line(cal, "mtp")
    assert "with no tries" in auto_estimate_line(cal, "draft", guesses=False)
    assert "with no tries" not in auto_estimate_line(cal, "draft")


@pytest.mark.parametrize("survival", ["most", [1.2], [0.2, 0.5], [], [0.5] * 17, [None]])
def test_a_cached_survival_that_is_not_one_makes_the_file_ignored(survival) -> None:
    record = {**calibration(GOOD).to_dict(), "guess_survival": survival}
    assert Calibration.from_dict(record) is None


def test_the_survival_round_trips_and_older_files_load_without_it() -> None:
    cal = calibration(GOOD)
    assert Calibration.from_dict(orjson.loads(orjson.dumps(cal.to_dict()))) == cal
    older = cal.to_dict()
    del older["guess_survival"]
    assert Calibration.from_dict(older) == replace(cal, guess_survival=None)


def test_calibrate_reports_the_guesses_and_what_auto_makes_of_them() -> None:
    from specdeck.commands.calibrate import report

    text = "\n".join(report(calibration(POOR), 0.6))
    assert "right at 20% of tokens; survival by position 20% 4% 1% 0%" in text
    assert "auto will not hope for deeper drafts" in text
    text = "\n".join(report(calibration(GOOD), 0.6))
    assert "right at 80% of tokens" in text and "auto may hope" in text
    assert "greedy guesses" not in "\n".join(report(calibration(None), 0.6))
    head = replace(calibration(GOOD), mtp_step=Timing(0.003, 0.0),
                   mtp_survival=POOR[:MAX_MTP_DEPTH])
    text = "\n".join(report(head, 0.6))
    assert "the MTP head's greedy drafts on the built-in code and prose prompts" in text
    after = text[text.index("the MTP head's greedy drafts"):]
    assert "right at 20% of tokens" in after and "plain decoding wins" in after
    assert "auto will not hope" in after
