"""Prompt lookup's drafts replayed over recorded answers: a rule against another, exactly,
in seconds and without timing.

At temperature 0 speculation writes plain decoding's tokens, so which drafts a lookup
rule makes and which of them are kept follows from the answer alone. Each prompt's plain
answer on smollm2 is recorded once (``--answers FILE`` keeps them between runs), then
the proposer is driven over it as the decoding loop drives it: up to k drafts, those
equal to the answer's next tokens kept, the token after them settled (drafts past the
answer's end count as not kept: the loop may verify some of them after the end token,
which no answer shows). It prints per prompt the drafts kept and tokens per target pass,
for this tree's rule and (``--against REV``) a revision's, each with its own default n
and k. What the counts buy in time is ``first_impression.py``'s to measure.
``--rejected`` also prints every round of this tree's rule whose drafts were not all
kept: the match copied from (its length, from the prompt or the answer), how far into
its sentence the copy starts, the drafts and what the model wrote instead.

    python bench/lookup_replay.py [--prompts a,FOLDER,FILE] [--against REV]
        [--answers FILE] [--max-tokens 128] [--rejected]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from importlib import import_module
from pathlib import Path
from typing import Any

from specdeck.blas import reexec_with_openblas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from first_impression import HELD_OUT, prompt_names, prompt_text  # noqa: E402
from revisions import engines_at  # noqa: E402
from specdeck.engines.models.families import require_family  # noqa: E402
from specdeck.engines.models.loading import load_tokenizer  # noqa: E402

#: Six more held-out prompts of that kind, written before any rule was replayed on them.
HELD_OUT_CHAT = str(ROOT / "bench" / "held_out_chat")


def record(names: list[str], max_tokens: int, path: Path | None) -> dict[str, Any]:
    """Each prompt's ids and plain greedy answer, read from ``path`` where recorded
    (by the prompt's text and the length)."""
    from specdeck.engines.core.config import DecodeSettings
    from specdeck.engines.core.events import Round
    from specdeck.engines.decode.run import Models, run_strategy
    from specdeck.engines.measure.blas_threads import fit_blas_threads_to
    from specdeck.engines.models.loading import ModelStore
    from specdeck.engines.runs.compare import encode_prompt

    answers = json.loads(path.read_text()) if path and path.is_file() else {}
    keys = {n: f"{max_tokens} {prompt_text(n)}" for n in names}
    missing = [n for n in names if keys[n] not in answers]
    if missing:
        target = ModelStore().get(require_family("smollm2").target)
        fit_blas_threads_to(target)
        for name in missing:
            ids = encode_prompt(target.tokenizer, prompt_text(name))
            events = run_strategy("plain", Models(target=target), ids,
                                  DecodeSettings(max_tokens=max_tokens))
            answer = [t for e in events if isinstance(e, Round) for t in e.tokens]
            answers[keys[name]] = {"prompt": ids, "answer": answer}
        if path:
            path.write_text(json.dumps(answers))
    return {n: answers[keys[n]] for n in names}


def replay(engines: Any, tokenizer: Any, prompt: list[int], answer: list[int],
           max_tokens: int, show: bool = False) -> tuple[int, int, int]:
    """Drafted, kept and target passes when ``engines``' lookup writes ``answer``;
    with ``show``, each round that rejected a draft printed (``rejected``)."""
    config = import_module(f"{engines.__name__}.core.config").DecodeSettings()
    ngram = import_module(f"{engines.__name__}.proposers.ngram")
    # Built as that tree's ``run`` builds it (revisions before the sentence rule take n only).
    told = [ngram.sentence_ends(tokenizer)] if hasattr(ngram, "sentence_ends") else []
    proposer = ngram.PromptLookup(config.ngram_n, *told)
    proposer.begin(list(prompt), None)
    drafted = kept = passes = written = 0
    while written < len(answer):
        found = proposer.match()
        drafts = proposer.propose(min(config.ngram_k, max_tokens - written))[0].tolist()
        accepted = 0
        while (accepted < len(drafts) and written + accepted < len(answer)
               and drafts[accepted] == answer[written + accepted]):
            accepted += 1
        if show and accepted < len(drafts):
            rejected(tokenizer, proposer, len(prompt), found[0], drafts, accepted,
                     answer[written:written + len(drafts) + 1])
        drafted, kept, passes = drafted + len(drafts), kept + accepted, passes + 1
        written += accepted + 1
        if written <= len(answer):
            proposer.settle(drafts, accepted, answer[written - 1], None)
    return drafted, kept, passes


def rejected(tokenizer: Any, proposer: Any, prompt_length: int, start: int,
             drafts: list[int], accepted: int, written: list[int]) -> None:
    """One line for a round whose drafts were not all kept: the match (tokens, where from),
    the copy's place in its sentence, drafts kept | rejected, and what the model wrote."""
    history, ends = proposer.history, proposer.ends_sentence
    length = 0
    while length < start and history[start - length - 1] == history[-length - 1]:
        length += 1
    into = next((i for i, t in enumerate(reversed(history)) if ends(t)), len(history))
    text = lambda ids: repr(tokenizer.decode(ids))  # noqa: E731
    print(f"  match {length:>2} from {'prompt' if start < prompt_length else 'answer'} "
          f"{text(history[-min(length, 8):])}, {into:>2} into the sentence, "
          f"drafts {text(drafts[:accepted])} | {text(drafts[accepted:])}, "
          f"wrote {text(written[accepted:accepted + 3])}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", default=",".join([*HELD_OUT, HELD_OUT_CHAT]),
                    help="held-out prompts by name, text files, folders or built-in prompts")
    ap.add_argument("--against", metavar="REV", help="also lookup as it was at this revision")
    ap.add_argument("--answers", type=Path, help="a JSON file that keeps the answers recorded")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rejected", action="store_true",
                    help="print this tree's rounds that rejected a draft")
    args = ap.parse_args()
    names = prompt_names(args.prompts)
    answers = record(names, args.max_tokens, args.answers)
    tokenizer = load_tokenizer(Path(require_family("smollm2").target))
    with tempfile.TemporaryDirectory() as tmp:
        rules = {"ngram": import_module("specdeck.engines")}
        if args.against:
            rules[f"ngram@{args.against}"] = engines_at(args.against, Path(tmp))
        print(f"{'prompt':<16} {'tokens':>6}  "
              + "  ".join(f"{r + ' kept':>20} {'tokens/pass':>11}" for r in rules))
        for name in names:
            prompt, answer = answers[name]["prompt"], answers[name]["answer"]
            cells = []
            for rule, engines in rules.items():
                drafted, kept, passes = replay(engines, tokenizer, prompt, answer,
                                               args.max_tokens,
                                               args.rejected and rule == "ngram")
                share = f"{kept / drafted:.0%}" if drafted else "-"
                cells.append(f"{f'{kept}/{drafted} {share}':>20} {len(answer) / passes:>11.2f}")
            print(f"{Path(name).stem:<16} {len(answer):>6}  " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    reexec_with_openblas(sys.orig_argv[1:])  # timed as specdeck runs, on OpenBLAS
    raise SystemExit(main())
