"""A model folder is untrusted input, all of it: its chat template renders bounded in
time, memory and output, and whatever goes wrong ends in one ``error:`` line with its
control characters shown; every file a loader reads is refused, naming it, when it is
not a regular file of a sane size; a malformed file is named, not another; a broken
repository of the Hugging Face cache is skipped and named, the others listed."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import PreTrainedTokenizerFast

import specdeck.engines.models.chat_template as chat_template
from helpers.hostile import ESCAPES, INVISIBLE
from specdeck.cli import main
from specdeck.engines.core.errors import ModelError
from specdeck.engines.models.catalog import (
    TEXT_BYTES, TOKENIZER_BYTES, describe_dir, file_limit, scan_hf_cache,
)
from specdeck.engines.models.chat_template import render_chat
from specdeck.engines.models.catalog import resolve

#: Template pieces that render, and what transformers renders them as too.
RENDERS = [
    "{{ messages[0]['content'] }}", "<|im_start|>user\n", "{{ bos_token }}",
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{% endfor %}",
    "{% if add_generation_prompt %}<|assistant|>{% endif %}", "{{ messages|tojson }}",
    "{% generation %}kept{% endgeneration %}", "{{ messages|length }}",
    "{% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}",
]
#: Pieces that fail: raised with any text, a syntax error, an undefined name, Python's
#: internals (the sandbox refuses them).
FAILS = [
    "{{ raise_exception(%s) }}", "{% for %}", "{{ no_such.name }}", "{% endif %}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}", "{{ cycler.__init__.__globals__ }}",
    "{% set x = messages[0]['content'] %}{{ x.__class__.__base__.__subclasses__() }}",
    "{{ 1 / 0 }}",
]
#: Pieces that never end, or grow without end: nested ranges, string doubling, a
#: product too large, output without end, recursion.
RUNAWAY = [
    "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}{{ ns.s|length }}",
    "{{ 'a' * 10**11 }}", "{{ lipsum(10**8) }}",
    "{% for i in range(99999) %}{{ 'x' * 99999 }}{% endfor %}",
    "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
]


@pytest.fixture(scope="module")
def tokenizer(tiny_family) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast.from_pretrained(str(tiny_family["llama_target"]))


def hostile() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(ESCAPES + INVISIBLE + ["'", '"', "}}", "x"]),
                    max_size=4).map("".join)


@st.composite
def templates(draw) -> tuple[str, str]:
    """(template, what it is: renders, fails or runaway)."""
    kind = draw(st.sampled_from(["renders", "renders", "fails", "fails", "runaway"]))
    pieces = draw(st.lists(st.sampled_from(RENDERS), min_size=1, max_size=3))
    if kind != "renders":
        bad = draw(st.sampled_from(FAILS if kind == "fails" else RUNAWAY))
        if "%s" in bad:
            bad = bad % json.dumps(draw(hostile()))
        pieces.insert(draw(st.integers(0, len(pieces))), bad)
    return "".join(pieces), kind


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=templates(), content=hostile())
def test_any_template_renders_as_transformers_does_or_fails_in_bounded_time(
        tokenizer, monkeypatch, case, content) -> None:
    template, kind = case
    monkeypatch.setattr(chat_template, "RENDER_SECONDS", 1.0)
    monkeypatch.setattr(tokenizer, "chat_template", template)
    messages = [{"role": "user", "content": content}]

    def as_transformers_renders() -> str:
        return tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True)

    started = time.perf_counter()
    try:
        text = render_chat(tokenizer, messages)
    except ModelError as exc:
        if kind == "renders":  # only what renders as nothing (an empty message)
            assert "renders the prompt as nothing" in str(exc)
            assert not as_transformers_renders().strip()
        assert time.perf_counter() - started < 5
        return
    assert kind == "renders" and text == as_transformers_renders()


def test_an_endless_template_is_stopped_by_its_processor_time(tokenizer, monkeypatch) -> None:
    """Processor time, not wall time, bounds it: a machine too busy to give the child a
    core in time fails no template that would render (the wall-time bound here is a
    minute)."""
    monkeypatch.setattr(chat_template, "RENDER_SECONDS", 1.0)
    monkeypatch.setattr(chat_template, "RENDER_WALL", 60)
    monkeypatch.setattr(tokenizer, "chat_template", "{% for i in range(100000) %}"
                        "{% for j in range(100000) %}{% endfor %}{% endfor %}x")
    started = time.perf_counter()
    with pytest.raises(ModelError, match="did not finish rendering in 1 s"):
        render_chat(tokenizer, [{"role": "user", "content": "hi"}])
    assert time.perf_counter() - started < 30


def template_model(tiny_family, tmp_path, template: str) -> Path:
    path = tmp_path / "model"
    shutil.copytree(tiny_family["llama_target"], path)
    (path / "chat_template.jinja").write_text(template)
    return path


@pytest.mark.parametrize("template", [
    "{{ raise_exception('bad \x1b]0;pwned\x07 role \u202e') }}",
    "{% if false %}x{% endif %}", "{% for %}",
])
@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_a_failing_template_is_one_error_line_with_its_escapes_shown(
        tiny_family, tmp_path, capsys, template, command) -> None:
    path = template_model(tiny_family, tmp_path, template)
    args = (["compare", "--headless", "--no-save", "--strategies", "plain"]
            if command == "compare" else
            ["sweep", "--strategies", "ngram", "-k", "1", "--reps", "1", "--warmup", "0",
             "--json", str(tmp_path / "s.json")])
    code = main([*args, "--target", str(path), "--prompt", "x", "--max-tokens", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if "error" in x]
    assert line.startswith(f"specdeck: error: the chat template of {path}")
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err


# --- every file of the folder -----------------------------------------------------------


def _huge(path: Path) -> None:
    with path.open("wb") as f:
        f.truncate(3 * 2**30)  # sparse: nothing written


KINDS = {
    "a FIFO": os.mkfifo, "/dev/zero": lambda p: p.symlink_to("/dev/zero"),
    "a folder": os.mkdir, "3 GB": _huge,
    "a link loop": lambda p: (p.symlink_to(p.name + ".2"),
                              p.with_name(p.name + ".2").symlink_to(p.name)),
}
NAMES = ["tokenizer.json", "tokenizer_config.json", "generation_config.json",
         "chat_template.jinja", "special_tokens_map.json", "model.safetensors",
         "optiq/mtp.safetensors", "additional_chat_templates/tool.jinja"]
NEEDLES = {"a FIFO": "is a FIFO", "/dev/zero": "is a character device", "a folder":
           "is a directory", "3 GB": "is 3.0 GiB, more than the", "a link loop": "cannot be read"}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("name", NAMES)
def test_every_file_a_loader_reads_is_checked_first(tiny_family, tmp_path, name,
                                                    kind) -> None:
    path = tmp_path / "model"
    shutil.copytree(tiny_family["llama_target"], path)
    file = path / name
    file.parent.mkdir(exist_ok=True)
    file.unlink(missing_ok=True)
    KINDS[kind](file)
    if kind == "3 GB" and file_limit(file.name) is None:
        return  # weights may be any size
    started = time.perf_counter()
    for check in (resolve, describe_dir):
        with pytest.raises(ModelError) as refused:
            check(str(path))
        assert str(file) in str(refused.value) and NEEDLES[kind] in str(refused.value)
    assert time.perf_counter() - started < 5
    assert file_limit("tokenizer.json") == TOKENIZER_BYTES
    assert file_limit("generation_config.json") == TEXT_BYTES


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from([["model"], ["model", "vocab"], ["added_tokens"], [],
                              ["added_tokens", 0], ["model", "vocab", "<|endoftext|>"]]),
       value=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                          lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                          max_leaves=6))
def test_a_malformed_tokenizer_json_is_the_file_named(tiny_family, tmp_path_factory, where,
                                                      value) -> None:
    path = tmp_path_factory.mktemp("model")
    shutil.copytree(tiny_family["llama_target"], path, dirs_exist_ok=True)
    data = json.loads((path / "tokenizer.json").read_text())
    if where:
        node = data
        for key in where[:-1]:
            node = node[key]
        if isinstance(node, list) and not node:
            return
        node[where[-1]] = value
    else:
        data = value
    (path / "tokenizer.json").write_text(json.dumps(data))
    try:
        describe_dir(path)
    except ModelError as exc:
        assert str(path / "tokenizer.json") in str(exc), exc
        assert "config.json is not" not in str(exc)


# --- the Hugging Face cache -------------------------------------------------------------


def cached_repo(cache: Path, name: str, source: Path) -> Path:
    """A repository as the hub's cache keeps it: snapshot files linking to blobs."""
    repo = cache / f"models--{name}"
    snapshot = repo / "snapshots" / "abc123"
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    snapshot.mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    for file in source.iterdir():
        if file.is_file():
            blob = repo / "blobs" / file.name
            shutil.copy(file, blob)
            (snapshot / file.name).symlink_to(Path("../../blobs") / file.name)
    return repo


LOOPS = {
    "its ref": lambda r: ((r / "refs" / "main").unlink(),
                          (r / "refs" / "main").symlink_to("main")),
    "a snapshot": lambda r: (shutil.rmtree(r / "snapshots" / "abc123"),
                             (r / "snapshots" / "abc123").symlink_to("abc123")),
    "the repository": lambda r: (shutil.rmtree(r), r.symlink_to(r.name)),
}


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_link_loop_in_the_cache_skips_that_repository_and_says_so(
        tiny_family, tmp_path, capsys, loop) -> None:
    cache = tmp_path / "hub"
    cached_repo(cache, "org--good", tiny_family["llama_target"])
    LOOPS[loop](cached_repo(cache, "org--loop", tiny_family["llama_draft"]))
    problems: list[ModelError] = []
    assert [m.name for m in scan_hf_cache(cache, problems.append)] == ["org/good"]
    (problem,) = problems
    assert str(cache / "models--org--loop") in str(problem)
    code = main(["models", "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    assert code == 2 and "org/good" in captured.out and "Traceback" not in captured.err
    assert "skipped" in captured.err and "models--org--loop" in captured.err
