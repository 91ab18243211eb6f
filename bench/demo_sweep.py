"""Measure the built-in demo family: acceptance, the k sweep, and what OpenBLAS buys.

1. A sweep (``sweep``) on the structured-code and open-ended prose prompts:
   plain, ``draft`` at k = 1, 2, 4, 8, 16 and ``mtp`` at depth 1, 2; temperature 0,
   interleaved repetitions, median tokens/s, speedup over plain, MAD-based robust CV,
   and whether every output equals plain decoding token for token.
2. Where a round's time goes on the hybrid target (drafting, verifying, rewinding from
   the verify pass's captured states, or restoring and replaying with capture off).
3. Plain decoding tokens/s and a float32 matrix product's GFLOP/s with and without the
   system OpenBLAS preloaded, each in its own subprocess, side by side in this run.

``--card`` records the figures in ``models/demo/card.json`` and renders
``models/demo/MODEL_CARD.md`` from it.

    python bench/demo_sweep.py --reps 5 --max-tokens 128 --card
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specdeck.engines.models.demo import DEMO_DIR, require_demo_models  # noqa: E402

PROMPTS = ("code", "prose")
#: What the issue asks the family to show (the card reports each against its figure).
GOALS = {"draft_k2_code": 0.50, "mtp_d1_code": 0.40, "cv": 0.05}
#: How the model card names each kind of training data (``Phase.data`` in train_demo.py).
PHASE_DATA = {
    "code": "code windows",
    "mixed": "half code, half prose windows",
    "policy": "{policy_rows} of {batch_size} rows: the frozen target's greedy continuations "
              "of {policy_prefix}-token code and prose prefixes (new every step); the rest "
              "half code, half prose windows",
}


def sweep(reps: int, max_tokens: int, ks: list[int], depths: list[int]) -> list[dict]:
    from specdeck.engines.core.requests import SweepPrompt, SweepRequest
    from specdeck.prompts import get_prompt

    demo = require_demo_models()
    return sweep_cells(SweepRequest(
        target=demo.target, draft=demo.draft,
        prompts=[SweepPrompt(key, get_prompt(key).text, key) for key in PROMPTS],
        strategies=["draft", "mtp"], ks=ks, depths=depths, reps=reps,
        max_tokens=max_tokens,
    ))


def sweep_cells(request) -> list[dict]:
    """Run a sweep (an ``engines.requests.SweepRequest``) with its progress on stderr;
    its cells as dicts."""
    from specdeck.engines.runs.sweep import run_sweep
    from specdeck.commands.progress_line import ProgressLine

    line = ProgressLine(every=0.0)
    cells, complete = run_sweep(
        request, progress=lambda p: line.show(f"{p.done}/{p.total} {p.label}",
                                              last=p.done == p.total))
    line.end()
    if not complete:
        raise SystemExit("sweep interrupted")
    return [asdict(c) for c in cells]


def plain_rate(max_tokens: int, reps: int) -> float:
    """Median plain-decoding tokens/s of the demo target in this process."""
    from specdeck.engines.runs.compare import encode_prompt
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.models.loading import ModelStore
    from specdeck.engines.core.stats import compute_stats, median
    from specdeck.engines.decode.run import Models, run_strategy
    from specdeck.prompts import get_prompt

    target = ModelStore().get(require_demo_models().target)
    ids = encode_prompt(target.tokenizer, get_prompt("code").text)
    settings = DecodeSettings(max_tokens=max_tokens, stop_at_eos=False)
    list(run_strategy("plain", Models(target), ids, settings))  # warm-up
    rates = [
        compute_stats(list(run_strategy("plain", Models(target), ids, settings))).tokens_per_s
        for _ in range(reps)
    ]
    return median(rates)


def matmul_gflops(n: int = 1024, reps: int = 5) -> float:
    """float32 n x n x n matrix product speed in this process (median of ``reps``)."""
    import mlx.core as mx
    from specdeck.engines.core.stats import median

    a, b = mx.random.normal((n, n)), mx.random.normal((n, n))
    mx.eval(a @ b)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        mx.eval(a @ b)
        times.append(time.perf_counter() - start)
    return 2 * n**3 / median(times) / 1e9


def round_costs(max_tokens: int) -> dict:
    """Where a speculative round's time goes on the hybrid target (code prompt, k = 2):
    a round whose drafts were all kept verifies once; a rejection rewinds the gated delta
    net layers to the state the verify pass kept (``capture``), or, with capture
    turned off as for other recurrent layouts, restores the state and replays the kept
    tokens: a second target pass."""
    from specdeck.engines.decode import speculative
    from specdeck.engines.runs.compare import encode_prompt, load_models
    from specdeck.engines.core.requests import CompareRequest
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.core.events import Round
    from specdeck.engines.models.loading import ModelStore
    from specdeck.engines.core.stats import median
    from specdeck.engines.decode.run import run_strategy
    from specdeck.prompts import get_prompt

    demo = require_demo_models()
    models = load_models(CompareRequest(target=demo.target, draft=demo.draft,
                                        strategies=["plain", "draft"], prompt="-"),
                         ModelStore())
    ids = encode_prompt(models.target.tokenizer, get_prompt("code").text)
    settings = DecodeSettings(max_tokens=max_tokens, stop_at_eos=False, num_draft_tokens=2)

    def rounds(name: str) -> list[Round]:
        list(run_strategy(name, models, ids, settings))  # warm-up
        return [e for e in run_strategy(name, models, ids, settings) if isinstance(e, Round)]

    def verify(kind: str, of: list[Round]) -> float | None:
        chosen = [r.verify_seconds for r in of if r.drafted and r.rollback == kind]
        return median(chosen) if chosen else None

    plain = rounds("plain")
    captured = rounds("draft")
    supports = speculative.supports_capture
    speculative.supports_capture = lambda model: False
    try:
        replayed = rounds("draft")
    finally:
        speculative.supports_capture = supports
    return {
        "plain_seconds_per_token": median([r.verify_seconds for r in plain]),
        "draft_seconds_per_round_k2": median([r.draft_seconds for r in captured]),
        "verify_seconds_all_kept": verify("none", captured),
        "verify_seconds_captured": verify("captured", captured),
        "verify_seconds_with_replay": verify("replay", replayed),
        "rounds_with_rejection": sum(r.rollback == "captured" for r in captured) / len(captured),
    }


def blas_comparison(max_tokens: int, reps: int) -> dict:
    """Plain tokens/s with and without OpenBLAS preloaded, one subprocess each."""
    from specdeck.blas import openblas_path

    lib = openblas_path()
    if lib is None:
        return {"openblas": None}
    base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = {"openblas": str(lib)}
    for name, env in (("reference_blas", base), ("openblas", {**base, "LD_PRELOAD": str(lib)})):
        child = subprocess.run(
            [sys.executable, __file__, "--plain-rate", "--max-tokens", str(max_tokens),
             "--reps", str(reps)],
            env=env, capture_output=True, text=True, check=True,
        )
        measured = json.loads(child.stdout.strip().splitlines()[-1])
        out[f"{name}_tokens_per_s"] = measured["tokens_per_s"]
        out[f"{name}_matmul_gflops"] = measured["matmul_gflops"]
    out["ratio"] = out["openblas_tokens_per_s"] / out["reference_blas_tokens_per_s"]
    out["matmul_ratio"] = out["openblas_matmul_gflops"] / out["reference_blas_matmul_gflops"]
    return out


def print_cells(cells: list[dict]) -> None:
    print(f"{'prompt':<6} {'setting':<12} {'tok/s':>7} {'speedup':>7} {'CV':>6} "
          f"{'accept':>6} {'= plain':>7}")
    for c in cells:
        acc = "-" if c["acceptance_rate"] is None else f"{c['acceptance_rate']:.0%}"
        print(f"{c['prompt']:<6} {c['label']:<12} {c['median_tokens_per_s']:>7.1f} "
              f"{c['speedup']:>6.2f}x {c['cv']:>6.3f} {acc:>6} "
              f"{'' if c['correct'] is None else ('yes' if c['correct'] else 'NO'):>7}")


def summary(cells: list[dict]) -> dict:
    """The figures the issue asks for, each next to its goal."""
    def cell(prompt: str, label: str) -> dict:
        return next(c for c in cells if c["prompt"] == prompt and c["label"] == label)

    drafts = [c for c in cells if c["prompt"] == "code" and c["strategy"] == "draft"]
    best = max(drafts, key=lambda c: c["speedup"])
    k16 = next((c for c in drafts if c["k"] == 16), None)
    return {
        "draft_k2_acceptance": {p: cell(p, "draft k=2")["acceptance_rate"] for p in PROMPTS},
        "mtp_d1_acceptance": {p: cell(p, "mtp depth=1")["acceptance_rate"] for p in PROMPTS},
        "all_equal_plain": all(c["correct"] is not False for c in cells),
        "best_k_code": best["k"],
        "best_k_code_speedup": best["speedup"],
        "best_k_code_cv": best["cv"],
        "plain_code_cv": cell("code", "plain")["cv"],
        "k16_code_speedup": k16["speedup"] if k16 else None,
        "goals": GOALS,
    }


def render_card(card: dict) -> str:
    """MODEL_CARD.md from card.json: how the family was made and what it measures."""
    s, corpus, final = card["settings"], card["corpus"], card.get("final_held_out") or {}
    prose = corpus["prose"]
    m = card.get("measurements")
    lines = [
        "# specdeck demo family",
        "",
        "Built-in models so that `specdeck` runs offline on any machine. Trained by",
        "`scripts/train_demo.py` (mlx, mlx-lm model classes) on the Python standard",
        "library's sources (and, in the phases that say so below, the English text of its",
        "language reference); measured by `bench/demo_sweep.py`. Toy models: they write",
        "Python-looking text, not working programs. Their job is to make speculation",
        "behave as it does on real models: high acceptance on structured code, lower on",
        "prose.",
        "",
        "| part | architecture | parameters |",
        "|---|---|---|",
        f"| `target/` | qwen3_5 hybrid: {s['layers']} layers, full attention every "
        f"{s['full_attention_interval']}rd, the rest gated delta net; hidden {s['hidden']} "
        f"| {card['parameters']['target'] / 1e6:.2f}M |",
        f"| `target/optiq/mtp.safetensors` | one MTP layer (full attention block, fc 2H->H),"
        f" predicts the token after next; mlx-optiq layout | "
        f"{card['parameters']['mtp'] / 1e6:.2f}M |",
        f"| `draft/` | llama, {s['draft_layers']} layer, hidden {s['draft_hidden']}, distilled "
        f"from the target | {card['parameters']['draft'] / 1e6:.2f}M |",
        "",
        f"Shared byte-level BPE tokenizer (trained on the code), vocabulary "
        f"{s['vocab_size']}. Stored in float16 ({card['size_bytes'] / 1e6:.1f} MB in all); "
        "specdeck casts to float32 on the CPU backend (float16 matrix products skip BLAS "
        "there).",
        "",
        "## Training",
        "",
        f"- Code: {corpus['source']}; licence {corpus['licence']}; {corpus['files']} files, "
        f"sha256 `{corpus['sha256']}`; {corpus['train_tokens']:,} training tokens, "
        f"{corpus['held_out_tokens']:,} held out (every 40th file).",
        f"- Prose: {prose['source']}; licence {prose['licence']}; {prose['topics']} topics, "
        f"{prose['bytes']:,} bytes, sha256 `{prose['sha256']}`; {prose['train_tokens']:,} "
        f"training tokens, {prose['held_out_tokens']:,} held out (every 10th topic).",
        f"- Batches of {s['batch_size']} x {s['seq_len']} tokens, AdamW (weight decay "
        f"{s['weight_decay']}), each phase with a fresh optimizer, linear warm-up then "
        f"cosine decay to a tenth of its peak; seed {s['seed']}, mlx {card['mlx']}. The "
        f"joint loss: target cross-entropy + {s['mtp_weight']} x MTP cross-entropy (token "
        f"t+2 from the hidden state at t, stop-gradient) + the draft's "
        f"{1 - s['distill_kl']:.1f} x cross-entropy + {s['distill_kl']} x KL to the target;"
        f" the draft-only phases keep the draft's part.",
        "",
        "| phase | steps | trains | data | peak lr (warm-up) | tokens |",
        "|---|---|---|---|---|---|",
        *[f"| {p['name']} | {p['start']}-{p['start'] + p['steps']} "
          f"| {'draft' if p['draft_only'] else 'target, MTP, draft'} | "
          f"{PHASE_DATA[p['data']].format(**s)} "
          f"| {p['lr']} ({min(p['warmup'], p['steps'])}) | {p['tokens']:,} |"
          for p in card["phases"] if p["steps"]],
        "",
        f"Held out at the end (step {final.get('step')}), code / prose: target cross-entropy "
        f"{final.get('target_ce')} / {final.get('prose_target_ce')}, MTP {final.get('mtp_ce')}"
        f" / {final.get('prose_mtp_ce')}, draft {final.get('draft_ce')} / "
        f"{final.get('prose_draft_ce')}. Agreement with the target's greedy choice "
        f"(teacher-forced on held-out text), code / prose: draft {final.get('draft_agreement')}"
        f" / {final.get('prose_draft_agreement')}, MTP {final.get('mtp_agreement')} / "
        f"{final.get('prose_mtp_agreement')}; along the target's own greedy continuations of "
        f"held-out prefixes (what temperature 0 accepts): draft "
        f"{final.get('greedy_draft_code')} / {final.get('greedy_draft_prose')}, MTP "
        f"{final.get('greedy_mtp_code')} / {final.get('greedy_mtp_prose')}.",
        "",
        "| step | target CE code / prose | draft agreement (held out) | draft agreement "
        "(greedy code / prose) | MTP agreement (greedy code / prose) |",
        "|---|---|---|---|---|",
        *[f"| {h['step']} | {h['target_ce']} / {h.get('prose_target_ce', '-')} | "
          f"{h['draft_agreement']} | {h.get('greedy_draft_code', '-')} / "
          f"{h.get('greedy_draft_prose', '-')} | {h.get('greedy_mtp_code', '-')} / "
          f"{h.get('greedy_mtp_prose', '-')} |" for h in card["history"]],
        "",
        "- Settings in full: `card.json`. Reproduce: `python scripts/train_demo.py` "
        "(`--resume` continues from the last checkpoint, in any phase).",
        *[f"- {note}" for note in card.get("training_notes", [])],
    ]
    if m:
        sm = m["summary"]
        lines += [
            "",
            "## Measured",
            "",
            f"On {m['machine']}, {m['date']}: temperature 0, {m['max_tokens']} tokens, "
            f"median of {m['reps']} interleaved repetitions, OpenBLAS preloaded.",
            "",
            "| prompt | setting | tok/s | speedup | robust CV | acceptance | = plain |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in m["cells"]:
            acc = "-" if c["acceptance_rate"] is None else f"{c['acceptance_rate']:.1%}"
            lines.append(
                f"| {c['prompt']} | {c['label']} | {c['median_tokens_per_s']:.1f} | "
                f"{c['speedup']:.2f}x | {c['cv']:.3f} | {acc} | "
                f"{'yes' if c['correct'] else 'NO'} |"
            )
        lines += [
            "",
            f"- draft k=2 acceptance: code {sm['draft_k2_acceptance']['code']:.1%} "
            f"(goal >= 50 %), prose {sm['draft_k2_acceptance']['prose']:.1%}.",
            f"- mtp depth 1 acceptance: code {sm['mtp_d1_acceptance']['code']:.1%} "
            f"(goal >= 40 %), prose {sm['mtp_d1_acceptance']['prose']:.1%}.",
            f"- Every speculative output equals plain decoding: "
            f"{'yes' if sm['all_equal_plain'] else 'NO'}.",
            f"- Best k on code: k={sm['best_k_code']}, {sm['best_k_code_speedup']:.2f}x plain "
            f"(robust CV {sm['best_k_code_cv']:.3f}); k=16: "
            + ("not measured." if sm["k16_code_speedup"] is None
               else f"{sm['k16_code_speedup']:.2f}x."),
        ]
        rc = m.get("round_costs")
        if rc and rc.get("verify_seconds_captured"):
            lines.append(
                f"- Cost of a round on the hybrid target (code, k=2, medians): drafting "
                f"{rc['draft_seconds_per_round_k2'] * 1e3:.1f} ms; verifying "
                + (f"{rc['verify_seconds_all_kept'] * 1e3:.1f} ms when every draft is kept, "
                   if rc["verify_seconds_all_kept"] else "")
                + f"{rc['verify_seconds_captured'] * 1e3:.1f} ms when a rejection rewinds "
                f"the gated delta net layers to the states the verify pass kept "
                f"({rc['rounds_with_rejection']:.0%} of rounds)"
                + (f", {rc['verify_seconds_with_replay'] * 1e3:.1f} ms with capture turned "
                   f"off (restore the state, replay the kept tokens)"
                   if rc.get("verify_seconds_with_replay") else "")
                + f"; plain decoding {rc['plain_seconds_per_token'] * 1e3:.1f} ms per token."
            )
        blas = m.get("blas") or {}
        if blas.get("openblas"):
            lines.append(
                f"- Plain decoding with the bundled reference BLAS "
                f"{blas['reference_blas_tokens_per_s']:.1f} tok/s, with OpenBLAS preloaded "
                f"{blas['openblas_tokens_per_s']:.1f} tok/s ({blas['ratio']:.2f}x); a "
                f"1024^3 float32 matrix product {blas['reference_blas_matmul_gflops']:.1f} vs "
                f"{blas['openblas_matmul_gflops']:.1f} GFLOP/s ({blas['matmul_ratio']:.0f}x)."
            )
        if m.get("notes"):
            lines += ["", *[f"- {note}" for note in m["notes"]]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ks", default="1,2,4,8,16")
    ap.add_argument("--depths", default="1,2")
    ap.add_argument("--card", action="store_true", help="record in models/demo/card.json")
    ap.add_argument("--render", action="store_true",
                    help="only render MODEL_CARD.md from card.json")
    ap.add_argument("--no-blas", action="store_true", help="skip the OpenBLAS comparison")
    ap.add_argument("--plain-rate", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plain_rate:
        print(json.dumps({"tokens_per_s": plain_rate(args.max_tokens, args.reps),
                          "matmul_gflops": matmul_gflops()}))
        return 0
    card_path = DEMO_DIR / "card.json"
    if args.render:
        (DEMO_DIR / "MODEL_CARD.md").write_text(render_card(json.loads(card_path.read_text())))
        return 0

    from specdeck.engines.measure.machine import blas_library

    print(f"BLAS in this process: {blas_library() or 'the bundled reference BLAS'}")
    cells = sweep(args.reps, args.max_tokens, [int(k) for k in args.ks.split(",")],
                  [int(d) for d in args.depths.split(",")])
    print_cells(cells)
    result = summary(cells)
    print(json.dumps(result, indent=2))
    costs = round_costs(args.max_tokens)
    print(f"round costs: {costs}")
    blas = None if args.no_blas else blas_comparison(args.max_tokens, args.reps)
    if blas:
        print(f"plain tok/s: {blas}")
    if args.card:
        card = json.loads(card_path.read_text())
        card["measurements"] = {
            "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs "
                       "(shared), mlx CPU backend",
            "date": time.strftime("%Y-%m-%d"),
            "max_tokens": args.max_tokens, "reps": args.reps,
            "cells": [{k: c[k] for k in ("prompt", "label", "strategy", "k", "depth",
                                         "median_tokens_per_s", "speedup", "cv",
                                         "acceptance_rate", "correct")} for c in cells],
            "summary": result,
            "round_costs": costs,
            "blas": blas,
            "notes": card.get("measurements", {}).get("notes", []),
        }
        card_path.write_text(json.dumps(card, indent=2) + "\n")
        (DEMO_DIR / "MODEL_CARD.md").write_text(render_card(card))
        print(f"wrote {card_path} and MODEL_CARD.md")
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    sys.exit(main())
