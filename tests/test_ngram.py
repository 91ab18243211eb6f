"""Prompt-lookup decoding: the lookup itself (the longest match, its sources' agreement,
drafts that follow how the copies went), equality with plain decoding at temperature 0
(hybrid caches included), losslessness at temperature > 0, and drafting that follows how
much the text repeats."""

from __future__ import annotations


import pytest

from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.core.events import Trace
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.proposers import ngram
from specdeck.engines.proposers.ngram import PromptLookup
from specdeck.engines.core.stats import compute_stats
from specdeck.engines.decode.run import Models, run_strategy
from helpers.lossless import strategy_pvalues

PROMPT = "def add(a, b):\n    return"
#: No three tokens of it recur: nothing to copy.
FRESH = "The quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def store() -> ModelStore:
    return ModelStore()


@pytest.fixture
def certain(monkeypatch) -> None:
    """Every agreed token copied, however the copies went and wherever a sentence ends:
    where a test needs a round of several drafts from its first."""
    monkeypatch.setattr(ngram, "SURE", 0.0)
    monkeypatch.setattr(ngram, "sentence_ends", lambda tokenizer: lambda token: False)


def run(name: str, models: Models, ids: list[int], settings: DecodeSettings) -> Trace:
    return Trace(name, list(run_strategy(name, models, ids, settings)))


def fixed(max_tokens: int, **kw) -> DecodeSettings:
    return DecodeSettings(max_tokens=max_tokens, stop_at_eos=False, **kw)


def repeating_prompt(models: Models) -> list[int]:
    """The prompt plus the target's own greedy continuation of it.

    A random tiny model cannot rewrite code the way a trained one does, but its greedy
    output settles into a loop within a few dozen tokens; a prompt that already holds
    that loop is one whose continuation repeats text of the prompt, which is what
    "rewrite this code with another variable name" is to a real model.
    """
    ids = models.target.tokenizer.encode(PROMPT)
    return ids + run("plain", models, ids, fixed(100)).tokens


def shortest_repeating_prompt(models: Models, n: int, k: int) -> list[int]:
    """The shortest start of ``repeating_prompt`` whose last ``n`` tokens occurred before
    with ``k`` tokens after them: its first round drafts ``k``, and each run of a
    sampling test prefills a third as many tokens."""
    full = repeating_prompt(models)
    for end in range(len(models.target.tokenizer.encode(PROMPT)), len(full) + 1):
        proposer = PromptLookup(n)
        proposer.begin(full[:end], None)
        if proposer.propose(k)[0].size == k:
            return full[:end]
    raise AssertionError("the greedy continuation never repeats")


# --- the lookup ------------------------------------------------------------------------


def lookup(history: list[int], n: int, count: int) -> list[int]:
    proposer = PromptLookup(n)
    proposer.begin(history, None)
    drafts, draft_lp, stopped = proposer.propose(count, p_min=0.99)
    assert draft_lp is None  # a point mass: the acceptance rule's q is 1 on the draft
    assert stopped is None  # certain: ``pmin`` never stops a copy
    return drafts.tolist()


def test_lookup_copies_from_the_longest_match_while_its_sources_agree(certain) -> None:
    #            0  1  2  3  4  5  6  7  8  9 10 11
    history = [3, 1, 2, 4, 6, 9, 1, 2, 5, 3, 1, 2]
    # "1 2" last occurred at 6..7, but "3 1 2" at 0..2 matches longer: copy from there.
    assert lookup(history, 2, 3) == [4, 6, 9]
    assert lookup(history, 2, 1) == [4]
    assert lookup(history, 3, 3) == [4, 6, 9]
    assert lookup(history, 4, 3) == []  # "5 3 1 2" never occurred before
    # Two occurrences as long as each other, followed by 4 and by 5: no copy.
    assert lookup([1, 2, 4, 1, 2, 5, 1, 2], 2, 3) == []
    # ... followed by "4 7" and "4 8": they agree on 4 only.
    assert lookup([1, 2, 4, 7, 1, 2, 4, 8, 1, 2], 2, 3) == [4]
    assert lookup([7, 8, 7], 1, 4) == [8, 7]  # bounded by the end of the text
    assert lookup([7], 1, 4) == []  # nothing before it
    assert lookup([7, 8], 3, 4) == []  # shorter than n


def test_settle_extends_the_text_with_what_was_kept(certain) -> None:
    proposer = PromptLookup(1)
    proposer.begin([5, 6], None)
    assert proposer.propose(2)[0].tolist() == []
    proposer.settle([], 0, 5, None)  # text: 5 6 5
    assert proposer.propose(2)[0].tolist() == [6, 5]
    proposer.settle([6, 5], 1, 8, None)  # kept 6, then 8: 5 6 5 6 8
    assert proposer.history == [5, 6, 5, 6, 8]
    assert proposer.propose(2)[0].tolist() == []
    proposer.settle([], 0, 6, None)  # 5 6 5 6 8 6: 6 was followed by 5, then by 8
    assert proposer.propose(3)[0].tolist() == []
    proposer.settle([], 0, 8, None)  # 5 6 5 6 8 6 8: 8 was followed by 6
    assert proposer.propose(3)[0].tolist() == [6, 8]


def test_drafts_grow_while_copies_are_kept_and_drop_to_one_after_a_miss() -> None:
    """Each copied token is taken to be kept with chance (s + 1) / (s + 2) after s kept
    in a row; a draft goes on while all of it is kept with chance ``SURE`` or more."""
    text = list(range(100, 200))
    proposer = PromptLookup(2)
    proposer.begin(text + text[:2], None)
    done, lengths = 2, []
    for _ in range(7):
        drafts = proposer.propose(16)[0].tolist()
        assert drafts == text[done:done + len(drafts)]
        lengths.append(len(drafts))
        proposer.settle(drafts, len(drafts), text[done + len(drafts)], None)
        done += len(drafts) + 1
    assert lengths == [1, 1, 1, 2, 3, 4, 6]
    proposer.settle([7, 7], 0, 1, None)  # a chain's model drafted these: no copy judged
    proposer.settle([], 0, text[done], None)
    proposer.settle([], 0, text[done + 1], None)
    assert len(proposer.propose(16)[0].tolist()) == 9  # 18 kept in a row
    proposer.settle([text[done + 2]], 0, 1, None)  # a miss, then a token never seen
    assert proposer.propose(16)[0].tolist() == []
    for token in text[:2]:
        proposer.settle([], 0, token, None)
    assert proposer.propose(16)[0].tolist() == text[2:3]  # one after a miss


def test_no_copy_starts_after_a_sentence_end_until_a_copied_one_is_kept(certain) -> None:
    """A rewrite keeps the prompt's phrases but writes its own next sentence: after a full
    stop (token 0 here) lookup copies nothing until a copied full stop was kept since the
    last miss, as a verbatim copy keeps them."""
    text = [1, 2, 0, 3, 4, 0, 5, 6, 0]
    proposer = PromptLookup(1, lambda token: token == 0)
    proposer.begin(text + [1, 2, 0], None)
    assert proposer.propose(4)[0].tolist() == []  # without the rule: 3 4 0 5
    proposer.settle([], 0, 3, None)
    assert proposer.propose(1)[0].tolist() == [4]
    proposer.settle([4], 1, 0, None)  # the target's full stop, not a copied one
    assert proposer.propose(4)[0].tolist() == []
    proposer.settle([], 0, 5, None)
    assert proposer.propose(3)[0].tolist() == [6, 0, 1]
    proposer.settle([6, 0, 1], 3, 2, None)  # a copied full stop kept
    proposer.settle([], 0, 0, None)
    assert proposer.propose(2)[0].tolist() == [3, 4]
    proposer.settle([3, 4], 0, 7, None)  # a miss
    for token in (5, 6, 0):
        proposer.settle([], 0, token, None)
    assert proposer.propose(2)[0].tolist() == []
    free = PromptLookup(1)
    free.begin(proposer.history, None)
    assert free.propose(2)[0].tolist() == [1, 2]


def test_after_three_missed_copies_only_a_longer_match_is_copied_until_one_is_kept() -> None:
    """A model that writes the text anew meets the prompt's common words but goes its own
    way after them: after three copies in a row (``MISSES``) had a draft rejected, a
    match of only ``n`` tokens is not copied; a longer one is, and a copy kept whole ends
    that."""
    proposer = PromptLookup(1)
    proposer.begin([1, 10, 2, 20, 3, 30, 4, 40, 50, 6, 60, 1], None)
    for token, wrote in ((1, 91), (2, 92), (3, 93)):  # 1 -> 10 copied, 91 written, ...
        assert proposer.history[-1] == token
        assert proposer.propose(4)[0].tolist() == [token * 10]
        proposer.settle([token * 10], 0, wrote, None)
        assert proposer.propose(4)[0].tolist() == []  # a token never seen before
        proposer.settle([], 0, token + 1, None)
    assert proposer.propose(4)[0].tolist() == []  # "4" matches: without the rule, 40
    proposer.settle([], 0, 40, None)
    assert proposer.propose(4)[0].tolist() == [50]  # "4 40" matches: longer than n
    proposer.settle([50], 1, 6, None)  # kept whole
    assert proposer.propose(4)[0].tolist() == [60]  # "6" matches, and is copied again


def test_sentence_ends_reads_the_tokens_text(tiny_family, store) -> None:
    tokenizer = store.get(str(tiny_family["llama_target"])).tokenizer
    ends = ngram.sentence_ends(tokenizer)
    ids = {text: tokenizer.encode(text, add_special_tokens=False) for text in (".", "\n", "?", "x")}
    assert [ends(ids[text][-1]) for text in (".", "\n", "?", "x")] == [True, True, True, False]


def test_may_draft_says_whether_any_next_token_would_give_a_match() -> None:
    """Asked before a plain step's token is read: False exactly where no token could
    complete an n-gram seen before, so that the loop can queue the next plain step."""
    import random

    rng = random.Random(0)
    seen = set()
    for _ in range(400):
        n = rng.randint(1, 3)
        history = [rng.randrange(4) for _ in range(rng.randint(0, 10))]
        proposer = PromptLookup(n)
        proposer.begin(history, None)
        could = proposer.may_draft({"ngram": 4})
        matched = []
        for token in range(4):
            after = history + [token]
            matched.append(len(after) > n and any(
                after[i:i + n] == after[-n:] for i in range(len(after) - n)))
            if not matched[-1]:  # no n-gram to match: nothing to copy
                proposer_after = PromptLookup(n)
                proposer_after.begin(after, None)
                assert proposer_after.match() is None
        assert could == any(matched), (n, history)
        assert not proposer.may_draft({"ngram": 0})
        seen.add(could)
    assert seen == {True, False}


def test_a_plain_step_no_lookup_can_follow_is_queued_before_its_token_is_read(
        tiny_family, store, monkeypatch) -> None:
    """As plain decoding does: where lookup cannot match after this round's token, the
    next round's pass is queued before this one's token is read (before ``settle``);
    where it might, not (that round may draft)."""
    import specdeck.engines.decode.speculative as speculative

    models = Models(store.get(str(tiny_family["llama_target"])))
    log: list[str] = []
    forward, may_draft, settle = (speculative.forward, PromptLookup.may_draft,
                                  PromptLookup.settle)
    monkeypatch.setattr(speculative, "forward",
                        lambda *a, **kw: log.append("forward") or forward(*a, **kw))
    monkeypatch.setattr(PromptLookup, "may_draft", lambda self, counts: (
        lambda could: log.append(f"may {could}") or could)(may_draft(self, counts)))
    monkeypatch.setattr(PromptLookup, "settle",
                        lambda self, *a: log.append("settle") or settle(self, *a))
    ids = models.target.tokenizer.encode(FRESH)
    trace = run("ngram", models, ids, fixed(48, ngram_n=2, ngram_k=4))
    assert trace.tokens == run("plain", models, ids, fixed(48)).tokens
    asked = [i for i, entry in enumerate(log) if entry.startswith("may")]
    assert {log[i] for i in asked} == {"may True", "may False"}
    for i in asked:
        assert log[i + 1] == ("forward" if log[i] == "may False" else "settle"), log[i:i + 3]


# --- temperature 0 ---------------------------------------------------------------------


@pytest.mark.parametrize("target", ["llama_target", "hybrid_target"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_ngram_equals_plain_at_temperature_zero(tiny_family, store, target, n) -> None:
    models = Models(store.get(str(tiny_family[target])))
    for ids in (models.target.tokenizer.encode(PROMPT), repeating_prompt(models)):
        plain = run("plain", models, ids, fixed(48))
        for k in (1, 4, 8):
            trace = run("ngram", models, ids, fixed(48, ngram_n=n, ngram_k=k))
            assert trace.tokens == plain.tokens, (n, k)
            assert all(len(r.drafted) <= k for r in trace.rounds)


def test_hybrid_rejections_roll_back_exactly(tiny_family, store, certain) -> None:
    """Rejected lookups on a hybrid target rewind from the verify pass's captured states."""
    models = Models(store.get(str(tiny_family["hybrid_target"])))
    ids = models.target.tokenizer.encode(PROMPT)
    trace = run("ngram", models, ids, fixed(64, ngram_n=1, ngram_k=4))
    assert trace.tokens == run("plain", models, ids, fixed(64)).tokens
    partial = [r for r in trace.rounds if 0 < r.accepted < len(r.drafted)]
    assert partial and all(r.rollback == "captured" for r in partial)
    assert all(r.replayed == 0 for r in trace.rounds)


def test_repeating_prompt_accepts_most_drafts(tiny_family, store) -> None:
    models = Models(store.get(str(tiny_family["hybrid_target"])))
    settings = fixed(32, ngram_n=3, ngram_k=4)
    repeating = compute_stats(run("ngram", models, repeating_prompt(models), settings).events)
    fresh_ids = models.target.tokenizer.encode(FRESH)
    fresh = compute_stats(run("ngram", models, fresh_ids, settings).events)
    assert repeating.acceptance_rate > 0.8, repeating
    assert repeating.tokens_per_round > 3
    # Nothing to copy: only the few drafts the continuation's own repeats allow.
    assert fresh.proposed < repeating.proposed / 4, (fresh.proposed, repeating.proposed)


# --- temperature > 0 -------------------------------------------------------------------

@pytest.mark.slow
def test_ngram_sampling_is_lossless(tiny_family, store, certain) -> None:
    """The prompt ends in a repeat, so the first round drafts: k=2 over two tokens covers
    acceptance, correction and bonus, on a hybrid target rewound by its captured states.
    200 runs: the rule itself is tested exactly (test_acceptance_rule's "lookup" case);
    this is the rewind at temperature > 0."""
    models = Models(store.get(str(tiny_family["hybrid_target"])))
    ids = shortest_repeating_prompt(models, n=2, k=2)
    settings = fixed(2, ngram_n=2, ngram_k=2,
                     sampling=Sampling(temperature=0.8, top_p=0.9, top_k=20, min_p=0.02))
    assert len(run("ngram", models, ids, settings).rounds[0].drafted) == 2
    p_first, p_second = strategy_pvalues("ngram", models, ids, settings, samples=200)
    assert p_first > 1e-3 and p_second > 1e-3, (p_first, p_second)
