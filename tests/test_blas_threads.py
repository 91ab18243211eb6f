"""OpenBLAS on one thread for a small target, its own count for a larger one, and the
user's ``OPENBLAS_NUM_THREADS`` left alone (``engines.blas_threads``)."""

from __future__ import annotations

import pytest

from specdeck.engines.measure import blas_threads
from specdeck.engines.measure.blas_threads import SMALL_MODEL_BYTES, fit_blas_threads


class FakeOpenBLAS:
    def __init__(self) -> None:
        self.threads = 2

    def openblas_set_num_threads(self, n: int) -> None:
        self.threads = n

    def openblas_get_num_threads(self) -> int:
        return self.threads


@pytest.fixture
def fake(monkeypatch) -> FakeOpenBLAS:
    lib = FakeOpenBLAS()
    monkeypatch.setattr(blas_threads, "_openblas", lambda: (lib, 2))
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    return lib


def test_a_small_target_runs_one_thread_a_larger_its_own_count(fake) -> None:
    assert fit_blas_threads(SMALL_MODEL_BYTES - 1) == 1 and fake.threads == 1
    assert fit_blas_threads(SMALL_MODEL_BYTES) == 2 and fake.threads == 2


def test_the_users_count_and_a_missing_openblas_are_left_alone(fake, monkeypatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert fit_blas_threads(1) is None and fake.threads == 2
    monkeypatch.setattr(blas_threads, "_openblas", lambda: None)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    assert fit_blas_threads(1) is None


def test_loading_a_tiny_family_sets_it(tiny_family, fake) -> None:
    """``load_models`` fits the threads to the target it loads."""
    from specdeck.engines.runs.compare import load_models
    from specdeck.engines.models.loading import ModelStore
    from specdeck.engines.core.requests import CompareRequest

    load_models(CompareRequest(target=str(tiny_family["llama_target"]), strategies=["plain"],
                               prompt="def"), ModelStore())
    assert fake.threads == 1


def test_calibrate_times_under_the_threads_its_runs_get(tiny_family, fake, monkeypatch
                                                        ) -> None:
    """A calibration prices the runs it is used for: ``specdeck calibrate`` fits the
    threads to its target as a run does, before timing anything."""
    from specdeck.cli import main
    from specdeck.engines.measure import pass_timing

    seen = []

    def timed(*args, **kwargs):
        seen.append(fake.threads)
        raise SystemExit(0)

    monkeypatch.setattr(pass_timing, "measure_calibration", timed)
    with pytest.raises(SystemExit):
        main(["calibrate", "--target", str(tiny_family["llama_target"])])
    assert seen == [1]


def test_the_real_openblas_when_preloaded(monkeypatch) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    started = blas_threads._openblas()
    if started is None:
        pytest.skip("no OpenBLAS in this process (LD_PRELOAD it to run this)")
    try:
        assert fit_blas_threads(1) == 1 and blas_threads.blas_threads() == 1
        assert fit_blas_threads(SMALL_MODEL_BYTES) == started[1]
        assert blas_threads.blas_threads() == started[1]
    finally:
        started[0].openblas_set_num_threads(started[1])
