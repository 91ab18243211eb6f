"""One entry point for every strategy, with cancellation and failures turned into events.

Front ends (the headless CLI, the app, sweeps) call ``run_strategy`` and always receive a
Prefill (unless loading failed), Rounds, and exactly one Done, whatever happens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

import mlx.core as mx

from specdeck.engines.measure.calibration import Calibration
from specdeck.engines.proposers.chain import CHAIN_NEEDS, run_chain
from specdeck.engines.core.config import STRATEGIES, DecodeSettings
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.decode.shared import Clock
from specdeck.engines.proposers.draft import run_draft
from specdeck.engines.core.events import Done, Event, Round
from specdeck.engines.models.loading import LoadedModel
from specdeck.engines.proposers.mtp import MtpModel, run_mtp
from specdeck.engines.proposers.ngram import run_ngram
from specdeck.engines.decode.plain import run_plain
from specdeck.engines.core.requests import require_draft


@dataclass
class Models:
    """The loaded models a comparison uses; one object per distinct model."""

    target: LoadedModel
    draft: LoadedModel | None = None
    #: The model whose own MTP head drafts for it (often the target itself).
    mtp: MtpModel | None = None
    #: This machine's calibration of the target (with the draft), which ``auto`` starts
    #: from; None when it was never calibrated here.
    calibration: Calibration | None = None

    def mtp_calibration(self) -> Calibration | None:
        """The calibration, where the model that drafts with its MTP head is the target
        calibrated."""
        return self.calibration if self.mtp is not None and self.mtp.model is self.target \
            else None


def strategy_events(
    name: str,
    models: Models,
    prompt: list[int],
    settings: DecodeSettings,
    clock: Clock = time.perf_counter,
) -> Iterator[Event]:
    """The raw event generator of one strategy."""
    if name == "plain":
        return run_plain(models.target, prompt, settings, clock)
    if name == "draft":
        require_draft([name], models.draft)
        return run_draft(models.target, models.draft, prompt, settings, clock,
                         calibration=models.calibration)
    if name == "mtp":
        if models.mtp is None:
            raise SettingsError("the mtp strategy needs a model with an MTP head")
        return run_mtp(models.mtp, prompt, settings, clock,
                       calibration=models.mtp_calibration())
    if name == "ngram":
        return run_ngram(models.target, prompt, settings, clock,
                         calibration=models.calibration)
    if name == "chain":
        if models.draft is None and models.mtp is None:
            raise SettingsError(CHAIN_NEEDS)
        calibration = models.calibration if models.draft else models.mtp_calibration()
        return run_chain(models.target, models.draft, models.mtp, prompt, settings, clock,
                         calibration=calibration)
    raise SettingsError(f"unknown strategy {name!r} (choose from {', '.join(STRATEGIES)})")


def run_strategy(
    name: str,
    models: Models,
    prompt: list[int],
    settings: DecodeSettings,
    clock: Clock = time.perf_counter,
    cancelled: Callable[[], bool] = lambda: False,
) -> Iterator[Event]:
    """Run one strategy to its end, checking ``cancelled`` after every event.

    A cancelled or failed run still ends with a Done (reason ``cancelled`` or
    ``error``), so what was produced so far is kept and can be saved as partial.
    """
    start = clock()
    generated = 0
    events = strategy_events(name, models, prompt, settings, clock)
    try:
        for event in events:
            if isinstance(event, Round):
                generated += len(event.tokens)
            yield event
            if isinstance(event, Done):
                return
            if cancelled():
                events.close()
                yield Done("cancelled", generated, clock() - start, int(mx.get_peak_memory()))
                return
    except Exception as exc:  # reported as an event; front ends decide how loud to be
        events.close()
        yield Done(
            "error", generated, clock() - start, int(mx.get_peak_memory()),
            error=f"{type(exc).__name__}: {exc}",
        )
    finally:  # a consumer that stops early ends the run too (its wired limit comes back)
        events.close()
