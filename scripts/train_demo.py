"""Train specdeck's built-in demo family: a hybrid target with an MTP head, and a draft.

``specdeck`` opens on these models when none is named, so it works offline on any
machine. Random weights accept nothing or everything; trained ones show the real shape
of speculation. Everything comes from the Python standard library (PSF licence, on every
machine): its own sources, and for English prose the language reference's topics that
``pydoc`` ships (``pydoc_data/topics.py``). mlx-lm's model classes, so ``mlx_lm.load``
reads the result and mlx-optiq finds the MTP head:

- a byte-level BPE tokenizer shared by the family (trained on the code);
- the target: ``qwen3_5`` (gated delta net layers + full attention every
  ``full_attention_interval``-th layer) with one MTP layer that predicts the token after
  next from the trunk's final hidden state and the next token's embedding, saved as
  ``optiq/mtp.safetensors`` (the layout mlx-optiq loads);
- the draft: a one-layer ``llama`` distilled from the target (0.3 x cross-entropy +
  0.7 x KL to the target's logits).

Four phases, each with its own optimizer and schedule (``phases``):

1. ``joint``: all three in one loop on the same code batches; the MTP layer sees the
   trunk's hidden state through a stop-gradient, and runs each position as a sequence
   of one, because that is how mlx-optiq drafts with it (no cache).
2. ``distill``: the draft alone against the frozen target.
3. ``mix`` (off unless ``--mix-steps``): all three again, half of each batch code and
   half prose, so that the family writes English when asked to (trained on code only, it
   answers prose with Python). Tried and not shipped: the target then looped on
   reference-manual sentences, which made the prose prompt easier to draft for, not
   harder (the model card has the figures).
4. ``policy``: the draft alone, part of each batch the frozen target's own greedy
   continuations of corpus prefixes, regenerated every step: at temperature 0 a draft is
   accepted exactly when it agrees with those (the recipe of DistillSpec).

Run ``python scripts/train_demo.py`` (``--resume`` continues from the last checkpoint
in ``build/train_demo/``, in any phase). Weights are written in float16 to
``models/demo/`` with ``card.json`` (settings, phases, corpus hashes, losses);
``bench/demo_sweep.py --card`` adds the measured acceptance and speed and renders
``MODEL_CARD.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import shutil
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.models import llama, qwen3_5
from mlx_lm.models.cache import make_prompt_cache

ROOT = Path(__file__).resolve().parent.parent
EOS = "<|endoftext|>"
#: Standard-library folders left out: tests, vendored or generated code, GUIs' demos.
EXCLUDED_DIRS = {
    "test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo",
    "ensurepip", "pydoc_data", "__pycache__", "encodings", "config-3.11-x86_64-linux-gnu",
}


@dataclass
class Settings:
    """Everything that decides the result; recorded in the model card."""

    seed: int = 0
    vocab_size: int = 2048
    seq_len: int = 128
    batch_size: int = 32
    steps: int = 460
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    mtp_weight: float = 0.5
    distill_kl: float = 0.7
    #: After the joint steps: the draft alone, distilled from the finished target.
    distill_steps: int = 540
    distill_lr: float = 2e-3
    #: Then all three again, half of each batch's rows code and half English prose, so
    #: the family writes prose when asked for it (0: the shipped family skips it).
    mix_steps: int = 0
    mix_lr: float = 1e-3
    #: Warm-up steps of the mix and policy phases.
    late_warmup: int = 30
    #: Last, the draft alone again, with ``policy_rows`` of each batch's rows the frozen
    #: target's own greedy continuations of ``policy_prefix``-token corpus prefixes
    #: (code and prose alternately): the text speculation at temperature 0 verifies.
    policy_steps: int = 60
    policy_lr: float = 1e-3
    policy_rows: int = 16
    policy_prefix: int = 16
    # target (qwen3_5 hybrid)
    hidden: int = 256
    layers: int = 6
    full_attention_interval: int = 3
    intermediate: int = 768
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    linear_key_heads: int = 2
    linear_value_heads: int = 4
    linear_head_dim: int = 32
    # draft (llama)
    draft_hidden: int = 192
    draft_layers: int = 1
    draft_intermediate: int = 512
    draft_heads: int = 3
    draft_kv_heads: int = 1
    val_every: int = 250
    checkpoint_every: int = 50


# ---------------------------------------------------------------------------- corpus


def corpus_files() -> list[Path]:
    """The standard library's .py sources, sorted, tests and vendored code left out."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib)
        if EXCLUDED_DIRS & set(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        files.append(path)
    return files


def read_corpus() -> tuple[list[str], list[str], str]:
    """(training texts, held-out texts, sha256 of names and contents).

    Every 40th file (by sorted name) is held out for validation.
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    digest = hashlib.sha256()
    train, val = [], []
    for i, path in enumerate(corpus_files()):
        text = path.read_text(encoding="utf-8", errors="replace")
        digest.update(str(path.relative_to(stdlib)).encode() + b"\0" + text.encode() + b"\0")
        (val if i % 40 == 0 else train).append(text)
    return train, val, digest.hexdigest()


def read_prose() -> tuple[list[str], list[str], str, int]:
    """(training texts, held-out texts, sha256 of names and contents, bytes): English.

    The language reference's topics that ``pydoc`` ships as text
    (``pydoc_data/topics.py``, PSF licence, on every machine). Every 10th topic (by
    sorted name) is held out: there are only 79.
    """
    from pydoc_data.topics import topics

    digest = hashlib.sha256()
    train, val, size = [], [], 0
    for i, name in enumerate(sorted(topics)):
        text = topics[name]
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
        size += len(text.encode())
        (val if i % 10 == 0 else train).append(text)
    return train, val, digest.hexdigest(), size


def train_tokenizer(texts: list[str], vocab_size: int, out: Path) -> None:
    """Byte-level BPE (mlx-lm then streams text with its BPE detokenizer)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOS, "bos_token": None,
        "unk_token": None, "pad_token": None, "add_bos_token": False,
        "add_eos_token": False, "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def encode(texts: list[str], tokenizer_dir: Path) -> np.ndarray:
    """All texts as one uint16 stream, each file followed by the eos token."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    eos = tok.token_to_id(EOS)
    ids: list[int] = []
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(eos)
    return np.array(ids, dtype=np.uint16)


def encoded(train: list[str], val: list[str], tokenizer_dir: Path,
            cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """(training, held-out) token streams, encoded once and kept in ``cache``."""
    if cache.exists():
        arrays = np.load(cache)
        return arrays["train"], arrays["val"]
    train_ids, val_ids = encode(train, tokenizer_dir), encode(val, tokenizer_dir)
    np.savez(cache, train=train_ids, val=val_ids)
    return train_ids, val_ids


# ---------------------------------------------------------------------------- models


def target_config(s: Settings, eos_id: int) -> dict:
    """Flat qwen3_5 config (mlx-lm wraps it as text_config); one MTP layer."""
    return {
        "model_type": "qwen3_5", "architectures": ["Qwen3_5ForCausalLM"],
        "hidden_size": s.hidden, "num_hidden_layers": s.layers,
        "intermediate_size": s.intermediate, "num_attention_heads": s.heads,
        "num_key_value_heads": s.kv_heads, "head_dim": s.head_dim, "rms_norm_eps": 1e-6,
        "vocab_size": s.vocab_size, "max_position_embeddings": 4096,
        "tie_word_embeddings": False, "eos_token_id": eos_id,
        "full_attention_interval": s.full_attention_interval,
        "linear_num_key_heads": s.linear_key_heads,
        "linear_num_value_heads": s.linear_value_heads,
        "linear_key_head_dim": s.linear_head_dim, "linear_value_head_dim": s.linear_head_dim,
        "linear_conv_kernel_dim": 4, "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                            "partial_rotary_factor": 0.5},
        "mtp_num_hidden_layers": 1, "torch_dtype": "float16",
    }


def draft_config(s: Settings, eos_id: int) -> dict:
    return {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "hidden_size": s.draft_hidden, "num_hidden_layers": s.draft_layers,
        "intermediate_size": s.draft_intermediate, "num_attention_heads": s.draft_heads,
        "num_key_value_heads": s.draft_kv_heads, "rms_norm_eps": 1e-6,
        "vocab_size": s.vocab_size, "max_position_embeddings": 4096,
        "tie_word_embeddings": False, "eos_token_id": eos_id, "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "attention_bias": False, "mlp_bias": False, "torch_dtype": "float16",
    }


class MTPHead(nn.Module):
    """The module mlx-optiq builds for a Qwen3.5 MTP head (same names and shapes)."""

    def __init__(self, args: qwen3_5.TextModelArgs):
        super().__init__()
        h = args.hidden_size
        self.pre_fc_norm_hidden = nn.RMSNorm(h, eps=args.rms_norm_eps)
        self.pre_fc_norm_embedding = nn.RMSNorm(h, eps=args.rms_norm_eps)
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.layers = [qwen3_5.DecoderLayer(args, layer_idx=args.full_attention_interval - 1)]
        self.norm = nn.RMSNorm(h, eps=args.rms_norm_eps)

    def __call__(self, hidden: mx.array, next_embedding: mx.array) -> mx.array:
        """Post-norm hidden states predicting the token after next, position by position."""
        x = self.fc(mx.concatenate(
            [self.pre_fc_norm_embedding(next_embedding), self.pre_fc_norm_hidden(hidden)], -1
        ))
        b, t, h = x.shape
        # One position per sequence: mlx-optiq drafts without a cache.
        x = self.layers[0](x.reshape(b * t, 1, h)).reshape(b, t, h)
        return self.norm(x)


class Family(nn.Module):
    def __init__(self, tcfg: dict, dcfg: dict):
        super().__init__()
        self.target = qwen3_5.Model(qwen3_5.ModelArgs.from_dict(tcfg))
        self.mtp = MTPHead(self.target.language_model.args)
        self.draft = llama.Model(llama.ModelArgs.from_dict(dcfg))


def init_family(family: Family, seed: int) -> None:
    """Small, seeded initialisation; norms at one (mlx-optiq shifts norms with mean < 0.5)."""
    params = {}
    for i, (name, value) in enumerate(sorted(tree_flatten(family.parameters()))):
        key = mx.random.key(seed * 100003 + i)
        if name.endswith("norm.weight") or name.endswith("dt_bias"):
            params[name] = mx.ones(value.shape)
        elif name.endswith("A_log"):
            params[name] = mx.log(mx.random.uniform(1.0, 16.0, value.shape, key=key))
        elif value.ndim >= 2:
            fan_in = math.prod(value.shape[1:])
            std = 0.02 if "embed" in name else fan_in ** -0.5
            if name.endswith(("o_proj.weight", "down_proj.weight", "out_proj.weight")):
                std /= math.sqrt(2 * 6)
            params[name] = mx.random.normal(value.shape, key=key) * std
        else:
            params[name] = value
    family.update(tree_unflatten(list(params.items())))


def cross_entropy(logits: mx.array, targets: mx.array) -> mx.array:
    return nn.losses.cross_entropy(logits, targets, reduction="mean")


def family_loss(family: Family, batch: mx.array, s: Settings):
    inputs, targets = batch[:, :-1], batch[:, 1:]
    text = family.target.language_model
    hidden = text.model(inputs)
    logits = text.lm_head(hidden)
    ce_target = cross_entropy(logits, targets)

    # MTP: hidden at t and the embedding of token t+1 predict token t+2.
    mtp_hidden = family.mtp(
        mx.stop_gradient(hidden[:, :-1]), text.model.embed_tokens(targets[:, :-1])
    )
    ce_mtp = cross_entropy(text.lm_head(mtp_hidden), targets[:, 1:])

    draft_logits = family.draft(inputs)
    ce_draft = cross_entropy(draft_logits, targets)
    teacher = mx.stop_gradient(logits)
    kl = (mx.softmax(teacher, -1) * (
        nn.log_softmax(teacher, -1) - nn.log_softmax(draft_logits, -1)
    )).sum(-1).mean()
    draft_loss = (1 - s.distill_kl) * ce_draft + s.distill_kl * kl
    total = ce_target + s.mtp_weight * ce_mtp + draft_loss
    return total, (ce_target, ce_mtp, ce_draft, kl)


# ---------------------------------------------------------------------------- training


@dataclass
class Tokens:
    """The encoded corpus: code (the standard library) and prose (pydoc's topics)."""

    code: np.ndarray
    code_val: np.ndarray
    prose: np.ndarray
    prose_val: np.ndarray


@dataclass(frozen=True)
class Phase:
    """A stretch of steps with its own optimizer and learning-rate schedule."""

    name: str
    start: int
    steps: int
    lr: float
    warmup: int
    #: Only the draft learns; the target and MTP head are frozen.
    draft_only: bool
    #: "code": corpus windows of code; "mixed": half code, half prose; "policy":
    #: ``policy_rows`` target-generated rows, the rest mixed.
    data: str

    @property
    def end(self) -> int:
        return self.start + self.steps


def phases(s: Settings) -> list[Phase]:
    """The run's phases in order; each starts where the previous one ended."""
    joint = Phase("joint", 0, s.steps, s.lr, s.warmup, False, "code")
    distill = Phase("distill", joint.end, s.distill_steps, s.distill_lr, s.warmup, True,
                    "code")
    mix = Phase("mix", distill.end, s.mix_steps, s.mix_lr, s.late_warmup, False, "mixed")
    policy = Phase("policy", mix.end, s.policy_steps, s.policy_lr, s.late_warmup, True,
                   "policy")
    return [joint, distill, mix, policy]


def phase_at(plan: list[Phase], step: int) -> Phase:
    """The phase that trains ``step`` (the last one once every phase is done)."""
    return next((p for p in plan if p.start <= step < p.end), plan[-1])


def windows(data: np.ndarray, key: list[int], rows: int, length: int) -> mx.array:
    """``rows`` random windows of ``length`` tokens from a generator seeded by ``key``."""
    rng = np.random.default_rng(key)
    starts = rng.integers(0, len(data) - length, size=rows)
    return mx.array(np.stack([data[i: i + length] for i in starts]).astype(np.int32))


def batch_at(data: np.ndarray, step: int, s: Settings, salt: int = 0,
             rows: int | None = None) -> mx.array:
    """The batch of ``step``: random windows from a generator seeded by (seed, step)."""
    return windows(data, [s.seed, salt, step], rows or s.batch_size, s.seq_len + 1)


def mixed_batch(tokens: Tokens, step: int, s: Settings, rows: int) -> mx.array:
    """``rows`` windows, half code and half prose."""
    code = rows - rows // 2
    return mx.concatenate([batch_at(tokens.code, step, s, 0, code),
                           batch_at(tokens.prose, step, s, 2, rows - code)])


def greedy_continuation(model: nn.Module, prefixes: mx.array, length: int) -> mx.array:
    """``prefixes`` followed by the ``length`` tokens ``model`` picks greedily
    (temperature 0, as speculation is measured), all rows at once with mlx-lm's cache."""
    cache = make_prompt_cache(model)
    out = [prefixes]
    logits = model(prefixes, cache=cache)[:, -1]
    for i in range(length):
        out.append(logits.argmax(-1, keepdims=True))
        if i + 1 < length:
            logits = model(out[-1], cache=cache)[:, -1]
            mx.eval(logits)
    return mx.concatenate(out, axis=1)


def policy_batch(family: Family, tokens: Tokens, step: int, s: Settings) -> mx.array:
    """``policy_rows`` rows the frozen target wrote itself from corpus prefixes (code and
    prose alternately), then mixed corpus windows for the rest of the batch."""
    code = s.policy_rows - s.policy_rows // 2
    prefixes = mx.concatenate([
        windows(tokens.code, [s.seed, 3, step], code, s.policy_prefix),
        windows(tokens.prose, [s.seed, 4, step], s.policy_rows - code, s.policy_prefix),
    ])
    generated = greedy_continuation(family.target, prefixes, s.seq_len + 1 - s.policy_prefix)
    return mx.concatenate([generated, mixed_batch(tokens, step, s, s.batch_size - s.policy_rows)])


def phase_batch(phase: Phase, family: Family, tokens: Tokens, step: int,
                s: Settings) -> mx.array:
    if phase.data == "code":
        return batch_at(tokens.code, step, s)
    if phase.data == "mixed":
        return mixed_batch(tokens, step, s, s.batch_size)
    return policy_batch(family, tokens, step, s)


def schedule(peak: float, warmup: int, steps: int):
    """Linear warm-up (at most ``steps``), then cosine decay to a tenth of the peak."""
    warmup = max(1, min(warmup, steps))
    return optim.join_schedules(
        [optim.linear_schedule(peak / warmup, peak, warmup),
         optim.cosine_decay(peak, max(1, steps - warmup), peak / 10)],
        [warmup],
    )


def make_trainer(family: Family, s: Settings, phase: Phase, opt_state: Path | None = None):
    """(optimizer, compiled step, state) for ``phase``: all three parts together, or the
    draft alone against the frozen target; ``opt_state`` resumes the optimizer."""
    family.unfreeze()
    if phase.draft_only:
        family.freeze()
        family.draft.unfreeze()
    lr = schedule(phase.lr, phase.warmup, phase.steps)
    opt = optim.AdamW(learning_rate=lr, weight_decay=s.weight_decay)
    opt.init(family.trainable_parameters())
    if opt_state is not None:  # before the compiled step captures the state
        opt.state = tree_unflatten(list(mx.load(str(opt_state)).items()))
    loss_and_grad = nn.value_and_grad(family, lambda f, b: family_loss(f, b, s))
    state = [family.state, opt.state]

    def train_step(batch):
        (loss, parts), grads = loss_and_grad(family, batch)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        opt.update(family, grads)
        return loss, parts

    return opt, mx.compile(train_step, inputs=state, outputs=state), state


def held_out(family: Family, val: np.ndarray, s: Settings, batches: int = 8) -> dict:
    """Held-out losses and teacher-forced agreement (draft and MTP vs the target's argmax)."""
    sums = np.zeros(6)
    for b in range(batches):
        batch = batch_at(val, b, s, salt=1)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        text = family.target.language_model
        hidden = text.model(inputs)
        logits = text.lm_head(hidden)
        greedy = logits.argmax(-1)
        mtp_logits = text.lm_head(
            family.mtp(hidden[:, :-1], text.model.embed_tokens(targets[:, :-1]))
        )
        draft_logits = family.draft(inputs)
        vals = [
            cross_entropy(logits, targets),
            cross_entropy(mtp_logits, targets[:, 1:]),
            cross_entropy(draft_logits, targets),
            # Teacher-forced agreement with the target's own next-token choice.
            (draft_logits.argmax(-1) == greedy).mean(),
            (mtp_logits.argmax(-1) == greedy[:, 1:]).mean(),
            (greedy == targets).mean(),
        ]
        mx.eval(vals)
        sums += np.array([v.item() for v in vals])
    keys = ["target_ce", "mtp_ce", "draft_ce", "draft_agreement", "mtp_agreement", "target_top1"]
    return {k: round(float(v / batches), 4) for k, v in zip(keys, sums)}


def greedy_agreement(family: Family, val: np.ndarray, s: Settings, rows: int = 32,
                     prefix: int = 16, length: int = 64) -> tuple[float, float]:
    """(draft, MTP) agreement with the target along its own greedy continuations of
    held-out prefixes: the first draft of a round at temperature 0 is accepted exactly
    when it agrees there."""
    seq = greedy_continuation(
        family.target, windows(val, [s.seed, 5, 0], rows, prefix), length
    )
    text = family.target.language_model
    chosen = seq[:, prefix:]
    draft = family.draft(seq[:, :-1]).argmax(-1)[:, prefix - 1:]
    # The head at t reads the hidden state at t and token t+1, and predicts token t+2.
    hidden = text.model(seq[:, :-1])
    mtp = text.lm_head(
        family.mtp(hidden[:, :-1], text.model.embed_tokens(seq[:, 1:-1]))
    ).argmax(-1)[:, prefix - 2:]
    agree = [(draft == chosen).mean(), (mtp == chosen).mean()]
    mx.eval(agree)
    return round(agree[0].item(), 4), round(agree[1].item(), 4)


def evaluate(family: Family, tokens: Tokens, s: Settings) -> dict:
    """Held-out figures on code (unprefixed, as in earlier cards) and prose (``prose_``),
    and agreement along the target's greedy continuations (``greedy_``)."""
    metrics = held_out(family, tokens.code_val, s)
    metrics.update({f"prose_{k}": v for k, v in held_out(family, tokens.prose_val, s).items()})
    for name, val in (("code", tokens.code_val), ("prose", tokens.prose_val)):
        draft, mtp = greedy_agreement(family, val, s)
        metrics[f"greedy_draft_{name}"], metrics[f"greedy_mtp_{name}"] = draft, mtp
    return metrics


def save_checkpoint(work: Path, family: Family, opt: optim.Optimizer, step: int,
                    history: list) -> None:
    tmp = work / "checkpoint.tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(tmp / "family.safetensors"), dict(tree_flatten(family.parameters())))
    mx.save_safetensors(str(tmp / "optimizer.safetensors"), dict(tree_flatten(opt.state)))
    (tmp / "progress.json").write_text(json.dumps({"step": step, "history": history}))
    final = work / "checkpoint"
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)


def load_checkpoint(work: Path, family: Family) -> tuple[int, list]:
    ck = work / "checkpoint"
    family.load_weights(str(ck / "family.safetensors"))
    progress = json.loads((ck / "progress.json").read_text())
    return progress["step"], progress["history"]


def half(params: dict) -> dict:
    return {k: v.astype(mx.float16) for k, v in sorted(params.items())}


def export(family: Family, out: Path, tok_dir: Path, tcfg: dict, dcfg: dict) -> None:
    """float16 mlx-layout directories: target (+ optiq/mtp.safetensors) and draft."""
    meta = {"format": "mlx"}
    for name, module, cfg in (("target", family.target, tcfg), ("draft", family.draft, dcfg)):
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        mx.save_safetensors(str(d / "model.safetensors"),
                            half(dict(tree_flatten(module.parameters()))), metadata=meta)
        (d / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(tok_dir / f, d / f)
    (out / "target" / "optiq").mkdir(exist_ok=True)
    mtp = {f"mtp.{k}": v for k, v in tree_flatten(family.mtp.parameters())}
    mx.save_safetensors(str(out / "target" / "optiq" / "mtp.safetensors"), half(mtp),
                        metadata=meta)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f, v in asdict(Settings()).items():
        ap.add_argument(f"--{f.replace('_', '-')}", type=type(v), default=v)
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "train_demo",
                    help="checkpoints and caches (git-ignored)")
    ap.add_argument("--out", type=Path, default=ROOT / "models" / "demo")
    ap.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    ap.add_argument("--export-only", action="store_true",
                    help="export the last checkpoint as it is (e.g. a run stopped early)")
    ap.add_argument("--pilot", type=int, default=0,
                    help="time this many steps, print tokens/s and stop (no export)")
    args = ap.parse_args(argv)
    s = Settings(**{f: getattr(args, f) for f in asdict(Settings())})
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    log = lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)  # noqa: E731

    train_texts, val_texts, corpus_hash = read_corpus()
    log(f"corpus: {len(train_texts) + len(val_texts)} stdlib files, sha256 {corpus_hash[:16]}")
    tok_dir = work / "tokenizer"
    if not (tok_dir / "tokenizer.json").exists():
        train_tokenizer(train_texts, s.vocab_size, tok_dir)
    from tokenizers import Tokenizer

    if Tokenizer.from_file(str(tok_dir / "tokenizer.json")).get_vocab_size() != s.vocab_size:
        raise SystemExit(f"{tok_dir} holds a tokenizer of another size: use another --work")
    prose_train, prose_val, prose_hash, prose_bytes = read_prose()
    log(f"prose: {len(prose_train) + len(prose_val)} pydoc topics, sha256 {prose_hash[:16]}")
    tokens = Tokens(
        *encoded(train_texts, val_texts, tok_dir,
                 work / f"tokens-{corpus_hash[:16]}-{s.vocab_size}.npz"),
        *encoded(prose_train, prose_val, tok_dir,
                 work / f"tokens-prose-{prose_hash[:16]}-{s.vocab_size}.npz"),
    )
    log(f"tokens: code {len(tokens.code):,} train, {len(tokens.code_val):,} held out; "
        f"prose {len(tokens.prose):,} train, {len(tokens.prose_val):,} held out; "
        f"vocab {s.vocab_size}")
    eos_id = json.loads((tok_dir / "tokenizer.json").read_text())["added_tokens"][0]["id"]

    tcfg, dcfg = target_config(s, eos_id), draft_config(s, eos_id)
    mx.random.seed(s.seed)
    family = Family(tcfg, dcfg)
    init_family(family, s.seed)
    counts = {n: sum(v.size for _, v in tree_flatten(getattr(family, n).parameters()))
              for n in ("target", "mtp", "draft")}
    log("parameters: " + ", ".join(f"{n} {c / 1e6:.2f}M" for n, c in counts.items()))

    step, history = 0, []
    resumed = (args.resume or args.export_only) and (work / "checkpoint").exists()
    if resumed:
        step, history = load_checkpoint(work, family)
        log(f"resumed at step {step}")
    plan = phases(s)
    phase = phase_at(plan, step)
    # Each phase starts with a fresh optimizer; mid-phase, the saved one continues.
    opt_state = work / "checkpoint" / "optimizer.safetensors"
    opt, train_step, state = make_trainer(
        family, s, phase, opt_state if resumed and step != phase.start else None
    )

    total = plan[-1].end
    end = step + args.pilot if args.pilot else (step if args.export_only else total)
    ends = {p.end for p in plan}
    t0, seen, first = time.perf_counter(), 0, step
    while step < end:
        if step >= phase.end:
            phase = phase_at(plan, step)
            log(f"phase {phase.name}: steps {phase.start}-{phase.end}, lr {phase.lr}, "
                + ("the draft alone" if phase.draft_only else "all three"))
            opt, train_step, state = make_trainer(family, s, phase)
        loss, parts = train_step(phase_batch(phase, family, tokens, step, s))
        mx.eval(state, loss, parts)
        step += 1
        seen += s.batch_size * s.seq_len
        if step == first + 1:  # leave the first (compiling) step out of the rate
            t0, seen = time.perf_counter(), 0
        if step % 10 == 0 or args.pilot:
            rate = seen / max(1e-9, time.perf_counter() - t0)
            ce_t, ce_m, ce_d, kl = (p.item() for p in parts)
            log(f"step {step}/{end} loss target {ce_t:.3f} mtp {ce_m:.3f} draft {ce_d:.3f} "
                f"kl {kl:.3f} lr {opt.learning_rate.item():.2e} {rate:,.0f} tok/s")
        if args.pilot:
            continue
        if step % s.val_every == 0 or step in ends:
            metrics = evaluate(family, tokens, s)
            history.append({"step": step, **metrics})
            log(f"held out @ {step}: {metrics}")
        if step % s.checkpoint_every == 0 or step in ends:
            save_checkpoint(work, family, opt, step, history)
    if args.pilot:
        return 0

    if not history or history[-1]["step"] != step:
        history.append({"step": step, **evaluate(family, tokens, s)})
    export(family, args.out, tok_dir, tcfg, dcfg)
    files = sorted(p for p in args.out.rglob("*") if p.is_file())
    card = {
        "settings": asdict(s),
        "parameters": counts,
        "corpus": {
            "source": f"Python {platform.python_version()} standard library .py files "
                      f"(excluding {', '.join(sorted(EXCLUDED_DIRS))} and test_*.py)",
            "licence": "PSF-2.0",
            "files": len(train_texts) + len(val_texts),
            "sha256": corpus_hash,
            "train_tokens": int(len(tokens.code)),
            "held_out_tokens": int(len(tokens.code_val)),
            "prose": {
                "source": f"Python {platform.python_version()} pydoc_data/topics.py (the "
                          "language reference's topics as English text)",
                "licence": "PSF-2.0",
                "topics": len(prose_train) + len(prose_val),
                "bytes": prose_bytes,
                "sha256": prose_hash,
                "train_tokens": int(len(tokens.prose)),
                "held_out_tokens": int(len(tokens.prose_val)),
            },
        },
        "phases": [
            {**asdict(p), "tokens": max(0, min(step, p.end) - p.start) * s.batch_size * s.seq_len}
            for p in plan
        ],
        "steps_done": step,
        "final_held_out": history[-1] if history else None,
        "history": history,
        "size_bytes": sum(p.stat().st_size for p in files),
        "mlx": mx.__version__,
    }
    card_path = args.out / "card.json"
    if card_path.exists():  # keep measurements made by bench/demo_sweep.py
        card = {**json.loads(card_path.read_text()), **card}
    card_path.write_text(json.dumps(card, indent=2) + "\n")
    log(f"wrote {args.out} ({card['size_bytes'] / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
