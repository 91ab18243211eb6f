"""The one reader of what ``--prompt`` takes: text, a prompt file, a folder, a JSONL file;
the same for ``specdeck compare`` (one prompt) and ``specdeck sweep`` (several)."""

from __future__ import annotations

import pytest

from specdeck.cli import main
from specdeck.engines.core.errors import UserError
from specdeck.prompts import PROMPTS_DIR, get_prompt, read_prompt, read_prompts


def test_prompt_files_in_the_builtin_format_give_their_text(tmp_path) -> None:
    assert read_prompt(str(PROMPTS_DIR / "code.txt")) == get_prompt("code").text
    plain = tmp_path / "p.txt"
    plain.write_text("name: not a header really\nno separator here\n")
    assert read_prompt(str(plain)) == plain.read_text()
    assert read_prompt("just some text") == "just some text"
    assert read_prompt("x" * 10_000) == "x" * 10_000  # too long to be a file name: text



def test_a_builtin_prompt_by_its_name(tmp_path, monkeypatch) -> None:
    """``--prompt chat_explain`` is the built-in prompt (it was the text "chat_explain",
    which the model then chatted about); a file of that name in the folder comes first."""
    [prompt] = read_prompts("chat_explain")
    assert prompt == get_prompt("chat_explain")
    assert read_prompt("Chat_explain") == "Chat_explain"  # not a name: text
    monkeypatch.chdir(tmp_path)
    (tmp_path / "code").write_text("my own code prompt")
    assert read_prompt("code") == "my own code prompt"

def test_prompt_sets_from_jsonl_folders_and_files(tmp_path) -> None:
    jsonl = tmp_path / "work.jsonl"
    jsonl.write_text('{"prompt": "a b c", "kind": "chat"}\n\n{"prompt": "d", "name": "x"}\n')
    assert [(p.key, p.text, p.kind) for p in read_prompts(str(jsonl))] == [
        ("p1", "a b c", "chat"), ("x", "d", "")]
    for bad in ('{"text": 1}\n', '[1]\n', 'not json\n', '{"prompt": "a", "name": 3}\n'):
        jsonl.write_text(bad)
        with pytest.raises(UserError, match="line 1: expected"):
            read_prompts(str(jsonl))
    builtin = read_prompts(str(PROMPTS_DIR))
    assert {"code", "prose"} <= {p.key for p in builtin}
    assert all(p.kind == p.key for p in builtin)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "b.txt").write_text("any text file is a prompt\n")
    (folder / "a.txt").write_text((PROMPTS_DIR / "prose.txt").read_text())
    assert [(p.key, p.kind, p.text) for p in read_prompts(str(folder))] == [
        ("a", "a", get_prompt("prose").text), ("b", "b", "any text file is a prompt\n")]
    with pytest.raises(UserError, match="no prompt files"):
        read_prompts(str(tmp_path))  # the JSONL file and a folder, no *.txt
    (folder / "c.txt").write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(UserError, match="cannot read the prompt file .*c.txt"):
        read_prompts(str(folder))


def test_compare_takes_one_prompt_and_says_so(tmp_path, capsys) -> None:
    jsonl = tmp_path / "two.jsonl"
    jsonl.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    with pytest.raises(UserError, match="holds 2 prompts; a comparison runs one"):
        read_prompt(str(jsonl))
    code = main(["compare", "--headless", "--no-save", "--prompt", str(jsonl),
                 "--target", str(tmp_path), "--strategies", "plain"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "holds 2 prompts" in err
