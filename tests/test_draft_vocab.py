"""A draft that drafts from the tokens its folder lists (``engines.draft_vocab``): lossless
at any temperature, drafts only from the list, the file checked as untrusted data, timed
as it runs by ``calibrate``, and carried by ``specdeck fetch`` into the assembled draft."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import mlx.core as mx
import pytest

from specdeck.engines.proposers import draft_vocab
from specdeck.engines.measure import pass_timing
from specdeck.engines.core.config import DecodeSettings, Sampling
from specdeck.engines.proposers.draft_vocab import read_draft_vocab
from specdeck.engines.models.draft_vocab_file import DRAFT_VOCAB_FILE, MAX_VOCAB_BYTES
from specdeck.engines.core.errors import ModelError
from specdeck.engines.core.events import Trace
from specdeck.engines.models.loading import ModelStore
from specdeck.engines.decode.run import Models, run_strategy
from helpers.lossless import PROMPT, strategy_pvalues


@pytest.fixture(scope="module")
def listed(tiny_family, tmp_path_factory) -> tuple[Path, list[int]]:
    """A copy of the tiny draft whose folder lists every other token of its vocabulary."""
    folder = tmp_path_factory.mktemp("listed") / "draft"
    shutil.copytree(tiny_family["llama_draft"], folder)
    size = json.loads((folder / "config.json").read_text())["vocab_size"]
    tokens = list(range(0, size, 2))
    (folder / DRAFT_VOCAB_FILE).write_text(json.dumps({"tokens": tokens[::-1]}))
    return folder, tokens


@pytest.fixture(scope="module")
def models(tiny_family, listed) -> Models:
    store = ModelStore()
    return Models(store.get(str(tiny_family["llama_target"])), store.get(str(listed[0])))


def greedy(**kw) -> DecodeSettings:
    return DecodeSettings(max_tokens=40, stop_at_eos=False, **kw)


def trace(name: str, models: Models, settings: DecodeSettings) -> Trace:
    ids = models.target.tokenizer.encode(PROMPT)
    return Trace(name, list(run_strategy(name, models, ids, settings)))


@pytest.mark.parametrize("k", [1, 3])
def test_equals_plain_and_drafts_only_listed_tokens(models, listed, k) -> None:
    assert models.draft.vocabulary is not None
    plain = trace("plain", Models(models.target), greedy())
    drafted = trace("draft", models, greedy(num_draft_tokens=k))
    assert drafted.tokens == plain.tokens
    proposed = [t for r in drafted.rounds for t in r.drafted]
    assert proposed and set(proposed) <= set(listed[1])
    assert any(r.accepted for r in drafted.rounds)  # it still guesses right at times
    # What it proposed has its probability among the listed tokens, never the -inf
    # given to every other token when widened for the verify rule.
    assert all(0.0 < p <= 1.0 for r in drafted.rounds for p in r.draft_probs)


def test_listed_tokens_are_what_the_whole_vocabulary_drafts_among_them(models) -> None:
    """The cut-down output layer gives the whole layer's logits on the listed rows."""
    vocabulary = models.draft.vocabulary
    model = models.draft.model
    ids = mx.array(models.target.tokenizer.encode(PROMPT), mx.uint32)
    whole = model(ids[None])[0, -1]
    from mlx_lm.models.cache import make_prompt_cache

    cut = vocabulary.step(make_prompt_cache(model), ids)[0]
    listed = whole[vocabulary.tokens]
    assert mx.allclose(cut, listed - mx.logsumexp(listed), atol=1e-4).item()
    widened = vocabulary.widen(cut[None])[0]
    assert widened.shape == whole.shape
    assert mx.all(mx.isinf(widened[1::2])).item() and mx.allclose(widened[::2], cut).item()


@pytest.mark.parametrize("tied", [True, False])
def test_a_quantized_output_layer_is_cut_down_too(tied) -> None:
    """A quantized draft's listed rows are dequantized: the same logits as its own layer
    (a one-layer llama of width 64 built here: the tiny family's 48 cannot be quantized
    in groups of 32)."""
    import mlx.nn as nn
    from mlx_lm.models import llama
    from mlx_lm.models.cache import make_prompt_cache

    args = llama.ModelArgs(model_type="llama", hidden_size=64, num_hidden_layers=1,
                           intermediate_size=128, num_attention_heads=4, rms_norm_eps=1e-5,
                           vocab_size=96, num_key_value_heads=2, tie_word_embeddings=tied)
    model = llama.Model(args)
    nn.quantize(model, group_size=32, bits=4)
    assert isinstance(draft_vocab.output_layer(model),
                      nn.QuantizedEmbedding if tied else nn.QuantizedLinear)
    vocabulary = draft_vocab.DraftVocabulary(model, mx.arange(0, 96, 3).astype(mx.uint32))
    ids = mx.array([5, 17, 3, 40], mx.uint32)
    whole = model(ids[None])[0, -1][vocabulary.tokens]
    cut = vocabulary.step(make_prompt_cache(model), ids)[0]
    assert mx.allclose(cut, whole - mx.logsumexp(whole), atol=1e-4).item()


def test_sampling_keeps_the_targets_distribution(models) -> None:
    settings = DecodeSettings(max_tokens=2, stop_at_eos=False, num_draft_tokens=2,
                              sampling=Sampling(temperature=1.0))
    ids = models.target.tokenizer.encode(PROMPT)
    p_first, p_second = strategy_pvalues("draft", models, ids, settings)
    assert p_first > 1e-3 and p_second > 1e-3, (p_first, p_second)


def test_calibrate_times_the_draft_step_that_runs(models, monkeypatch) -> None:
    steps = []
    real = draft_vocab.DraftVocabulary.step
    monkeypatch.setattr(draft_vocab.DraftVocabulary, "step",
                        lambda self, cache, tokens: steps.append(1) or real(self, cache, tokens))
    probe = pass_timing._draft_probe(models.draft, models.target.tokenizer.encode(PROMPT))
    assert probe() == pass_timing.CHAIN == len(steps)


@pytest.mark.parametrize("content,says", [
    (b"{not json", "cannot read"),
    (b'{"tokens": []}', "no list of tokens"),
    (b'[1, 2, 3]', "no list of tokens"),
    (b'{"tokens": [1, 2, 99999]}', "other than token ids"),
    (b'{"tokens": [1, -2]}', "other than token ids"),
    (b'{"tokens": [1, true]}', "other than token ids"),
    (b'{"tokens": [1, 2.0]}', "other than token ids"),
    (b'{"tokens": [3, 1, 3]}', "twice"),
    (b" " * (MAX_VOCAB_BYTES + 1), "more than"),
])
def test_a_bad_vocabulary_file_is_refused_by_name(tmp_path, content, says) -> None:
    (tmp_path / DRAFT_VOCAB_FILE).write_bytes(content)
    with pytest.raises(ModelError, match=says) as caught:
        read_draft_vocab(tmp_path, 1000)
    assert DRAFT_VOCAB_FILE in str(caught.value) and "delete it" in str(caught.value)


def test_no_file_means_the_whole_vocabulary(tmp_path) -> None:
    assert read_draft_vocab(tmp_path, 1000) is None
    (tmp_path / DRAFT_VOCAB_FILE).mkdir()  # not a regular file
    with pytest.raises(ModelError, match="cannot read"):
        read_draft_vocab(tmp_path, 1000)


def test_loading_a_draft_with_a_bad_file_names_it(tiny_family, tmp_path) -> None:
    folder = tmp_path / "draft"
    shutil.copytree(tiny_family["llama_draft"], folder)
    (folder / DRAFT_VOCAB_FILE).write_text('{"tokens": "all"}')
    with pytest.raises(ModelError, match=DRAFT_VOCAB_FILE):
        ModelStore().get(str(folder))


def test_sampled_drafts_stay_in_the_list(models, listed) -> None:
    settings = replace(greedy(num_draft_tokens=3), sampling=Sampling(temperature=1.0, seed=3))
    proposed = [t for r in trace("draft", models, settings).rounds for t in r.drafted]
    assert proposed and set(proposed) <= set(listed[1])


def test_the_memory_estimate_counts_the_listed_rows(models, listed) -> None:
    """Loading copies the listed rows out of the output layer: the catalog counts the
    tokens and the estimate of the draft's weights holds those bytes."""
    from specdeck.engines.models.catalog import describe_dir
    from specdeck.engines.measure.memory import cpu_backend, weight_bytes

    info = describe_dir(listed[0])
    assert info.listed_tokens == len(listed[1])
    whole = replace(info, listed_tokens=0)
    rows = models.draft.vocabulary.rows
    upcast = cpu_backend()
    assert weight_bytes(info, upcast) - weight_bytes(whole, upcast) == rows.nbytes > 0


def test_a_bad_list_leaves_the_catalog_to_loading(tiny_family, tmp_path) -> None:
    from specdeck.engines.models.catalog import describe_dir

    folder = tmp_path / "draft"
    shutil.copytree(tiny_family["llama_draft"], folder)
    (folder / DRAFT_VOCAB_FILE).write_text('{"tokens": [1, 1]}')
    assert describe_dir(folder).listed_tokens == 0  # described; loading names the problem


def test_the_models_table_says_a_draft_drafts_from_a_list(listed, capsys) -> None:
    from specdeck.cli import main

    assert main(["models", "--no-cache", str(listed[0])]) == 0
    assert f"drafts from {len(listed[1]):,}" in capsys.readouterr().out
