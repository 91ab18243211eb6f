"""Run several strategies on one prompt, one after another, each warmed up first.

Strategies that run at the same moment share the hardware and slow each other down, so a
comparison measures them in turn: a short warm-up run (compiles kernels, touches the
weights), then the measured run, streamed live through ``on_event``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from specdeck.engines.config import DTYPES, STRATEGIES, DecodeSettings
from specdeck.engines.errors import SettingsError
from specdeck.engines.decoding import Clock
from specdeck.engines.events import Event, Trace
from specdeck.engines.catalog import ModelInfo, describe_dir
from specdeck.engines.loading import ModelStore, check_pair, load_tokenizer, resolve
from specdeck.engines.memory import (
    MemoryEstimate, check_headroom, cpu_backend, estimate_comparison, weight_bytes,
)
from specdeck.engines.mtp import load_mtp
from specdeck.engines.strategies import Models, run_strategy

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
    #: The model whose MTP head drafts for the mtp strategy; None: the target itself.
    mtp_model: str | None = None
    revision: str | None = None
    #: Apply the tokenizer's chat template: True, False, or None for "if it has one".
    chat: bool | None = None
    warmup_tokens: int = 8
    #: Refuse to load when the memory estimate does not fit in free memory (else warn).
    strict_memory: bool = False
    #: ``fast`` (half precision run as float32 on the CPU) or ``native`` (as stored).
    dtype: str = "fast"

    @property
    def upcast(self) -> bool:
        """Whether half-precision weights become float32 (the CPU backend, ``fast``)."""
        return self.dtype == "fast" and cpu_backend()

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
        if self.dtype not in DTYPES:
            raise SettingsError(f"dtype must be one of {', '.join(DTYPES)} (got {self.dtype!r})")


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
    needs_mtp = "mtp" in request.strategies
    if needs_draft and request.draft:
        progress(f"checking that {request.draft} shares {request.target}'s tokenizer")
        check_pair(request.target, request.draft, request.revision)
    if needs_mtp and request.mtp_model:
        progress(f"checking that {request.mtp_model} shares {request.target}'s tokenizer")
        check_pair(request.target, request.mtp_model, request.revision, role="MTP")
    check_memory(request, store, progress)
    progress(f"loading {request.target}")
    target = store.get(request.target, request.revision, request.dtype)
    mtp = None
    if needs_mtp:
        if request.mtp_model:
            progress(f"loading {request.mtp_model}")
            mtp_source = store.get(request.mtp_model, dtype=request.dtype)
        else:
            mtp_source = target
        progress(f"loading the MTP head of {mtp_source.name}")
        mtp = load_mtp(mtp_source)
    draft = None
    if needs_draft and request.draft:
        progress(f"loading {request.draft}")
        draft = store.get(request.draft, dtype=request.dtype)
    return Models(target=target, draft=draft, mtp=mtp)


def _described(request: CompareRequest) -> tuple[ModelInfo, ModelInfo | None, ModelInfo | None]:
    """The target, draft and MTP model the request uses, described from their files."""
    target = describe_dir(resolve(request.target, request.revision), name=request.target)
    draft = mtp = None
    if NEEDS_DRAFT & set(request.strategies) and request.draft:
        draft = describe_dir(resolve(request.draft), name=request.draft)
    if "mtp" in request.strategies:
        mtp = describe_dir(resolve(request.mtp_model), name=request.mtp_model) \
            if request.mtp_model else target
    return target, draft, mtp


def estimate_memory(
    request: CompareRequest, prompt_tokens: int,
    described: tuple[ModelInfo, ModelInfo | None, ModelInfo | None] | None = None,
) -> dict[str, MemoryEstimate] | None:
    """Each strategy's peak memory, from the model files alone; None while a model's
    weights are not on disk (a hub id fetched only for its config and tokenizer)."""
    target, draft, mtp = described or _described(request)
    if not all(m.weights_present for m in (target, draft, mtp) if m is not None):
        return None
    return estimate_comparison(
        request.strategies, target, request.settings, prompt_tokens,
        draft=draft, mtp=mtp, upcast=request.upcast,
    )


def check_memory(
    request: CompareRequest, store: ModelStore, progress: Callable[[str], None]
) -> None:
    """Before loading: warn through ``progress`` when the largest estimate does not fit
    in free memory, or refuse (ModelError) under ``request.strict_memory``."""
    tokenizer = load_tokenizer(resolve(request.target, request.revision))
    prompt = len(encode_prompt(tokenizer, request.prompt, request.chat))
    described = _described(request)
    estimates = estimate_memory(request, prompt, described)
    if estimates is None:
        progress("memory not estimated: a model's weights are not downloaded yet")
        return
    resident = sum(
        weight_bytes(m, request.upcast) for m in {m.path: m for m in described if m}.values()
        if store.holds(m.path, request.revision if m.name == request.target else None,
                       request.dtype)
    )
    warning = check_headroom(list(estimates.values()), resident, request.strict_memory)
    if warning:
        progress(f"warning: {warning}")


@dataclass
class CompareResult:
    request: CompareRequest
    prompt_tokens: list[int]
    models: Models
    traces: dict[str, Trace]
    #: Each strategy's estimated peak memory (None when it could not be estimated).
    memory_estimates: dict[str, MemoryEstimate] | None = None


def run_compare(
    request: CompareRequest,
    store: ModelStore | None = None,
    on_event: Callable[[str, Event], None] = lambda name, event: None,
    progress: Callable[[str], None] = lambda _: None,
    cancelled: Callable[[], bool] = lambda: False,
    clock: Clock = time.perf_counter,
    on_estimates: Callable[[dict[str, MemoryEstimate] | None], None] = lambda estimates: None,
) -> CompareResult:
    """Warm up and measure each strategy in turn; stop early (keeping what ran) when
    ``cancelled`` turns true."""
    request.validate()
    models = load_models(request, store or ModelStore(), progress)
    prompt = encode_prompt(models.target.tokenizer, request.prompt, request.chat)
    estimates = estimate_memory(request, len(prompt))
    on_estimates(estimates)  # before any strategy runs: the app shows them beside the peaks
    traces: dict[str, Trace] = {}
    for name in request.strategies:
        if cancelled():
            break
        if request.warmup_tokens:
            progress(f"warming up {name}")
            warm = replace(request.settings, max_tokens=request.warmup_tokens)
            for _ in run_strategy(name, models, prompt, warm, clock, cancelled):
                pass
            if cancelled():  # stopped during the warm-up: nothing of this one was measured
                break
        progress(f"running {name}")
        trace = Trace(name)
        for event in run_strategy(name, models, prompt, request.settings, clock, cancelled):
            trace.events.append(event)
            on_event(name, event)
        traces[name] = trace
    return CompareResult(request, prompt, models, traces, estimates)
