"""Run several strategies on one prompt, one after another, each warmed up first.

Strategies that run at the same moment share the hardware and slow each other down, so a
comparison measures them in turn: a short warm-up run (compiles kernels, touches the
weights), then the measured run, streamed live through ``on_event``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from engines.config import STRATEGIES, DecodeSettings
from engines.errors import SettingsError
from engines.decoding import Clock
from engines.events import Event, Trace
from engines.loading import ModelStore, check_pair
from engines.strategies import Models, run_strategy

#: Strategies that need a draft model.
NEEDS_DRAFT = {"draft"}


@dataclass
class CompareRequest:
    """What to compare: models, strategies, prompt and settings."""

    target: str
    strategies: list[str]
    prompt: str
    settings: DecodeSettings = field(default_factory=DecodeSettings)
    draft: str | None = None
    revision: str | None = None
    #: Apply the tokenizer's chat template: True, False, or None for "if it has one".
    chat: bool | None = None
    warmup_tokens: int = 8

    def validate(self) -> None:
        self.settings.validate()
        if not self.strategies:
            raise SettingsError("choose at least one strategy")
        unknown = [s for s in self.strategies if s not in STRATEGIES]
        if unknown:
            raise SettingsError(
                f"unknown strategy {unknown[0]!r} (choose from {', '.join(STRATEGIES)})"
            )
        if len(set(self.strategies)) != len(self.strategies):
            raise SettingsError("a strategy is listed twice")
        if NEEDS_DRAFT & set(self.strategies) and not self.draft:
            raise SettingsError("the draft strategy needs a draft model (--draft PATH)")
        if not self.prompt:
            raise SettingsError("the prompt is empty")
        if self.warmup_tokens < 0:
            raise SettingsError("warm-up tokens must be >= 0")


def encode_prompt(tokenizer: Any, text: str, chat: bool | None = None) -> list[int]:
    """Token ids of ``text``, wrapped in the chat template when asked (or available)."""
    has_template = getattr(tokenizer, "chat_template", None) is not None
    if chat is None:
        chat = has_template
    if chat:
        if not has_template:
            raise SettingsError("this tokenizer has no chat template; run without --chat")
        return list(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True
            )
        )
    ids = list(tokenizer.encode(text))
    if not ids:
        raise SettingsError("the prompt encodes to no tokens")
    return ids


def load_models(
    request: CompareRequest,
    store: ModelStore,
    progress: Callable[[str], None] = lambda _: None,
) -> Models:
    """Load what the request needs, each model once, refusing mismatched pairs early."""
    needs_draft = bool(NEEDS_DRAFT & set(request.strategies))
    if needs_draft and request.draft:
        progress(f"checking that {request.draft} shares {request.target}'s tokenizer")
        check_pair(request.target, request.draft, request.revision)
    progress(f"loading {request.target}")
    target = store.get(request.target, request.revision)
    draft = None
    if needs_draft and request.draft:
        progress(f"loading {request.draft}")
        draft = store.get(request.draft)
    return Models(target=target, draft=draft)


@dataclass
class CompareResult:
    request: CompareRequest
    prompt_tokens: list[int]
    models: Models
    traces: dict[str, Trace]


def run_compare(
    request: CompareRequest,
    store: ModelStore | None = None,
    on_event: Callable[[str, Event], None] = lambda name, event: None,
    progress: Callable[[str], None] = lambda _: None,
    cancelled: Callable[[], bool] = lambda: False,
    clock: Clock = time.perf_counter,
) -> CompareResult:
    """Warm up and measure each strategy in turn; stop early (keeping what ran) when
    ``cancelled`` turns true."""
    request.validate()
    models = load_models(request, store or ModelStore(), progress)
    prompt = encode_prompt(models.target.tokenizer, request.prompt, request.chat)
    traces: dict[str, Trace] = {}
    for name in request.strategies:
        if cancelled():
            break
        if request.warmup_tokens:
            progress(f"warming up {name}")
            warm = replace(request.settings, max_tokens=request.warmup_tokens)
            for _ in run_strategy(name, models, prompt, warm, clock, cancelled):
                pass
        progress(f"running {name}")
        trace = Trace(name)
        for event in run_strategy(name, models, prompt, request.settings, clock, cancelled):
            trace.events.append(event)
            on_event(name, event)
        traces[name] = trace
    return CompareResult(request, prompt, models, traces)
