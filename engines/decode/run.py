"""One entry point for every strategy, with cancellation and failures turned into events.

Front ends (the headless CLI, the app, sweeps) call ``run_strategy`` and always receive a
Prefill (unless loading failed), Rounds, and exactly one Done, whatever happens.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import mlx.core as mx

from specdeck.engines.core.config import DecodeSettings
from specdeck.engines.core.errors import SettingsError
from specdeck.engines.core.events import Done, Event, Round
from specdeck.engines.core.strategies import names, strategy_of
from specdeck.engines.decode.shared import Clock
from specdeck.engines.measure.calibration import Calibration
from specdeck.engines.models.loading import LoadedModel
from specdeck.engines.proposers.mtp import MtpModel


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
    """The raw event generator of one strategy: its module's ``run``
    (``engines.core.strategies``), once the models it needs are there."""
    strategy = strategy_of(name)
    if strategy is None:
        raise SettingsError(f"unknown strategy {name!r} (choose from {names()})")
    settings = settings.for_pane(name)
    draft_named = models.draft is not None
    if (strategy.uses_mtp(draft_named) and models.mtp is None) or (
            strategy.draft_model == "always" and not draft_named):
        raise SettingsError(strategy.needs)
    module = importlib.import_module(f"specdeck.engines.{strategy.runner}")
    return module.run(models, prompt, settings, clock)


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
