"""Sessions as files: the schema, round trips, refusing bad files, crash-safe saving,
migrations and the sessions directory. Hand-built runs, except one real recording."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path

import jsonschema
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.events import Done, LengthChoice
from specdeck.sessions import session as session_module
from specdeck.engines.core.atomic_files import write_atomic
from specdeck.sessions.diff import diff_sessions
from specdeck.sessions.session import (
    SCHEMA_PATH,
    SCHEMA_VERSION,
    SessionError,
    is_partial,
    load_session,
    parse_document,
    save_document,
    session_from_document,
)
from specdeck.commands.sessions import print_session
from specdeck.sessions.store import (
    delete_session,
    list_sessions,
    rename_session,
    save_session,
    session_filename,
)
from helpers.sessions import document, make_trace, plain_trace, sample_traces

SCHEMA = json.loads(SCHEMA_PATH.read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def saved(doc: dict) -> dict:
    """The document as it reads back from disk (JSON types only)."""
    return orjson.loads(orjson.dumps(doc))


# --- the schema -----------------------------------------------------------------------


def test_schema_is_valid_and_shipped_as_package_data() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert '"specdeck.sessions" = ["session.schema.json"]' in pyproject
    assert SCHEMA["properties"]["schema_version"] == {"const": SCHEMA_VERSION}


@pytest.mark.parametrize("case", ["complete", "partial", "no_done", "error"])
def test_saved_documents_match_the_schema(case: str) -> None:
    traces = sample_traces()
    requested = None
    if case == "partial":
        requested = ["plain", "draft", "ngram"]  # ngram never ran
    elif case == "no_done":
        traces["draft"] = make_trace("draft", [([1, 2], 1, 3)], reason=None)
    elif case == "error":
        trace = traces["draft"]
        trace.events[-1] = Done("error", 8, 0.2, None, error="RuntimeError: boom")
    VALIDATOR.validate(saved(document(traces, requested)))


def test_the_schema_names_every_statistic() -> None:
    """Each field of engines.stats.Stats (and the speedup beside them) is described."""
    from dataclasses import fields

    from specdeck.engines.core.stats import Stats

    described = set(SCHEMA["$defs"]["stats"]["properties"])
    assert {f.name for f in fields(Stats)} | {"speedup_vs_plain"} == described


def test_the_schema_rejects_what_the_loader_rejects() -> None:
    doc = saved(document(sample_traces()))
    doc["strategies"]["draft"]["rounds"][0]["accepted"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(doc)
    with pytest.raises(SessionError, match="accepted must be int"):
        session_from_document(doc)


# --- round trip -----------------------------------------------------------------------


def test_round_trip_keeps_every_event_token_text_and_statistic(tmp_path: Path) -> None:
    traces = sample_traces()
    doc = document(traces)
    path = tmp_path / "run.json"
    save_document(path, doc)

    loaded = load_session(path)
    assert loaded.path == path
    assert loaded.config == saved(doc)["config"] and loaded.machine == doc["machine"]
    assert not loaded.partial
    for name, trace in traces.items():
        assert loaded.traces[name].events == trace.events
        assert loaded.traces[name].tokens == trace.tokens
        assert loaded.traces[name].text == trace.text
    assert loaded.stats() == {n: e["stats"] for n, e in saved(doc)["strategies"].items()}


def test_what_a_policy_chose_round_trips_as_one_record_per_round() -> None:
    """``Round.length`` saves as a nested object that the schema describes, loads back as
    the record it was, and a record that is not one is refused naming the field."""
    traces = sample_traces()
    events = traces["draft"].events
    events[1] = replace(events[1], length=LengthChoice("auto", 2, "explore", 2.5, 1.4))
    events[2] = replace(events[2], length=LengthChoice("auto", 0, "best", 1.0, 1.0,
                                                       guesses=[True, False]))
    events[3] = replace(events[3], length=LengthChoice("pmin", 16, "p_min", p_min=0.6,
                                                       stopped=0.3))
    doc = saved(document(traces))
    VALIDATOR.validate(doc)
    rounds = session_from_document(doc).traces["draft"].rounds
    assert [r.length for r in rounds[:3]] == [e.length for e in events[1:4]]
    assert rounds[3].length is None
    doc["strategies"]["draft"]["rounds"][0]["length"] = {"policy": "auto", "k": 2,
                                                          "why": "hoped"}
    with pytest.raises(SessionError, match="round 0: length: why must be"):
        session_from_document(doc)
    doc["strategies"]["draft"]["rounds"][0]["length"] = {"policy": "auto", "k": 2}
    with pytest.raises(SessionError, match="round 0: length: lacks why"):
        session_from_document(doc)


EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "sessions" / "examples").glob("*.json"))
#: A run of ``auto`` saved by schema 1, whose eight fields per round schema 2 gathers.
SCHEMA_1 = Path(__file__).resolve().parent / "data" / "schema1-auto.json"


@pytest.mark.parametrize("path", [*EXAMPLES, SCHEMA_1], ids=lambda p: p.name)
def test_every_example_and_a_schema_1_file_load(path: Path) -> None:
    loaded = load_session(path)
    assert loaded.schema_version == SCHEMA_VERSION
    for trace in loaded.traces.values():
        assert trace.tokens and trace.done is not None


def test_schema_1_auto_fields_become_the_length_record() -> None:
    old = orjson.loads(SCHEMA_1.read_bytes())
    assert old["schema_version"] == 1
    rounds = {name: entry["rounds"] for name, entry in old["strategies"].items()}
    loaded = load_session(SCHEMA_1)
    for name, trace in loaded.traces.items():
        for before, after in zip(rounds[name], trace.rounds):
            if before["auto_k"] is None:
                assert after.length is None
                continue
            assert (after.length.policy, after.length.k) == ("auto", before["auto_k"])
            assert (after.length.tokens, after.length.cost) == (before["auto_tokens"],
                                                                before["auto_cost"])
            assert after.length.guesses == before["guesses"]
            assert after.length.why == ("best" if before["auto_tokens"] is not None
                                        else "start" if before["auto_k"] else "time")
    chosen = [r.length for t in loaded.traces.values() for r in t.rounds if r.length]
    assert any(c.guesses for c in chosen) and {c.why for c in chosen} >= {"best", "time"}
    # Saved again, it is a schema-2 document.
    VALIDATOR.validate(saved(document(loaded.traces)))


def test_settings_load_as_the_dataclass_they_were_saved_from() -> None:
    doc = saved(document(sample_traces(), num_draft_tokens=5, max_kv_size=64))
    assert session_from_document(doc).settings == DecodeSettings(num_draft_tokens=5,
                                                                 max_kv_size=64)
    del doc["config"]["settings"]["mtp_depth"]  # a field an older writer lacked
    assert session_from_document(doc).settings == DecodeSettings(num_draft_tokens=5,
                                                                 max_kv_size=64)
    for damaged in ({"num_draft_tokens": "3"}, {"stop_at_eos": 1}, {"max_tokens": 2.0},
                    {"sampling": {"temperature": "hot"}}, {"sampling": []}):
        doc["config"]["settings"].update(damaged)
        assert session_from_document(doc).settings is None, damaged
        doc = saved(document(sample_traces(), num_draft_tokens=5))
    doc["config"]["settings"] = [1, 2]
    assert session_from_document(doc).settings is None


def test_partial_runs_say_so() -> None:
    traces = sample_traces()
    assert not is_partial(["plain", "draft"], traces)
    assert is_partial(["plain", "draft", "ngram"], traces)  # one never ran
    traces["draft"].events[-1] = replace(traces["draft"].events[-1], reason="cancelled")
    assert is_partial(["plain", "draft"], traces)
    doc = document(traces)
    assert doc["partial"] is True
    assert session_filename(doc).endswith("_plain-draft_partial.json")
    assert session_from_document(saved(doc)).partial


def test_a_document_without_partial_loads_as_complete() -> None:
    doc = saved(document(sample_traces()))
    del doc["partial"]  # files written before the field existed
    assert session_from_document(doc).partial is False


# --- refusing bad files -----------------------------------------------------------------


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _good_bytes() -> bytes:
    return orjson.dumps(document(sample_traces()))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.json", "no such file"),
        (lambda d: d, "is a directory"),
        (lambda d: _write(d / "empty.json", b""), "the file is empty"),
        (lambda d: _write(d / "notes.json", b"hello, world"), "not JSON"),
        (lambda d: _write(d / "bin.json", bytes(range(256))), "not JSON"),
        (lambda d: _write(d / "cut.json", _good_bytes()[:-200]), "truncated"),
        (lambda d: _write(d / "list.json", b"[1, 2, 3]"), "not a specdeck session"),
        (lambda d: _write(d / "other.json", b'{"name": "x"}'), "not a specdeck session"),
    ],
)
def test_unreadable_files_raise_one_clear_error(tmp_path: Path, make, message: str) -> None:
    path = make(tmp_path)
    with pytest.raises(SessionError, match=message) as info:
        load_session(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_a_newer_schema_is_refused_naming_both_versions(tmp_path: Path) -> None:
    doc = saved(document(sample_traces()))
    doc["schema_version"] = 7
    path = _write(tmp_path / "future.json", orjson.dumps(doc))
    with pytest.raises(SessionError) as info:
        load_session(path)
    assert str(info.value) == (
        f"{path}: written by a newer specdeck (schema 7); this one reads up to "
        f"{SCHEMA_VERSION}: upgrade specdeck"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(schema_version="1"), "schema_version must be a whole number"),
        (lambda d: d.update(schema_version=0), "schema 0 is older than this specdeck"),
        (lambda d: d.update(config=[]), "config must be an object"),
        (lambda d: d.update(partial="yes"), "partial must be true or false"),
        (lambda d: d["strategies"]["draft"]["rounds"][0].update(tokens=["a"]),
         "round 0: tokens must be list"),
        (lambda d: d["strategies"]["draft"]["rounds"][1].update(surprise=1),
         "round 1: has an unknown field 'surprise'"),
        (lambda d: d["strategies"]["draft"]["rounds"][1].pop("pieces"),
         "round 1: lacks pieces"),
        (lambda d: d["strategies"]["draft"]["rounds"][1].update(accepted=3),
         r"accepted \(3\) is outside 0..2"),
        (lambda d: d["strategies"]["draft"]["rounds"][1].update(pieces=["x"]),
         "1 pieces for 2 tokens"),
        (lambda d: d["strategies"]["draft"]["rounds"][1].update(t=-1.0), "t must be >= 0"),
        (lambda d: d["strategies"]["draft"]["rounds"][1].update(type="done"),
         "must be a round event"),
        (lambda d: d["strategies"]["plain"].update(text="edited"),
         "tokens/text do not match its rounds"),
        (lambda d: d["strategies"]["plain"].update(done=[]), "done: is not an object"),
    ],
)
def test_damaged_documents_name_the_problem(edit, message: str) -> None:
    doc = saved(document(sample_traces()))
    edit(doc)
    with pytest.raises(SessionError, match=message):
        session_from_document(doc)


# --- migrations -------------------------------------------------------------------------


def test_an_older_schema_loads_through_its_migration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic schema 0 that called the rounds "steps": the registry upgrades it."""
    doc = saved(document(sample_traces()))
    doc["schema_version"] = 0
    for entry in doc["strategies"].values():
        entry["steps"] = entry.pop("rounds")

    def steps_to_rounds(old: dict) -> dict:
        for entry in old["strategies"].values():
            entry["rounds"] = entry.pop("steps")
        return old

    with pytest.raises(SessionError, match="no migration from it"):
        session_from_document(orjson.loads(orjson.dumps(doc)))
    monkeypatch.setitem(session_module.MIGRATIONS, 0, steps_to_rounds)
    loaded = session_from_document(doc)
    assert loaded.schema_version == SCHEMA_VERSION
    assert loaded.traces["draft"].tokens == sample_traces()["draft"].tokens


# --- fuzzing the loader -----------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
GOOD = saved(document(sample_traces()))


def _paths(value, prefix=()):
    """Every (container, key) position inside a JSON value."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        yield prefix + (key,)
        yield from _paths(item, prefix + (key,))


PATHS = list(_paths(GOOD))


def _usable(session) -> None:
    """What replay and diff do with a loaded session must not fail."""
    session.stats()
    assert session.settings is None or isinstance(session.settings, DecodeSettings)
    for trace in session.traces.values():
        assert isinstance(trace.text, str)
    if len(session.strategies) > 1:
        diff_sessions(session, session)
    with redirect_stdout(io.StringIO()):
        print_session(session)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_fuzz_bytes_load_or_fail_clearly(data: bytes) -> None:
    try:
        _usable(session_from_document(parse_document(data, "fuzz.json")))
    except SessionError as exc:
        assert str(exc).startswith(("fuzz.json", "session"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), JSON | st.sampled_from([None, [], {}, -1, 10**6, "round"]))
# Drawn once in CI: seconds whose milliseconds overflow to infinity (replay crashed).
@example(("strategies", "plain", "rounds", 3, "draft_seconds"), 1.797693134862316e305)
def test_fuzz_damaged_sessions_load_usable_or_fail_clearly(path: tuple, value) -> None:
    doc = orjson.loads(orjson.dumps(GOOD))
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    try:
        loaded = session_from_document(doc)
    except SessionError:
        return
    _usable(loaded)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=len(orjson.dumps(GOOD)) - 1))
def test_fuzz_every_truncation_is_refused(cut: int) -> None:
    with pytest.raises(SessionError):
        session_from_document(parse_document(orjson.dumps(GOOD)[:cut], "cut.json"))


# --- crash-safe saving ------------------------------------------------------------------


def test_an_interrupted_save_leaves_the_previous_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.json"
    save_document(path, document({"plain": plain_trace("plain", [1, 2, 3])}))
    before = path.read_bytes()

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt  # Ctrl+C while the new bytes are being flushed

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_document(path, document(sample_traces()))
    assert path.read_bytes() == before
    assert load_session(path).strategies == ["plain"]
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary left


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from helpers.sessions import document, plain_trace
    from specdeck.sessions.session import save_document
    path = Path(sys.argv[1])
    docs = [document({"plain": plain_trace("plain", list(range(n)))}) for n in (3000, 4000)]
    i = 0
    while True:
        save_document(path, docs[i % 2])
        i += 1
        if i == 1:
            print("saved", flush=True)
    """
)


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.03, 0.07])
def test_a_process_killed_while_saving_leaves_a_whole_file(tmp_path: Path, delay: float) -> None:
    """SIGKILL a process that saves in a loop: the file always loads, and the browser
    never lists a half-written temporary as a session."""
    path = tmp_path / "sessions" / "run.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path), str(Path(__file__).parent)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "saved"
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(load_session(path).traces["plain"].tokens) in (3000, 4000)
    listed = list_sessions(path.parent)
    assert [s.path for s in listed] == [path] and listed[0].problem is None


def test_write_atomic_replaces_the_file_and_fsyncs(tmp_path: Path, monkeypatch) -> None:
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    path = tmp_path / "deep" / "x.json"
    write_atomic(path, b"one")
    write_atomic(path, b"two")
    assert path.read_bytes() == b"two" and len(synced) >= 2


def test_saved_files_get_ordinary_permissions(tmp_path: Path) -> None:
    """Not mkstemp's private 0600: the umask decides, as for any file the user writes."""
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "x.json", b"{}")
    finally:
        os.umask(old)
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o644


# --- the sessions directory -----------------------------------------------------------


def test_saving_never_overwrites_and_names_what_ran(tmp_path: Path) -> None:
    doc = document(sample_traces())
    doc["created"] = "2026-11-29T10:17:11+00:00"
    first = save_session(doc, tmp_path).path
    second = save_session(doc, tmp_path).path
    assert first.name == "20261129-101711_plain-draft.json"
    assert second.name == "20261129-101711_plain-draft-2.json"
    assert load_session(second).strategies == ["plain", "draft"]


def test_listing_summarises_newest_first_and_flags_broken_files(tmp_path: Path) -> None:
    old = document({"plain": plain_trace("plain", [1, 2])})
    old["created"] = "2026-01-01T00:00:00+00:00"
    new = document(sample_traces())
    new["created"] = "2026-02-01T00:00:00+00:00"
    save_session(old, tmp_path)
    save_session(new, tmp_path)
    (tmp_path / "broken.json").write_bytes(b'{"schema_version": 9, "strategies": {}}')
    (tmp_path / ".run.json.abc.tmp").write_bytes(b"{")  # a save in progress
    (tmp_path / "notes.txt").write_text("not a session")

    listed = list_sessions(tmp_path)
    assert [s.name for s in listed] == [
        "20260201-000000_plain-draft", "20260101-000000_plain", "broken",
    ]
    newest = listed[0]
    assert newest.prompt == "def fib(n):" and newest.target == "tiny/target"
    assert newest.strategies["draft"]["generated_tokens"] == 8
    assert newest.strategies["draft"]["acceptance_rate"] == pytest.approx(5 / 8)
    assert newest.problem is None and not newest.partial
    assert "newer specdeck (schema 9)" in listed[2].problem
    assert list_sessions(tmp_path / "missing") == []


def test_a_rename_never_replaces_a_file_that_appears_meanwhile(tmp_path: Path,
                                                                monkeypatch) -> None:
    """Another process may write the new name after any check: the rename must still
    refuse. (Checking first, then ``os.rename``, replaced that file.)"""
    path = save_session(document(sample_traces()), tmp_path).path
    (tmp_path / "taken.json").write_text("theirs")
    monkeypatch.setattr(Path, "exists", lambda self: False)  # every check races
    with pytest.raises(SessionError, match="already exists"):
        rename_session(path, "taken")
    assert (tmp_path / "taken.json").read_text() == "theirs"
    monkeypatch.undo()
    assert path.exists()


@pytest.mark.parametrize("error", [errno.EPERM, errno.EIO])
def test_a_rename_without_hard_links(tmp_path: Path, monkeypatch, error) -> None:
    """Where the file system has no hard links the file is still renamed; any other
    failure is named."""
    path = save_session(document(sample_traces()), tmp_path).path

    def no_link(src, dst):
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(os, "link", no_link)
    if error == errno.EIO:
        with pytest.raises(SessionError, match="cannot rename"):
            rename_session(path, "moved")
        return
    moved = rename_session(path, "moved")
    assert moved.exists() and not path.exists()
    with pytest.raises(SessionError, match="already exists"):
        rename_session(save_session(document(sample_traces()), tmp_path).path, "moved")


def test_rename_and_delete(tmp_path: Path) -> None:
    path = save_session(document(sample_traces()), tmp_path).path
    other = save_session(document(sample_traces()), tmp_path).path
    renamed = rename_session(path, "fib k=2")
    assert renamed == tmp_path / "fib k=2.json" and not path.exists()
    assert load_session(renamed).strategies == ["plain", "draft"]
    with pytest.raises(SessionError, match="already exists"):
        rename_session(other, "fib k=2.json")
    for bad in ("", "../up", ".hidden"):
        with pytest.raises(SessionError, match="not a usable name"):
            rename_session(other, bad)
    delete_session(renamed)
    assert not renamed.exists()
    with pytest.raises(SessionError, match="no such file"):
        delete_session(renamed)
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(SessionError, match="not a session file"):
        delete_session(tmp_path / "keep.txt")
