"""A learner's glossary: what each word on the screen means, kept as data.

The help screen shows it under the keys and ``w`` (or a click on the legend) opens it on
its own (``tui.glossary_screen``). Short on purpose: each entry says what to look at and
why it matters, in the words the panes, the inspector and the cost view use.
"""

from __future__ import annotations

from rich.table import Table

from specdeck.blas import INSTALL_OPENBLAS

#: (term, what it means), in the order a learner meets them.
GLOSSARY: tuple[tuple[str, str], ...] = (
    ("target token (plain)",
     "The target model's own token: plain decoding makes one per target step. Everything "
     "below is measured against that step."),
    ("round / verify pass",
     "One draft-and-verify cycle: the draft proposes k tokens, the target checks them all "
     "in ONE pass over k + 1 positions. Tokens per pass = the accepted drafts plus the "
     "correction or bonus that ends the round."),
    ("accepted draft (underlined)",
     "A drafted token the target confirmed. Greedy (temperature 0): it equals the "
     "target's top choice. Sampled: kept when u < min(1, p/q), p the target's probability, "
     "q the draft's."),
    ("rejected draft (struck through)",
     "A draft the target turned down, shown where it was proposed and never part of the "
     "output; the drafts after it in the round are not even tested ('unchecked'). x hides "
     "them."),
    ("correction (bold)",
     "The target's own token at the first rejected position; it ends the round. Greedy: "
     "its top choice. Sampled: a draw from norm(max(0, p - q)), which keeps the output "
     "distribution exactly the target's."),
    ("bonus (bold italic)",
     "Every draft of the round was accepted, so the verify pass already computed the "
     "target's next token: it comes free, k + 1 tokens for one pass."),
    ("sparkline",
     "Under each pane: accepted drafts per round, one bar per round (past 512 rounds a bar "
     "is the largest of neighbouring rounds). Tall bars are rounds the draft got right. "
     "With k = auto, grow or pmin a second one under it shows the drafts its policy chose "
     "per round (0: a plain step)."),
    ("accept",
     "Acceptance rate: accepted drafts / drafted tokens. Unchecked drafts after a "
     "rejection count as drafted: they were paid for."),
    ("mean len",
     "Mean accepted length: accepted drafts per round that drafted. It leaves out the "
     "correction or bonus token; llama.cpp (mean acc len) and vLLM (mean acceptance "
     "length) count it, so theirs is ours + 1."),
    ("by pos (survival)",
     "Acceptance by draft position: the share of rounds whose first i drafts ALL lived "
     "(the survival at i), among the rounds that drafted that far. When every round drafts "
     "the same k it can only fall as i grows: the same rounds, each with one more draft to "
     "live. With a k policy, chain or prompt lookup (or a short last round) rounds draft "
     "different numbers and each i counts only the rounds that drafted that far, so it can "
     "rise. The conditional rate, 'kept given the ones before it were', is survival(i) / "
     "survival(i - 1). llama.cpp and vLLM also give the survival, but divide by every "
     "round that drafted: lower where rounds drafted fewer."),
    ("other engines' numbers",
     "specdeck replay --json and specdeck diff take --conventions llama.cpp or vllm: the "
     "same runs under their names (n_drafted, n_accept, mean_acc_len; num_drafts, "
     "mean_acceptance_length, draft_acceptance_rate), computed their way."),
    ("rollback: trim",
     "After a rejection, the rejected positions are dropped from the attention (KV) "
     "caches: cheap, no second pass."),
    ("rollback: captured",
     "Hybrid models' recurrent layers cannot forget a token. Their verify pass kept the "
     "state after every position, and each layer is set to the one after the last "
     "accepted token: no second pass."),
    ("rollback: replay",
     "Other recurrent layers are restored from before the verify pass and the accepted "
     "tokens are fed again: a second, shorter pass, paid on every rejection."),
    ("cost of a round",
     "k draft steps plus one verify pass of k + 1 tokens, in plain steps (k c_draft + "
     "c_verify). The textbook takes the verify pass as one step; on a CPU or a small model "
     "a pass of 17 tokens costs several. Key k shows it per draft position."),
    ("predicted / textbook / measured",
     "Predicted: tokens per pass over the measured cost of a round. Textbook: the same "
     "tokens over a cost with the verify pass at one step. Measured: tok/s over plain's. "
     "Where predicted and textbook part, the verify pass is why."),
    ("survival vs cost line",
     "In the k view: a draft at position i adds survival(i) tokens per round and costs "
     "the same plain steps as every other position. Where the survival curve falls below "
     "the cost line, more drafts cost more than they bring: that is the best k."),
    ("noise",
     "Two runs of the same thing differ. One run each: plain is timed again after the "
     "others, and a speedup within their spread cannot be told from 1.00x. With repeats "
     "(settings), each strategy's median run is kept and the spread is shown."),
    ("copied draft (chain)",
     "In a chain pane: an accepted draft that prompt lookup copied from earlier text (the "
     "last n tokens occurred before; what followed them then is the draft). The chain's "
     "other accepted drafts (underlined) came from the draft model or the MTP head."),
    ("auto k",
     "k chosen round by round: from the survival measured so far at each draft position "
     "and the measured cost of a draft step and of each verify length, auto drafts the k "
     "with the most tokens per unit of time, 0 when no k pays; every 8 rounds it tries a "
     "neighbour. At plain steps it learns from the draft's greedy guesses at their tokens "
     "(temperature 0), else tries drafting now and then. The inspector says why it chose "
     "each round's k."),
    ("grow k",
     "transformers' schedule (num_assistant_tokens): 2 drafts more after a round that kept "
     "every draft, 1 fewer after a round that did not, from 5 (transformers starts at 20)."),
    ("pmin k",
     "llama.cpp's rule (--draft-p-min): each round drafts while the draft's top "
     "probability at the next position is at least P, up to 16 drafts."),
    ("no OpenBLAS",
     "On Linux, the status line's flag: matrix products go through the reference BLAS "
     "mlx's CPU wheel carries, about 30x slower than OpenBLAS (a small model ran at 1.6-3 "
     f"tok/s instead of 10). {INSTALL_OPENBLAS} installs it; specdeck loads it when it "
     "starts."),
    ("mlx-lm rule",
     "Sampled runs (temperature > 0): what mlx-lm's exact-match rule would have kept of the "
     "same drafts. It keeps a draft only when the target's own sample equals it (about sum "
     "p q), where min(1, p/q) keeps sum min(p, q): both lossless, one far more generous."),
)


def glossary_table() -> Table:
    """The glossary as a two-column table (the terms are ours: no data reaches it)."""
    table = Table(box=None, show_header=False, padding=(0, 2, 1, 0), expand=True)
    table.add_column(style="bold", max_width=24)  # a long term wraps, never cut
    table.add_column(ratio=1)
    for term, meaning in GLOSSARY:
        table.add_row(term, meaning)
    return table
