"""The draft's guesses on ordinary text, judged by ``specdeck calibrate``: how far they
run (what a typical round keeps), and what that predicts."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from specdeck.engines.measure.calibration import Calibration, Timing
from specdeck.engines.runs.compare import encode_prompt
from specdeck.engines.core.config import MAX_DRAFT_TOKENS, MAX_MTP_DEPTH, DecodeSettings, Sampling
from specdeck.engines.core.events import Round
from specdeck.engines.distributed.costs import PASS_SIZES
from specdeck.engines.measure.guess_probe import (
    greedy_output, guesses_right, runs_of, survival_of_guesses, survival_of_runs,
)
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.decode.run import Models, run_strategy

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


def test_calibrate_reports_the_guesses_and_the_best_k_they_predict() -> None:
    from specdeck.commands.calibrate import report

    text = "\n".join(report(calibration(POOR), 0.6))
    assert "right at 20% of tokens; survival by position 20% 4% 1% 0%" in text
    assert "at that: plain decoding wins" in text
    text = "\n".join(report(calibration(GOOD), 0.6))
    assert "right at 80% of tokens" in text and "at that: best k=" in text
    assert "greedy guesses" not in "\n".join(report(calibration(None), 0.6))
    head = replace(calibration(GOOD), mtp_step=Timing(0.003, 0.0),
                   mtp_survival=POOR[:MAX_MTP_DEPTH])
    text = "\n".join(report(head, 0.6))
    assert "the MTP head's greedy drafts on the built-in code and prose prompts" in text
    after = text[text.index("the MTP head's greedy drafts"):]
    assert "right at 20% of tokens" in after and "plain decoding wins" in after
