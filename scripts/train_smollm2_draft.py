"""Train the draft model of the smollm2 family, distilled from SmolLM2-135M-Instruct.

The target is what ``specdeck fetch smollm2`` converts into the user's cache (30 llama
layers, hidden 576, a tied 49,152 x 576 embedding). A draft pays off only while a step of
it costs a small share of a target step, and at this size the output layer dominates any
small draft: so the draft is two llama layers of the target's width that reuse the
target's embedding and output layer (tied, frozen), initialised from target layers
(``init_layers``). Only those two layers and the final norm are trained and shipped
(``models/smollm2-draft/draft.safetensors``, float16, ~14 MB); ``specdeck fetch``
assembles the full draft from them and the target's embedding.

Two training phases, on text every machine has offline:

1. ``train`` (distillation): KL from the target's next-token distribution (temperature 1,
   every position alike), half of each batch each:

   - ``text``: windows of the Python standard library's sources and of the language
     reference's topics that ``pydoc`` ships (the demo family's corpus);
   - ``chat``: the target's own greedy answers (temperature 0, what speculation at
     temperature 0 accepts) to chat prompts built from the standard library (module and
     function docstrings, pydoc topics) and everyday subjects, each asked in several
     phrasings; loss on the answer.

2. ``policy``: cross-entropy to those greedy answers alone. No teacher pass is needed
   (the answers are the labels), so a step costs about a third of a distillation step
   on this CPU, and it trains exactly what temperature 0 accepts.

Chat prompts used to measure the draft (``HELD_OUT_PROMPTS`` and those in ``prompts/``)
are never trained on: ``chat_prompts`` leaves them out.

Phases (``--phase``; each resumable, results under ``build/train_smollm2_draft/``):
``generate`` (the target's answers, appended to a JSONL as each one ends),
``train`` (on the answers there so far; checkpoint every ``checkpoint_every`` steps,
``--resume``), ``policy`` (from the distilled weights on every answer there so far,
resumable; a larger ``--policy-steps`` continues a finished run), ``export``
(weights, config, the vocabulary file and ``card.json``; ``train`` and ``policy`` export
when they finish) and ``vocab`` (the vocabulary file alone).
``python scripts/train_smollm2_draft.py`` runs them all, resuming what is there. Needs
the fetched target: ``specdeck fetch smollm2``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm import load
from mlx_lm.generate import BatchGenerator
from mlx_lm.models import llama

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_demo import corpus_files, read_corpus, read_prose, schedule  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "train_smollm2_draft"
OUT = ROOT / "models" / "smollm2-draft"

#: Chat prompts that measure the draft and are never trained on (with ``prompts/``).
HELD_OUT_PROMPTS = [
    "What is the capital of France? Answer in one word.",
    "Explain what a hash map is in two sentences.",
    "Give me three tips for writing clear emails.",
    "Why is the sky blue? Keep it short.",
    "Write a short poem about the sea.",
    "What are the benefits of regular exercise?",
    "How do I reverse a list in Python?",
    "Describe the water cycle for a ten-year-old.",
    # Written for the second run and measured with ``bench/smollm2_sweep.py --prompt``.
    "How do I make a good cup of tea?",
    "Summarise the story of Cinderella in three sentences.",
    "Name three animals that live in the desert and one fact about each.",
]
#: Standard-library modules whose import opens a window, prints or changes the process.
NOT_IMPORTED = {"this", "antigravity", "idlelib", "tkinter", "turtle", "turtledemo",
                "pydoc", "webbrowser", "ensurepip", "venv", "lib2to3", "test"}
#: Everyday subjects for chat prompts beyond Python, and the phrasings they are asked in.
EVERYDAY_TOPICS = [
    "cooking rice", "saving money", "learning a new language", "sleeping better",
    "starting a vegetable garden", "running a first 5k", "keeping a houseplant alive",
    "planning a birthday party", "studying for an exam", "giving a presentation",
    "moving to a new city", "training a puppy", "making new friends", "riding a bicycle",
    "baking bread", "reading more books", "drinking enough water", "taking photos",
    "packing for a trip", "writing a cover letter", "managing stress", "learning to swim",
    "cleaning a kitchen", "choosing a laptop", "painting a room", "playing chess",
    "making coffee", "budgeting for groceries", "recycling at home", "camping in the rain",
    "the moon", "volcanoes", "the human heart", "electricity", "rainbows", "bees",
    "the internet", "photosynthesis", "earthquakes", "the ancient Romans", "glaciers",
    "the printing press", "black holes", "tides", "vaccines", "money", "maps", "trains",
    "learning to cook", "a job interview", "time management", "public speaking",
    "meditation", "a healthy breakfast", "walking every day", "decluttering a closet",
    "growing tomatoes", "fixing a flat tyre", "knitting", "writing a diary",
    "learning the guitar", "caring for a cat", "birdwatching", "hiking safely",
    "composting", "buying a used car", "renting a first flat", "working from home",
    "team meetings", "giving feedback", "asking for a raise", "volunteering",
    "the solar system", "dinosaurs", "the ocean", "clouds", "thunderstorms", "magnets",
    "gravity", "the human brain", "sleep", "DNA", "the immune system", "climate change",
    "renewable energy", "the water in our bodies", "ants", "whales", "forests",
    "deserts", "the Great Wall of China", "the pyramids of Egypt", "the Olympic Games",
    "the history of writing", "airplanes", "bridges", "the telephone", "light bulbs",
    "batteries", "microwaves", "coffee beans", "chocolate", "honey", "cheese",
    "recursion in programming", "a linked list", "binary search", "version control",
    "unit tests", "an API", "a database index", "sorting algorithms", "caching",
    "encryption", "passwords", "a compiler", "regular expressions", "JSON files",
    "cloud computing", "machine learning", "open source software", "spreadsheets",
    "debugging code", "a stack and a queue", "loops in Python", "Python functions",
    "object-oriented programming", "reading an error message", "writing clean code",
    "the command line", "web browsers", "keyboard shortcuts", "backing up files",
]
EVERYDAY_TEMPLATES = [
    "Give me three tips for {}.",
    "Write a short paragraph about {}.",
    "What are common mistakes people make with {}?",
    "Explain {} to a child.",
    "Write a haiku about {}.",
    "Tell me an interesting fact about {}.",
    "What should a beginner know about {}?",
    "Describe {} in two sentences.",
    "Why does {} matter? Keep it brief.",
    "List four facts about {}.",
    "How would you explain {} to a beginner, in a short paragraph?",
    "Write a limerick about {}.",
    "What are the pros and cons of {}?",
    "Answer briefly: what is the main idea behind {}?",
    "Write a note to a friend recommending {}.",
    "Ask me three quiz questions about {}.",
    "Give a step-by-step guide to {}.",
    "Write a very short story about {}.",
    "Summarise the key points about {}.",
    "What questions do people often ask about {}?",
    "Write a friendly tweet about {}.",
    "Explain {} in simple terms.",
    "What is the history of {}, briefly?",
    "Write a short dialogue between two friends about {}.",
]


@dataclass
class Settings:
    """Everything that decides the result; recorded in the card."""

    seed: int = 0
    layers: int = 2
    #: Target layers the draft's layers start from (of the pairs tried, (0, 1) agreed
    #: with the target most before training: 5 % against 0-0.3 % for (0, 29), (28, 29)).
    init_layers: tuple[int, ...] = (0, 1)
    seq_len: int = 160
    batch_size: int = 8
    steps: int = 150
    lr: float = 8e-4
    warmup: int = 20
    weight_decay: float = 0.0
    #: Chat prompts the target answers for the ``chat`` half of the batches.
    chat_prompts: int = 4000
    answer_tokens: int = 112
    #: Sequences decoded together by mlx-lm's batch generator (see ``generate_answers``).
    generate_batch: int = 64
    checkpoint_every: int = 25
    #: The ``policy`` phase: cross-entropy to the target's greedy answers alone.
    policy_steps: int = 100
    policy_batch: int = 16
    policy_lr: float = 5e-4
    #: The tokens the draft drafts from (``engines.draft_vocab``): the most frequent of
    #: its training data, the answers and the text weighing in equally.
    draft_vocab: int = 16384


# ----------------------------------------------------------------------------- data


def _first_paragraph(doc: str | None) -> str:
    text = (doc or "").strip().split("\n\n")[0]
    return " ".join(text.split())


def chat_prompts(s: Settings) -> list[str]:
    """Training prompts, shuffled, none of them held out: every everyday and pydoc-topic
    prompt, then questions about standard-library modules and functions up to
    ``s.chat_prompts``."""
    import importlib
    import inspect
    from pydoc_data.topics import topics

    import specdeck.prompts as builtin

    rng = random.Random(s.seed)
    general = [template.format(topic)
               for topic in EVERYDAY_TOPICS for template in EVERYDAY_TEMPLATES]
    for topic in sorted(topics):
        name = topic.replace("-", " ")
        general += [f"Explain {name} in Python in simple terms.",
                    f"What should a beginner know about {name} in Python?"]
    code: list[str] = []
    modules = sorted(m for m in sys.stdlib_module_names
                     if not m.startswith("_") and m not in NOT_IMPORTED)
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - some stdlib modules need a platform or a GUI
            continue
        about = _first_paragraph(module.__doc__)
        if len(about) > 20:
            code += [f"What is the Python module {name} for?",
                     f"Rewrite this more simply: {about[:300]}"]
        for fname, func in sorted(vars(module).items()):
            if fname.startswith("_") or not inspect.isfunction(func):
                continue
            if getattr(func, "__module__", None) != name:
                continue
            doc = _first_paragraph(func.__doc__)
            if len(doc) < 25:
                continue
            code += [f"What does {name}.{fname} do in Python?",
                     f"Summarise in one sentence: {doc[:300]}",
                     f"Write a short Python example that uses {name}.{fname}."]
    held = set(HELD_OUT_PROMPTS) | {p.text.strip() for p in builtin.load_prompts().values()}
    general = sorted(set(general) - held)
    code = sorted(set(code) - held - set(general))
    rng.shuffle(code)
    asks = general + code[: max(0, s.chat_prompts - len(general))]
    rng.shuffle(asks)
    return asks


def chat_ids(tokenizer, prompt: str) -> list[int]:
    return list(tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True))


def generate_answers(target, tokenizer, prompts: list[str], s: Settings, out: Path) -> None:
    """The target's greedy answers, each appended to ``out`` (JSONL) as soon as it ends;
    prompts already answered there are skipped, so an interrupted run resumes.

    mlx-lm's batch generator decodes ``generate_batch`` answers together and refills a
    slot from the queue as soon as its answer ends, so the batch stays full."""
    done = {json.loads(line)["prompt"] for line in out.open()} if out.exists() else set()
    todo = [p for p in prompts if p not in done]
    if not todo:
        return
    eos = tokenizer.eos_token_id
    ids = [chat_ids(tokenizer, p) for p in todo]
    gen = BatchGenerator(target, max_tokens=s.answer_tokens,
                         stop_tokens=[[t] for t in tokenizer.eos_token_ids],
                         completion_batch_size=s.generate_batch,
                         prefill_batch_size=min(s.generate_batch, 32))
    uids = gen.insert(ids, [s.answer_tokens] * len(ids))
    which = dict(zip(uids, range(len(ids))))
    answers: dict[int, list[int]] = {uid: [] for uid in uids}
    start, finished, tokens = time.time(), 0, 0
    with out.open("a") as f:
        while responses := gen.next_generated():
            for r in responses:
                if r.finish_reason != "stop":
                    answers[r.uid].append(r.token)
                    tokens += 1
                if r.finish_reason is None:
                    continue
                answer = answers.pop(r.uid)
                if len(answer) < s.answer_tokens:
                    answer = [*answer, eos]
                i = which[r.uid]
                f.write(json.dumps({"prompt": todo[i], "prompt_ids": ids[i],
                                    "answer": answer}) + "\n")
                f.flush()
                finished += 1
                if finished % s.generate_batch == 0 or finished == len(todo):
                    elapsed = time.time() - start
                    print(f"generate: {len(done) + finished}/{len(prompts)} answered, "
                          f"{tokens / elapsed:.0f} tok/s, {elapsed:.0f} s", flush=True)
    gen.close()


def read_answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open()] if path.exists() else []


def text_tokens(tokenizer, s: Settings) -> tuple[np.ndarray, str]:
    """The standard library's code and the pydoc topics, tokenized with the target's
    tokenizer (cached under WORK), and a hash of the sources."""
    cache = WORK / "text.npy"
    code, _, code_hash = read_corpus()
    prose, _, prose_hash, _ = read_prose()
    digest = hashlib.sha256((code_hash + prose_hash).encode()).hexdigest()
    if cache.exists() and (WORK / "text.sha256").read_text() == digest:
        return np.load(cache), digest
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    for text in code + prose:
        ids += tokenizer.encode(text) + [eos]
    data = np.array(ids, dtype=np.int32)
    np.save(cache, data)
    (WORK / "text.sha256").write_text(digest)
    return data, digest


def batch(step: int, s: Settings, text: np.ndarray, answers: list[dict]
          ) -> tuple[mx.array, mx.array]:
    """(tokens (B, L+1), loss mask (B, L)): half text windows, half chat rows (prompt and
    answer, padded; loss on the answer's positions)."""
    rng = np.random.default_rng([s.seed, step])
    n = s.seq_len + 1
    rows, masks = [], []
    chat_rows = s.batch_size // 2 if answers else 0
    for _ in range(s.batch_size - chat_rows):
        at = int(rng.integers(0, len(text) - n))
        rows.append(text[at : at + n])
        masks.append(np.ones(s.seq_len, np.float32))
    for i in rng.integers(0, len(answers), chat_rows):
        entry = answers[int(i)]
        ids = (entry["prompt_ids"] + entry["answer"])[:n]
        mask = np.zeros(s.seq_len, np.float32)
        mask[len(entry["prompt_ids"]) - 1 : len(ids) - 1] = 1.0
        rows.append(np.array(ids + [0] * (n - len(ids)), np.int32))
        masks.append(mask)
    return mx.array(np.stack(rows)), mx.array(np.stack(masks))


# ---------------------------------------------------------------------------- model


def draft_config(target_config: dict, s: Settings) -> dict:
    keep = ("model_type", "hidden_size", "intermediate_size", "num_attention_heads",
            "num_key_value_heads", "head_dim", "rms_norm_eps", "vocab_size",
            "max_position_embeddings", "rope_theta", "rope_parameters",
            "tie_word_embeddings", "bos_token_id", "eos_token_id")
    config = {k: target_config[k] for k in keep if k in target_config}
    return {"architectures": ["LlamaForCausalLM"], **config, "num_hidden_layers": s.layers}


def make_draft(target: nn.Module, config: dict, s: Settings) -> nn.Module:
    """The draft: the target's embedding (frozen), ``s.layers`` layers copied from the
    target's ``init_layers``, the target's final norm."""
    draft = llama.Model(llama.ModelArgs.from_dict(config))
    draft.model.embed_tokens = target.model.embed_tokens
    for i, source in enumerate(s.init_layers[: s.layers]):
        draft.model.layers[i].update(target.model.layers[source].parameters())
    draft.model.norm.update(target.model.norm.parameters())
    draft.freeze()
    for layer in draft.model.layers:
        layer.unfreeze()
    draft.model.norm.unfreeze()
    mx.eval(draft.parameters())
    return draft


def shipped(draft: nn.Module) -> dict[str, mx.array]:
    """The draft's own tensors: everything but the embedding it shares with the target."""
    return {k: v for k, v in tree_flatten(draft.parameters())
            if not k.startswith("model.embed_tokens")}


def kl_loss(draft: nn.Module, tokens: mx.array, teacher: mx.array, mask: mx.array):
    """Masked mean KL(target || draft) per position, and the greedy agreement."""
    logq = nn.log_softmax(draft(tokens).astype(mx.float32), axis=-1)
    p = mx.exp(teacher)
    kl = (p * (teacher - logq)).sum(-1)
    agree = (logq.argmax(-1) == teacher.argmax(-1)).astype(mx.float32)
    total = mx.maximum(mask.sum(), 1.0)
    return (kl * mask).sum() / total, (agree * mask).sum() / total


def teacher_logprobs(target: nn.Module, tokens: mx.array) -> mx.array:
    out = nn.log_softmax(target(tokens).astype(mx.float32), axis=-1)
    mx.eval(out)
    return mx.stop_gradient(out)


def evaluate(target, draft, answers: list[dict], s: Settings) -> dict:
    """Teacher-forced greedy agreement and KL on held-out answers (one row each)."""
    agree = kl = weight = 0.0
    for entry in answers:
        ids = entry["prompt_ids"] + entry["answer"]
        tokens = mx.array([ids[:-1]])
        mask = mx.zeros((1, len(ids) - 1))
        mask[:, len(entry["prompt_ids"]) - 1 :] = 1.0
        loss, agreement = kl_loss(draft, tokens, teacher_logprobs(target, tokens), mask)
        n = len(entry["answer"])
        kl += loss.item() * n
        agree += agreement.item() * n
        weight += n
    return {"held_out_kl": kl / weight, "held_out_agreement": agree / weight,
            "held_out_tokens": int(weight)}


# ---------------------------------------------------------------------------- phases


def save_checkpoint(draft, opt, step: int, log: list, name: str = "ckpt") -> None:
    tmp = WORK / f"{name}.tmp"
    tmp.mkdir(exist_ok=True)
    mx.save_safetensors(str(tmp / "draft.safetensors"), shipped(draft))
    mx.save_safetensors(str(tmp / "opt.safetensors"), dict(tree_flatten(opt.state)))
    (tmp / "state.json").write_text(json.dumps({"step": step, "log": log}))
    final = WORK / name
    if final.exists():
        old = WORK / f"{name}.old"
        final.rename(old)
        tmp.rename(final)
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    else:
        tmp.rename(final)


def train(target, draft, text, answers, s: Settings, resume: bool) -> list:
    lr = schedule(s.lr, s.warmup, s.steps)
    opt = optim.AdamW(learning_rate=lr, weight_decay=s.weight_decay)
    opt.init(draft.trainable_parameters())
    step, log = 0, []
    ckpt = WORK / "ckpt"
    if resume and ckpt.exists():
        draft.load_weights(list(mx.load(str(ckpt / "draft.safetensors")).items()), strict=False)
        opt.state = tree_unflatten(list(mx.load(str(ckpt / "opt.safetensors")).items()))
        state = json.loads((ckpt / "state.json").read_text())
        step, log = state["step"], state["log"]
        print(f"train: resumed at step {step}", flush=True)
    loss_and_grad = nn.value_and_grad(draft, kl_loss)
    start = time.time()
    while step < s.steps:
        tokens, mask = batch(step, s, text, answers)
        inputs = tokens[:, :-1]
        teacher = teacher_logprobs(target, inputs)
        (loss, agree), grads = loss_and_grad(draft, inputs, teacher, mask)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        opt.update(draft, grads)
        mx.eval(draft.parameters(), opt.state, loss, agree)
        step += 1
        log.append([step, round(loss.item(), 4), round(agree.item(), 4)])
        if step % 5 == 0:
            print(f"train: step {step}/{s.steps} kl {loss.item():.3f} "
                  f"agree {agree.item():.3f} {time.time() - start:.0f} s", flush=True)
        if step % s.checkpoint_every == 0 or step == s.steps:
            save_checkpoint(draft, opt, step, log)
    return log


def answer_batch(step: int, s: Settings, answers: list[dict]
                 ) -> tuple[mx.array, mx.array, mx.array]:
    """(inputs, picks, targets) of ``policy_batch`` chat rows, padded to the longest:
    ``picks`` are the flat positions of the answers' tokens in ``inputs`` (where the loss
    is taken) and ``targets`` the target's own greedy tokens there."""
    rng = np.random.default_rng([s.seed, 7, step])
    rows = [answers[int(i)] for i in rng.integers(0, len(answers), s.policy_batch)]
    ids = [(r["prompt_ids"] + r["answer"])[: s.seq_len + 1] for r in rows]
    width = max(len(x) for x in ids) - 1
    inputs = np.zeros((len(ids), width), np.int32)
    picks: list[int] = []
    targets: list[int] = []
    for i, (row, x) in enumerate(zip(rows, ids)):
        inputs[i, : len(x) - 1] = x[:-1]
        first = len(row["prompt_ids"]) - 1
        picks += range(i * width + first, i * width + len(x) - 1)
        targets += x[first + 1 :]
    return mx.array(inputs), mx.array(picks), mx.array(targets)


def ce_loss(draft: nn.Module, inputs: mx.array, picks: mx.array, targets: mx.array):
    """Mean cross-entropy to the target's greedy tokens at ``picks``, and the agreement.
    The tied 49,152-wide output layer, most of a step's cost, runs at those positions
    only (not at the prompt's)."""
    hidden = draft.model(inputs)
    hidden = hidden.reshape(-1, hidden.shape[-1])[picks]
    logits = draft.model.embed_tokens.as_linear(hidden).astype(mx.float32)
    ce = nn.losses.cross_entropy(logits, targets, reduction="mean")
    agree = (logits.argmax(-1) == targets).astype(mx.float32).mean()
    return ce, agree


def train_policy(draft, answers: list[dict], s: Settings) -> list:
    """The ``policy`` phase: the draft alone on the target's greedy answers (no teacher
    pass: the labels are the answers), from the distilled weights; resumable."""
    opt = optim.AdamW(learning_rate=schedule(s.policy_lr, s.warmup, s.policy_steps))
    opt.init(draft.trainable_parameters())
    step, log = 0, []
    ckpt = WORK / "ckpt-policy"
    start_from = ckpt if ckpt.exists() else WORK / "ckpt"
    draft.load_weights(list(mx.load(str(start_from / "draft.safetensors")).items()),
                       strict=False)
    if ckpt.exists():
        opt.state = tree_unflatten(list(mx.load(str(ckpt / "opt.safetensors")).items()))
        state = json.loads((ckpt / "state.json").read_text())
        step, log = state["step"], state["log"]
        print(f"policy: resumed at step {step}", flush=True)
    loss_and_grad = nn.value_and_grad(draft, ce_loss)
    start = time.time()
    while step < s.policy_steps:
        inputs, picks, targets = answer_batch(step, s, answers)
        (loss, agree), grads = loss_and_grad(draft, inputs, picks, targets)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        opt.update(draft, grads)
        mx.eval(draft.parameters(), opt.state, loss, agree)
        step += 1
        log.append([step, round(loss.item(), 4), round(agree.item(), 4)])
        print(f"policy: step {step}/{s.policy_steps} ce {loss.item():.3f} "
              f"agree {agree.item():.3f} {time.time() - start:.0f} s", flush=True)
        if step % s.checkpoint_every == 0 or step == s.policy_steps:
            save_checkpoint(draft, opt, step, log, "ckpt-policy")
    return log


def write_vocabulary(text: np.ndarray, answers: list[dict], held: list[dict], s: Settings
                     ) -> dict:
    """The draft's vocabulary file: the ``s.draft_vocab`` most frequent tokens of its
    training data (each source's frequencies normalised, so the 2.3M tokens of text do
    not drown the answers); returns its card entry, with the share of the held-out
    answers' tokens it holds."""
    from specdeck.engines.models.draft_vocab_file import DRAFT_VOCAB_FILE

    size = int(max(text.max(), *(max(a["answer"]) for a in answers)) + 1)
    said = np.bincount(np.concatenate([a["answer"] for a in answers]), minlength=size)
    read = np.bincount(text, minlength=size)
    weight = said / max(said.sum(), 1) + read / max(read.sum(), 1)
    tokens = sorted(int(t) for t in np.argsort(-weight, kind="stable")[: s.draft_vocab])
    OUT.mkdir(parents=True, exist_ok=True)
    note = (f"the {len(tokens):,} most frequent tokens of the draft's training data "
            "(scripts/train_smollm2_draft.py): the draft proposes only these")
    (OUT / DRAFT_VOCAB_FILE).write_text(json.dumps({"note": note, "tokens": tokens}) + "\n")
    kept = set(tokens)
    held_tokens = [t for a in held for t in a["answer"]]
    coverage = sum(t in kept for t in held_tokens) / max(len(held_tokens), 1)
    print(f"vocabulary: {len(tokens)} tokens, {coverage:.1%} of the held-out answers' "
          "tokens among them", flush=True)
    return {"tokens": len(tokens), "held_out_coverage": round(coverage, 4)}


def export(draft, config: dict, s: Settings, card: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    weights = {k: v.astype(mx.float16) for k, v in shipped(draft).items()}
    mx.save_safetensors(str(OUT / "draft.safetensors"), weights, metadata={"format": "mlx"})
    (OUT / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (OUT / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    print(f"export: wrote {OUT}", flush=True)


def main(argv: list[str] | None = None) -> int:
    from specdeck.engines.models.families import require_family

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phase",
                        choices=["all", "generate", "train", "policy", "export", "vocab"],
                        default="all")
    parser.add_argument("--resume", action="store_true", help="continue from build/")
    parser.add_argument("--steps", type=int, help="training steps (default: Settings)")
    parser.add_argument("--chat-prompts", type=int, help="prompts the target answers")
    parser.add_argument("--policy-steps", type=int, help="answers-only steps (default: Settings)")
    parser.add_argument("--policy-lr", type=float, help="answers-only peak learning rate")
    args = parser.parse_args(argv)
    s = Settings()
    if args.steps:
        s.steps = args.steps
    if args.chat_prompts:
        s.chat_prompts = args.chat_prompts
    if args.policy_steps:
        s.policy_steps = args.policy_steps
    if args.policy_lr:
        s.policy_lr = args.policy_lr
    WORK.mkdir(parents=True, exist_ok=True)
    mx.random.seed(s.seed)
    family = require_family("smollm2", need_draft=False)
    target, tokenizer = load(family.target)
    target.freeze()
    config = draft_config(json.loads((Path(family.target) / "config.json").read_text()), s)
    timings: dict[str, float] = {}

    answers_file, held_file = WORK / "answers.jsonl", WORK / "held_out.jsonl"
    generate_answers(target, tokenizer, HELD_OUT_PROMPTS, s, held_file)  # quick
    if args.phase in ("all", "generate"):
        t = time.time()
        generate_answers(target, tokenizer, chat_prompts(s), s, answers_file)
        timings["generate_seconds"] = round(time.time() - t, 1)
    text, text_hash = text_tokens(tokenizer, s)
    answers, held = read_answers(answers_file), read_answers(held_file)
    if args.phase == "vocab":  # the vocabulary file alone, into the card as it stands
        card = json.loads((OUT / "card.json").read_text())
        card["draft_vocabulary"] = write_vocabulary(text, answers, held, s)
        card["settings"]["draft_vocab"] = s.draft_vocab
        (OUT / "card.json").write_text(json.dumps(card, indent=2) + "\n")
        return 0
    draft = make_draft(target, config, s)
    before = evaluate(target, draft, held, s) if args.phase != "generate" else None
    log: list = []
    if args.phase in ("all", "train"):
        t = time.time()
        log = train(target, draft, text, answers, s, resume=args.resume or args.phase == "all")
        timings["train_seconds"] = round(time.time() - t, 1)
    policy_log: list = []
    if args.phase in ("all", "policy"):
        t = time.time()
        policy_log = train_policy(draft, answers, s)
        timings["policy_seconds"] = round(time.time() - t, 1)
    if args.phase in ("all", "train", "policy", "export"):
        for name in ("ckpt", "ckpt-policy"):  # the later phase's weights win
            ckpt = WORK / name
            if (ckpt / "draft.safetensors").exists():
                draft.load_weights(list(mx.load(str(ckpt / "draft.safetensors")).items()),
                                   strict=False)
                rows = json.loads((ckpt / "state.json").read_text())["log"]
                log, policy_log = (rows, policy_log) if name == "ckpt" else (log, rows)
        previous = json.loads((OUT / "card.json").read_text()) if (OUT / "card.json").exists() else {}
        card = {
            "settings": asdict(s),
            "target": "SmolLM2-135M-Instruct (specdeck fetch smollm2)",
            "parameters_trained": sum(v.size for v in shipped(draft).values()),
            "corpus": {"text_tokens": int(text.size), "text_sha256": text_hash,
                       "code_files": len(corpus_files()),
                       "chat_answers": len(answers),
                       "chat_answer_tokens": sum(len(a["answer"]) for a in answers)},
            "held_out_prompts": HELD_OUT_PROMPTS,
            "untrained": before or previous.get("untrained"),
            "trained": evaluate(target, draft, held, s),
            "steps_done": log[-1][0] if log else 0,
            "policy_steps_done": policy_log[-1][0] if policy_log else 0,
            "loss_log_every_25": [row for row in log if row[0] % 25 == 0],
            "policy_log_every_10": [row for row in policy_log if row[0] % 10 == 0],
            "timings": {**previous.get("timings", {}), **timings},
            # The account of the runs and what they show, written by hand: kept.
            **{key: previous[key] for key in ("note", "conclusion") if key in previous},
            "machine": f"{platform.machine()} {platform.system()}, mlx {mx.__version__}",
            "draft_vocabulary": write_vocabulary(text, answers, held, s),
        }
        export(draft, config, s, card)
    return 0


if __name__ == "__main__":
    sys.exit(main())
