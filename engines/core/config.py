"""Run settings shared by every strategy, validated once with messages a user can act on.

Plain dataclasses without mlx, so sessions can carry them to machines without it.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any, Union

from specdeck.engines.core.errors import SettingsError
from specdeck.engines.core.strategies import DRAFTERS, OWN, strategy_of

#: Draft lengths a policy picks round by round (``engines.auto``) instead of a fixed k:
#: ``-k auto`` (measured costs and acceptance), ``-k grow`` (transformers' schedule),
#: ``-k pmin:0.6`` (llama.cpp's ``--draft-p-min``); also ``--depth``, ``--ngram-k``.
AUTO, GROW, PMIN = "auto", "grow", "pmin"
#: The threshold of a bare ``pmin``: llama.cpp's default ``--draft-p-min``.
DEFAULT_P_MIN = 0.75
#: Drafts per round: a fixed count, or a policy (``parse_draft_count``).
DraftCount = Union[int, str]

#: How weights are kept once loaded: ``fast`` casts half precision to float32 on the CPU
#: backend (``loading.prefer_fast_dtype``); ``native`` keeps them as stored, as ``mlx_lm
#: generate`` does, so that outputs match it bit for bit.
DTYPES = ("fast", "native")

MAX_DRAFT_TOKENS = 16
MAX_MTP_DEPTH = 8
#: The target's top alternatives recorded per position: enough to explain a choice; each
#: one is stored for every position of the session.
MAX_ALTERNATIVES = 64
#: The alternatives the playground records per position, for its inspector.
INSPECTOR_ALTERNATIVES = 5
#: Temperatures other than 0 (greedy) lie in this range. Sampling scales float32 log-
#: probabilities by 1 / temperature: near 1e-39 that overflows (0 x inf: NaN
#: probabilities, garbage tokens) and near 1e39 it vanishes (-inf x 0), while well
#: inside it a temperature of 0.001 already samples like greedy decoding and 1000 like a
#: uniform draw.
TEMPERATURES = (1e-3, 1e3)
#: Seeds are mlx's: unsigned 64-bit.
SEEDS = range(2**64)

#: The JSON types each annotated field type accepts (exactly: true is not a number).
_JSON_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,),
               "int | None": (int, type(None)), "DraftCount": (int, str)}


def field_default(cls: type, name: str) -> Any:
    """A dataclass field's default: the command line's options read theirs from the
    dataclasses they fill, so each default is written once."""
    f = next(f for f in fields(cls) if f.name == name)
    return f.default_factory() if f.default is MISSING else f.default  # type: ignore[misc]


def _from_dict(cls: type, data: Any) -> Any:
    """A settings dataclass from its ``to_dict`` form as a file records it (untrusted): the
    fields present, each of its type, else their defaults; None when ``data`` is not
    such a record."""
    if type(data) is not dict:
        return None
    values = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.type == "Sampling":
            value = Sampling.from_dict(value)
            if value is None:
                return None
        elif type(value) not in _JSON_TYPES[f.type] or (
                type(value) is str and not is_policy(value)):
            return None
        values[f.name] = value
    return cls(**values)


def parse_draft_count(text: str) -> DraftCount:
    """A whole number, ``auto``, ``grow``, ``pmin`` or ``pmin:P`` (0 < P < 1), as typed
    on a command line or in a form; ValueError otherwise."""
    text = text.strip().lower()
    if text in (AUTO, GROW):
        return text
    if text == PMIN:
        return f"{PMIN}:{DEFAULT_P_MIN:g}"
    if text.startswith(f"{PMIN}:"):
        p_min = float(text[len(PMIN) + 1:])
        if not 0.0 < p_min < 1.0:
            raise ValueError(f"pmin's threshold must be between 0 and 1 (got {p_min:g})")
        return f"{PMIN}:{p_min:g}"
    return int(text)


def is_policy(value: object) -> bool:
    """Whether ``value`` names a draft-length policy as ``parse_draft_count`` writes it."""
    try:
        return type(value) is str and parse_draft_count(value) == value
    except ValueError:
        return False


def policy_name(count: DraftCount) -> str | None:
    """``auto``, ``grow`` or ``pmin`` for a policy; None for a fixed k."""
    return count.partition(":")[0] if isinstance(count, str) else None


def p_min_of(count: str) -> float:
    """The threshold of a ``pmin:P`` count."""
    return float(count.partition(":")[2])


def _check_count(value: DraftCount, most: int, what: str) -> None:
    if is_policy(value):
        return
    if type(value) is not int or not 1 <= value <= most:
        raise SettingsError(f"{what} must be between 1 and {most}, or auto, grow or "
                            f"pmin:P (got {value!r})")


@dataclass(frozen=True, slots=True)
class Sampling:
    """How the next token is chosen. Temperature 0 is greedy (argmax)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @classmethod
    def from_dict(cls, data: Any) -> Sampling | None:
        return _from_dict(cls, data)

    def validate(self) -> None:
        low, high = TEMPERATURES
        if not (self.temperature == 0.0 or low <= self.temperature <= high):
            raise SettingsError(f"temperature must be 0 (greedy) or from {low:g} to {high:g} "
                                f"(got {self.temperature})")
        if not 0.0 < self.top_p <= 1.0:
            raise SettingsError(f"top-p must be in (0, 1] (got {self.top_p})")
        if self.top_k < 0:
            raise SettingsError(f"top-k must be >= 0, 0 meaning off (got {self.top_k})")
        if not 0.0 <= self.min_p < 1.0:
            raise SettingsError(f"min-p must be in [0, 1) (got {self.min_p})")
        if self.seed not in SEEDS:
            raise SettingsError(f"the seed must be from 0 to 2**64 - 1 (got {self.seed})")


@dataclass(frozen=True, slots=True)
class DecodeSettings:
    """Everything about a run except the models and the prompt."""

    max_tokens: int = 256
    sampling: Sampling = field(default_factory=Sampling)
    #: Drafts per round for the ``draft`` strategy (k), or a policy (``auto``, ``grow``,
    #: ``pmin:P``).
    num_draft_tokens: DraftCount = 2
    #: Drafts per cycle for the ``mtp`` strategy, or a policy.
    mtp_depth: DraftCount = 1
    #: Match length for the ``ngram`` strategy, and its maximum drafts per round (or
    #: a policy).
    ngram_n: int = 3
    ngram_k: DraftCount = 8
    #: How many of the target's top alternatives to record per verified position (0: none).
    alternatives: int = 0
    #: Stop at the end-of-sequence token (benchmarks turn this off for fixed lengths).
    stop_at_eos: bool = True
    prefill_step_size: int = 512
    #: Bound the KV cache to this many tokens (a rotating window); None: unbounded.
    max_kv_size: int | None = None

    def validate(self) -> None:
        self.sampling.validate()
        if self.max_tokens < 1:
            raise SettingsError(f"max tokens must be >= 1 (got {self.max_tokens})")
        _check_count(self.num_draft_tokens, MAX_DRAFT_TOKENS, "draft tokens (-k)")
        _check_count(self.mtp_depth, MAX_MTP_DEPTH, "MTP depth")
        if self.ngram_n < 1:
            raise SettingsError(f"n-gram match length must be >= 1 (got {self.ngram_n})")
        _check_count(self.ngram_k, MAX_DRAFT_TOKENS, "n-gram drafts")
        if not 0 <= self.alternatives <= MAX_ALTERNATIVES:
            raise SettingsError(
                f"alternatives must be from 0 to {MAX_ALTERNATIVES} (got {self.alternatives})")
        if self.prefill_step_size < 1:
            raise SettingsError("prefill step size must be >= 1")
        if self.max_kv_size is not None and self.max_kv_size < 8:
            raise SettingsError(f"max KV size must be >= 8 (got {self.max_kv_size})")

    def draft_count(self, drafter: str) -> DraftCount:
        """The setting of a drafter (``draft``, ``mtp``, ``ngram``): k or a policy."""
        return getattr(self, DRAFTERS[drafter].setting)

    def for_pane(self, name: str) -> DecodeSettings:
        """The settings the pane ``name`` runs with: ``draft@grow`` is the draft strategy
        with k = grow, ``mtp@2`` the mtp one at depth 2; any other name, these."""
        base, own, count = name.partition(OWN)
        if not own:
            return self
        strategy = strategy_of(base)
        if strategy is None or len(strategy.drafters) != 1:
            raise SettingsError(
                f"{name!r}: only {', '.join(DRAFTERS)} take their own drafts per round "
                f"after {OWN} (draft{OWN}grow, mtp{OWN}2, ngram{OWN}auto)")
        try:
            value = parse_draft_count(count)
        except ValueError:
            raise SettingsError(f"{name!r}: after {OWN} comes a number of drafts per round, "
                                "auto, grow or pmin:P") from None
        pane = replace(self, **{DRAFTERS[strategy.drafters[0]].setting: value})
        pane.validate()
        return pane

    def max_drafts(self, strategy: str) -> int:
        """The most drafts one round of ``strategy`` (a pane's name) proposes (plain:
        none; a policy: the most it may choose; ``chain``: the most of its drafters')."""
        kind = strategy_of(strategy)
        try:
            pane = self.for_pane(strategy)
        except SettingsError:  # a name from a session no strategy of ours runs
            return 0
        drafters = kind.drafters if kind else ()
        return max((pane._most(drafter) for drafter in drafters), default=0)

    def _most(self, drafter: str) -> int:
        count = self.draft_count(drafter)
        if not isinstance(count, str):
            return count
        return MAX_MTP_DEPTH if drafter == "mtp" else MAX_DRAFT_TOKENS

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> DecodeSettings | None:
        """Settings as a session records them (``to_dict``); None when they are not."""
        return _from_dict(cls, data)
