"""The playground: bare ``specdeck`` on the default family, or ``compare`` without
``--headless`` on the models named."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specdeck.commands.exit_status import EXIT_NOT_SAVED
from specdeck.commands.options import require_models
from specdeck.engines.core.requests import CompareRequest
from specdeck.safe_text.plain import MESSAGE_CHARS, visible


def open_playground(request, sessions_dir: Path | None = None, save: bool = True,
                    hint: str | None = None) -> int:
    """Open the app on ``request``, refusing a missing model before the screen changes.
    Every run the app measures is saved as a session (into ``sessions_dir``) unless
    ``save`` is false; ``hint`` (a few words) leads the status line."""
    from specdeck.tui import LiveSource, run_app

    require_models(request)
    if request.group is not None:
        from specdeck.engines.distributed.splittable import refuse_unsplittable
        from specdeck.hosts.group import require_local_lead

        require_local_lead(request.group)
        refuse_unsplittable(request.target, request.group.shard)
    problems = run_app(LiveSource(request), sessions_dir=sessions_dir, save_sessions=save,
                       hint=hint)
    for line in problems:
        print(f"specdeck: error: {visible(line, MESSAGE_CHARS)}", file=sys.stderr)
    return EXIT_NOT_SAVED if problems else 0


def run(args: argparse.Namespace) -> int:
    """``specdeck`` alone: the smollm2 family once fetched, else the demo models (whose
    status bar says how to fetch the real one), each on its ``Family``'s strategies and
    prompt."""
    from specdeck.engines.models.families import FAMILIES, default_family, fetch_hint, require_family
    from specdeck.prompts import get_prompt

    family = FAMILIES[args.family or default_family()]
    models = require_family(family.name)
    request = CompareRequest(
        target=models.target, draft=models.draft, strategies=list(family.strategies),
        prompt=get_prompt(family.prompt).text, dtype=args.dtype,
    )
    return open_playground(request, hint=fetch_hint() if family.name == "demo" else None)

