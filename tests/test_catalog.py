"""The model catalog: a fake Hugging Face cache (tiny models in the hub's folder layout)
is listed with the right facts, from files alone, with the network blocked."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from mlx.utils import tree_flatten

from specdeck.engines.models import catalog
from specdeck.engines.models.catalog import describe_dir, find_models, scan_hf_cache, suggest_drafts
from specdeck.engines.core.errors import ModelError
from specdeck.engines.models.catalog import resolve
from specdeck.engines.models.loading import ModelStore, load_tokenizer, vocabulary_mismatch
from specdeck.cli import main
from specdeck.testing.tiny_models import build_mtp_model

ROOT = Path(__file__).resolve().parent.parent
ORG = "tiny-org"
#: Fixture model -> its repository name in the fake cache.
CACHED = {
    "llama_target": "llama-target", "llama_draft": "llama-draft",
    "hybrid_target": "hybrid-target", "mtp_target": "mtp-target",
    "other_tokenizer_model": "other-tokenizer",
}


def add_to_cache(cache: Path, repo: str, source: Path, commit: str,
                 files: list[str] | None = None) -> Path:
    """Put ``source``'s files into ``cache`` as the hub does: content-addressed blobs,
    a snapshot of relative symlinks, and ``refs/main``."""
    root = cache / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    for file in sorted(source.rglob("*")):
        rel = file.relative_to(source)
        if not file.is_file() or (files is not None and str(rel) not in files):
            continue
        data = file.read_bytes()
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snapshot


@pytest.fixture(scope="module")
def hub_cache(tiny_family, tmp_path_factory) -> Path:
    """A Hugging Face cache holding tiny models, a repo without weights, a dataset and a
    repository that is not a language model."""
    cache = tmp_path_factory.mktemp("hf") / "hub"
    for i, (name, repo) in enumerate(CACHED.items()):
        add_to_cache(cache, f"{ORG}/{repo}", tiny_family[name], f"{i:040x}")
    add_to_cache(cache, f"{ORG}/no-weights", tiny_family["qwen3_target"], "a" * 40,
                 files=["config.json", "tokenizer.json", "tokenizer_config.json"])
    readme = tmp_path_factory.mktemp("readme")
    (readme / "README.md").write_text("not a model")
    add_to_cache(cache, f"{ORG}/readme-only", readme, "b" * 40)
    dataset = add_to_cache(cache, f"{ORG}/data", tiny_family["llama_target"], "c" * 40)
    shutil.move(str(dataset.parent.parent), str(cache / f"datasets--{ORG}--data"))
    return cache


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network touched: {args[1:] or kwargs}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def loaded_parameters(path: Path) -> tuple[int, int]:
    """(parameters, bytes) of the model mlx-lm loads: the oracle for the catalog."""
    model = ModelStore().get(str(path)).model
    params = tree_flatten(model.parameters())
    return sum(v.size for _, v in params), sum(v.nbytes for _, v in params)


def test_cache_is_listed_with_the_right_facts(hub_cache, tiny_family, no_network) -> None:
    models = {m.name: m for m in scan_hf_cache(hub_cache)}
    # Models only: no dataset, no repository without config.json.
    assert set(models) == {f"{ORG}/{r}" for r in CACHED.values()} | {f"{ORG}/no-weights"}
    for name, repo in CACHED.items():
        info = models[f"{ORG}/{repo}"]
        assert info.source == "hub"
        assert info.path.parent.name == "snapshots"
        assert info.revision == (hub_cache / f"models--{ORG}--{repo}" / "refs" / "main").read_text()
        blobs = hub_cache / f"models--{ORG}--{repo}" / "blobs"
        assert info.size_on_disk == sum(b.stat().st_size for b in blobs.iterdir())
        config = json.loads((tiny_family[name] / "config.json").read_text())
        assert info.model_type == config["model_type"]
        assert info.architecture == config["architectures"][0]
        assert (info.bits, info.dtype) == (None, "F32")
    for name in ("llama_target", "hybrid_target", "mtp_target"):
        info = models[f"{ORG}/{CACHED[name]}"]
        assert (info.parameters, info.weight_bytes) == loaded_parameters(tiny_family[name])
    assert models[f"{ORG}/hybrid-target"].hybrid and models[f"{ORG}/mtp-target"].hybrid
    assert not models[f"{ORG}/llama-target"].hybrid
    assert models[f"{ORG}/mtp-target"].has_mtp_head
    assert not models[f"{ORG}/hybrid-target"].has_mtp_head
    empty = models[f"{ORG}/no-weights"]
    assert not empty.weights_present and empty.parameters is None


def test_tokenizer_fingerprint_matches_the_vocabulary_check(hub_cache, tiny_family, no_network) -> None:
    models = {m.name: m for m in scan_hf_cache(hub_cache)}
    main_family = {m.tokenizer for n, m in models.items() if n != f"{ORG}/other-tokenizer"}
    assert len(main_family) == 1
    other = models[f"{ORG}/other-tokenizer"]
    assert other.tokenizer not in main_family
    assert (other.vocab_size, models[f"{ORG}/llama-target"].vocab_size) == (336, 320)
    # The fingerprint agrees with the check that refuses a pair before loading.
    same = load_tokenizer(tiny_family["llama_target"])
    assert vocabulary_mismatch(same, load_tokenizer(tiny_family["llama_draft"])) is None
    assert vocabulary_mismatch(same, load_tokenizer(tiny_family["other_tokenizer_model"]))


def test_drafts_suggested_share_the_tokenizer_and_are_smaller(hub_cache, no_network) -> None:
    models = scan_hf_cache(hub_cache)
    by_name = {m.name: m for m in models}
    drafts = [d.name for d in suggest_drafts(by_name[f"{ORG}/llama-target"], models)]
    assert drafts == [f"{ORG}/llama-draft"]
    hybrid = [d.name for d in suggest_drafts(by_name[f"{ORG}/hybrid-target"], models)]
    assert f"{ORG}/other-tokenizer" not in hybrid and f"{ORG}/hybrid-target" not in hybrid
    assert hybrid[0] == f"{ORG}/llama-draft"  # smallest first
    assert suggest_drafts(by_name[f"{ORG}/no-weights"], models) == []


def test_hub_id_in_the_cache_resolves_offline(hub_cache, no_network, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    path = resolve(f"{ORG}/llama-target")
    assert path == hub_cache / f"models--{ORG}--llama-target" / "snapshots" / f"{0:040x}"
    with pytest.raises(ModelError, match="not in the local cache"):
        resolve(f"{ORG}/never-downloaded")


def test_mtp_head_in_a_sidecar_or_missing(tiny_family, tmp_path) -> None:
    sidecar = build_mtp_model(tmp_path / "sidecar", seed=12, tokenizer_dir=tiny_family["tokenizer"],
                              num_layers=4, sidecar=True)
    info = describe_dir(sidecar)
    assert info.has_mtp_head and info.mtp_parameters > 0
    (sidecar / "optiq" / "mtp.safetensors").unlink()  # declared in config, weights gone
    assert not describe_dir(sidecar).has_mtp_head


def test_directories_named_by_the_user(tiny_family, tmp_path) -> None:
    # A folder of models lists each; a model directory lists itself.
    found = find_models([tiny_family["llama_target"].parent], hub=False)
    assert {m.name for m in found} >= {"llama_target", "llama_draft", "mtp_target"}
    assert all(m.source == "dir" for m in found)
    assert [m.name for m in find_models([tiny_family["llama_draft"]], hub=False)] == ["llama_draft"]
    with pytest.raises(ModelError, match="no config.json"):
        find_models([tmp_path], hub=False)
    with pytest.raises(ModelError, match="not a directory"):
        describe_dir(tmp_path / "missing")
    broken = tmp_path / "broken"
    shutil.copytree(tiny_family["llama_target"], broken)
    (broken / "model.safetensors").write_bytes(b"\x05")
    with pytest.raises(ModelError, match="not a readable safetensors file"):
        describe_dir(broken)


def test_quantized_and_half_precision_facts(tiny_family, tmp_path) -> None:
    from mlx_lm import convert

    from specdeck.testing.tiny_models import build_model

    src = build_model(tmp_path / "f32", "llama", seed=15, tokenizer_dir=tiny_family["tokenizer"],
                      hidden_size=64)
    convert(str(src), mlx_path=str(tmp_path / "q4"), quantize=True, q_group_size=32, q_bits=4)
    convert(str(src), mlx_path=str(tmp_path / "bf16"), dtype="bfloat16")
    full = describe_dir(src)
    q4, bf16 = describe_dir(tmp_path / "q4"), describe_dir(tmp_path / "bf16")
    assert (q4.bits, q4.group_size) == (4, 32) and q4.parameters == full.parameters
    assert q4.weight_bytes == loaded_parameters(tmp_path / "q4")[1]
    assert q4.weight_bytes < full.weight_bytes / 4
    assert bf16.dtype == "BF16" and bf16.half_weight_bytes == bf16.weight_bytes
    assert bf16.weight_bytes * 2 == full.weight_bytes


def test_catalog_imports_no_mlx() -> None:
    code = ("import sys, specdeck.engines.models.catalog, specdeck.commands.models; "
            "assert not [m for m in sys.modules if m.startswith('mlx')], 'mlx imported'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def _offline_specdeck(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """``specdeck`` in a process whose every connection attempt raises."""
    guard = tmp_path / "guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(
        "import socket\n"
        "def _refuse(*a, **k):\n    raise OSError('network blocked by the test')\n"
        "socket.socket.connect = _refuse\nsocket.getaddrinfo = _refuse\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{guard}{os.pathsep}{ROOT}", "HF_HUB_OFFLINE": "1",
           "SPECDECK_NO_OPENBLAS": "1"}
    return subprocess.run([sys.executable, "-m", "specdeck", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)


def test_models_command_lists_cache_and_directories(hub_cache, tiny_family, tmp_path) -> None:
    result = _offline_specdeck(tmp_path, "models", "--json", "--cache-dir", str(hub_cache),
                               str(tiny_family["hybrid_draft"]))
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in orjson.loads(result.stdout)}
    assert set(rows) == {"hybrid_draft", f"{ORG}/no-weights"} | {f"{ORG}/{r}" for r in CACHED.values()}
    assert rows["hybrid_draft"]["source"] == "dir" and rows["hybrid_draft"]["hybrid"]
    assert rows[f"{ORG}/mtp-target"]["has_mtp_head"]
    assert rows[f"{ORG}/llama-target"]["drafts"] == [f"{ORG}/llama-draft"]
    table = _offline_specdeck(tmp_path, "models", "--cache-dir", str(hub_cache))
    assert table.returncode == 0, table.stderr
    assert f"{ORG}/mtp-target" in table.stdout and "qwen3_5" in table.stdout


def test_models_command_on_a_folder_that_is_not_a_model(tmp_path, capsys) -> None:
    assert main(["models", "--no-cache", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specdeck: error:") and "config.json" in err[0]


def test_models_command_lists_the_good_and_names_the_bad(tiny_family, tmp_path,
                                                        capsys) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_family["llama_target"], broken)
    (broken / "model.safetensors").write_bytes(b"\x05")
    folder = tmp_path / "folder"
    for name in ("good", "bad"):
        shutil.copytree(tiny_family["llama_draft"], folder / name)
    (folder / "bad" / "config.json").write_text('{"num_hidden_layers": 100000}')
    dirs = [str(tiny_family["llama_target"]), str(broken), str(tmp_path / "empty"),
            str(folder)]
    (tmp_path / "empty").mkdir()
    assert main(["models", "--no-cache", *dirs]) == 2
    captured = capsys.readouterr()
    assert "llama_target" in captured.out and "good" in captured.out
    errors = captured.err.strip().splitlines()
    assert len(errors) == 3 and all(e.startswith("specdeck: error: ") for e in errors)
    assert "not a readable safetensors file" in errors[0]
    assert "no config.json" in errors[1] and "num_hidden_layers is 100000" in errors[2]


#: Files an MTP head may be in (and one it may not), named here rather than read from
#: the catalog so that a name dropped there fails.
HEAD_FILES = ["named/head.safetensors", "optiq/mtp.safetensors", "mtp.safetensors",
              "mtp/weights.safetensors", "model-mtp.safetensors", "weights/mtp.safetensors"]


@pytest.mark.parametrize("names", [[], *([n] for n in HEAD_FILES), HEAD_FILES[1:]])
def test_mtp_head_lookup_mirrors_mlx_optiq(tmp_path, names):
    """The catalog finds an MTP head where mlx-optiq's loader does (first match wins),
    without importing it."""
    from optiq.runtime.mtp import artifacts

    config = {"mlx_lm_extra_tensors": {"mtp_file": "named/head.safetensors"}}
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    found = catalog.mtp_sidecar(tmp_path, config)
    expected = artifacts.expected_mtp_file(tmp_path, config)
    assert found == (expected if expected.exists() else None)
    assert set(catalog.MTP_KEY_PREFIXES) == set(artifacts.MTP_KEY_PREFIXES)


def test_a_hub_id_asks_the_hub_once_per_store(hub_cache, no_network, monkeypatch) -> None:
    import huggingface_hub
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    calls = []
    real = huggingface_hub.snapshot_download

    def counting(*args, **kwargs):
        calls.append(args[0] if args else kwargs.get("repo_id"))
        return real(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", counting)
    store = ModelStore()
    model = store.get(f"{ORG}/llama-target")
    assert store.get(f"{ORG}/llama-target") is model
    assert store.resolve(f"{ORG}/llama-target") == model.path
    assert store.tokenizer(model.path) is model.tokenizer
    assert calls == [f"{ORG}/llama-target"]
