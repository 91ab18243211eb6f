"""Shared pytest fixtures for specdeck's tests.

The tiny models are built from code (see ``specdeck/testing/tiny_models.py``): no network,
no Hugging Face hub.  Building the whole family takes well under a second.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

from specdeck.blas import openblas_environment, reexec_with_openblas
from specdeck.testing.tiny_models import build_family

#: Fixtures shared by several modules (the model picker's fake catalog).
pytest_plugins = ["helpers.app"]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Run the session with OpenBLAS preloaded, as the ``specdeck`` command runs (mlx's
    bundled BLAS is ~30x slower): pytest started from the command line re-executes itself
    once, before xdist starts its workers (which inherit the preload).
    ``SPECDECK_NO_OPENBLAS=1`` keeps the bundled BLAS. OpenBLAS runs one thread in each
    process (unless the user says otherwise): the workers outnumber the cores, and a
    second thread only contends (whole suite: 415 -> 386 processor-seconds)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Python collects its youngest objects every 700 allocations by default, and a
    # worker's heap (models, apps, modules) makes each full collection long: ~40 % of
    # an app test's processor time went to it. Collect 14x less often (see below).
    gc.set_threshold(10_000, 10, 10)
    started_as_command = config.invocation_params.args == tuple(sys.argv[1:])
    if (openblas_environment() is None or not started_as_command
            or hasattr(config, "workerinput")):
        return
    # Conftests load while pytest captures the terminal: give it back before exec.
    config.pluginmanager.getplugin("capturemanager").stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    reexec_with_openblas(sys.orig_argv[1:])


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (mlx-lm, transformers, Textual, every test module) lives
    as long as the session: kept out of every later collection (app tests: 14.3 -> 11.5
    processor-seconds with the threshold above)."""
    gc.collect()
    gc.freeze()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Two workers more than the cores (``-n auto``): many tests wait on other processes
    (ranks, tmux, a browser), and spare workers keep the cores busy meanwhile
    (docs/development.md: 2 cores, 4 workers against 3 and 2)."""
    return (os.cpu_count() or 1) + 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first: xdist hands tests to its workers in this order, so neither
    ends the session running one of them alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def tiny_family(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Directories of the tiny tokenizer/models, built once per test session.

    Keys: ``"tokenizer"``, ``"llama_target"``, ``"llama_draft"``,
    ``"qwen3_target"``, ``"hybrid_target"``, ``"hybrid_draft"``,
    ``"other_tokenizer_model"``, ``"mtp_target"``
    (see :func:`specdeck.testing.tiny_models.build_family`).
    Treat the directories as read-only: they are shared by all tests.
    """
    return build_family(tmp_path_factory.mktemp("tiny_family"))


@pytest.fixture(autouse=True)
def _sessions_saved_in_tmp(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs that tests start (in process or in subprocesses, which inherit the variable)
    save their sessions under the test session's temporary directory, never in the
    repository's ``sessions/``; so do the fallback places of a failed save (the state
    folder; the temp dir's is per user and left to the tests that use it)."""
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("SPECDECK_SESSIONS_DIR", str(base / "sessions"))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))


@pytest.fixture(autouse=True)
def _empty_model_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests see an empty model cache (no fetched family), so that what ``specdeck``
    opens by default does not depend on the machine. A test that fetches into a cache
    points ``SPECDECK_CACHE_DIR`` at its own folder."""
    monkeypatch.setenv("SPECDECK_CACHE_DIR",
                       str(tmp_path_factory.getbasetemp() / "empty-model-cache"))

