"""A model's chat template rendered with a bound on its time, its memory and its output.

A chat template is Jinja from the model's folder: it may raise (``raise_exception``),
fail to parse, name what is undefined, reach for Python internals, render nothing, loop
for minutes (nested ranges) or double a string until the machine runs out of memory.
Jinja's sandbox (transformers renders with it) stops the internals but bounds neither
time nor memory, and a thread cannot stop a loop running inside Jinja. So the template
renders in a child process, in the environment transformers gives it (the same
filters, globals and extensions), under a memory limit where the system enforces one,
stopped after ``RENDER_SECONDS`` of processor time (so a busy machine does not fail a
template that is merely waiting for a core) and killed after ``RENDER_WALL`` times that
in wall time; whatever goes wrong ends in one ``ModelError``.
The child costs a Python start (~0.1 s), once per prompt.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from typing import Any

from specdeck.engines.core.errors import ModelError

#: Processor seconds a template may take to render, the Python start included (a real
#: template renders in milliseconds).
RENDER_SECONDS = 5.0
#: Wall time, in RENDER_SECONDS, after which the child is killed whatever it has used
#: (where the system has no processor-time limit, the only bound).
RENDER_WALL = 4
#: Characters a rendered prompt may hold (a prompt is at most 4 MiB; a template adds
#: little to it).
RENDER_CHARS = 16 * 2**20
#: Address space of the rendering process, where the system enforces such a limit.
RENDER_MEMORY = 2**30


def render_chat(tokenizer: Any, messages: list[dict], add_generation_prompt: bool = True) -> str:
    """``messages`` rendered by ``tokenizer``'s chat template, as
    ``apply_chat_template(..., tokenize=False)`` renders them, within the bounds above;
    ModelError naming what went wrong otherwise."""
    where = getattr(tokenizer, "name_or_path", "") or "the model"
    try:
        template = tokenizer.get_chat_template()
    except Exception as exc:  # transformers' own: no template, several and no default
        raise ModelError(f"the chat template of {where} cannot be used: {exc}") from exc
    special = getattr(tokenizer, "special_tokens_map", {}) or {}
    context = {**special, "messages": messages, "tools": None, "documents": None,
               "add_generation_prompt": add_generation_prompt,
               # what mlx-lm's tokenizer wrapper passes (True where the model thinks)
               "enable_thinking": bool(getattr(tokenizer, "has_thinking", False))}
    payload = json.dumps({"template": template, "context": context,
                          "seconds": RENDER_SECONDS}, default=str)
    endless = ModelError(f"the chat template of {where} did not finish rendering in "
                         f"{RENDER_SECONDS:g} s (a loop without end?)")
    try:
        child = subprocess.run([sys.executable, "-I", "-m", __name__], input=payload.encode(),
                               capture_output=True, timeout=RENDER_SECONDS * RENDER_WALL)
    except subprocess.TimeoutExpired:
        raise endless from None
    xcpu = getattr(signal, "SIGXCPU", None)  # None on Windows
    if xcpu is not None and child.returncode == -xcpu:
        raise endless
    try:
        answer = json.loads(child.stdout)
    except ValueError:
        answer = {"error": "it ran out of memory" if b"MemoryError" in child.stderr
                  else f"the renderer ended with status {child.returncode}"}
    if "error" in answer:
        raise ModelError(f"the chat template of {where} failed: {answer['error']}")
    text = answer["text"]
    if not text.strip():
        raise ModelError(f"the chat template of {where} renders the prompt as nothing")
    return text


def _environment() -> Any:
    """transformers' chat-template environment (``chat_template_utils``): Jinja's
    immutable sandbox, ``tojson`` without HTML escaping, ``raise_exception``,
    ``strftime_now``, loop controls and the ``{% generation %}`` block."""
    from datetime import datetime

    from jinja2 import TemplateError, nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """``{% generation %}...{% endgeneration %}``: marks the assistant's part, which
        is rendered as it is."""

        tags = {"generation"}

        def parse(self, parser: Any) -> list[nodes.Node]:
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    def raise_exception(message: object) -> None:
        raise TemplateError(str(message))

    def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None,
               separators: Any = None, sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[Generation, loopcontrols])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return environment


def _limit_this_process(seconds: float) -> None:
    """The memory and processor-time limits, where the system has them (reaching the
    processor-time one sends SIGXCPU, which ends the process)."""
    try:
        import resource
    except ImportError:  # Windows: the parent's wall-time bound alone
        return
    cpu = math.ceil(seconds)
    for limit, value in ((resource.RLIMIT_AS, RENDER_MEMORY), (resource.RLIMIT_CPU, cpu)):
        try:
            resource.setrlimit(limit, (value, value + 1))
        except (ValueError, OSError):
            pass  # not enforced here (macOS sets no memory limit)


def _render_here() -> None:
    """The child: a template and its context as JSON on stdin, ``{"text": ...}`` or
    ``{"error": ...}`` on stdout."""
    request = json.loads(sys.stdin.read())
    _limit_this_process(request["seconds"])
    pieces, size = [], 0
    try:
        template = _environment().from_string(request["template"])
        for piece in template.generate(**request["context"]):
            pieces.append(piece)
            size += len(piece)
            if size > RENDER_CHARS:
                raise ValueError(f"it renders more than {RENDER_CHARS:,} characters")
        answer = {"text": "".join(pieces)}
    except MemoryError:
        pieces.clear()
        answer = {"error": "it ran out of memory"}
    except Exception as exc:  # noqa: BLE001 - anything a template raises is its fault
        answer = {"error": f"{type(exc).__name__}: {str(exc)[:1000]}"}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    _render_here()
