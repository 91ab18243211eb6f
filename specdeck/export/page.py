"""One self-contained HTML page: the template, its style and script inline, the data as
escaped JSON, and a Content-Security-Policy that lets nothing else run or load.

Works opened from disk with no network. The policy allows the page's one script and one
style by their SHA-256 hashes (never ``'unsafe-inline'``): an event handler or a script
smuggled into the page is refused, and ``default-src 'none'`` refuses every request. The
data sits in a ``<script type="application/json">`` block, which a browser never runs,
with ``<``, ``>``, ``&`` and the JavaScript line separators escaped, so no string in it
can close the block. Trusted Types are required, so even a mistaken ``innerHTML`` in
the script would throw instead of parsing markup. The token styles are the app's
(``tui/app.tcss`` resolved against Textual's default theme), so the page looks like it.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from importlib.resources import files

import orjson
from rich.style import Style
from textual.color import Color
from textual.css.stylesheet import Stylesheet
from textual.theme import BUILTIN_THEMES

from specdeck.safe_text.plain import visible

ASSETS = files("specdeck.export")
#: The app's theme and the theme colours the page's own stylesheet names (``--name``).
THEME = "textual-dark"
PAGE_COLOURS = ("background", "foreground", "surface", "panel", "accent", "boost")
#: Component classes of the app's stylesheet that the page reuses.
_COMPONENT = re.compile(r">\s*\.((?:token|diff)--[a-z]+)$")
#: JSON inside an HTML script block: these never appear raw.
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                 "\u2028": "\\u2028", "\u2029": "\\u2029"}
_PLACEHOLDER = re.compile(r"@(CSP|TITLE|STYLE|DATA|SCRIPT)@")


def script_json(data: object) -> str:
    """``data`` as JSON that can stand inside ``<script type="application/json">``."""
    text = orjson.dumps(data).decode()
    return re.sub("[<>&\u2028\u2029]", lambda m: _JSON_ESCAPES[m.group()], text)


def _declarations(styles) -> str:
    """A Textual rule's colour, background and text style as CSS declarations."""
    css = [f"color:{styles.color.hex}"]
    if styles.has_rule("background") and styles.background.a > 0:
        css.append(f"background:{styles.background.hex}")
    style = Style.parse(str(styles.text_style))  # a Style where unset, else its words
    if style.bold:
        css.append("font-weight:bold")
    if style.italic:
        css.append("font-style:italic")
    lines = [name for name, on in (("underline", style.underline),
                                   ("line-through", style.strike)) if on]
    if lines:
        css.append(f"text-decoration-line:{' '.join(lines)}")
    return ";".join(css)


def theme_css() -> str:
    """The theme's colours as CSS variables, and a class per token and diff kind styled as
    ``tui/app.tcss`` styles it."""
    variables = BUILTIN_THEMES[THEME].to_color_system().generate()
    sheet = Stylesheet(variables=variables)
    sheet.read(str(files("specdeck.tui") / "app.tcss"))
    sheet.parse()
    muted = Color.parse(variables["foreground"]).with_alpha(0.6).hex
    css = [":root{" + ";".join(f"--{name}:{variables[name]}" for name in PAGE_COLOURS)
           + f";--muted:{muted}}}"]
    seen = set()
    for rule in sheet.rules:
        for selector in rule.selectors.split(","):
            match = _COMPONENT.search(selector.strip())
            if match and match.group(1) not in seen:
                seen.add(match.group(1))
                css.append(f".{match.group(1)}{{{_declarations(rule.styles)}}}")
    return "\n".join(css) + "\n"


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def policy(script: str, style: str) -> str:
    """The Content-Security-Policy: the inline script and style by hash, images only as
    ``data:`` URIs (the sweep's chart), nothing else, no markup strings into the DOM."""
    return (f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; "
            "img-src data:; base-uri 'none'; form-action 'none'; "
            "require-trusted-types-for 'script'; trusted-types 'none'")


def render_page(data: dict, title: str) -> bytes:
    """The whole page for ``data`` (``page_data``'s), titled ``title`` (shown visibly and
    escaped here)."""
    script = (ASSETS / "page.js").read_text(encoding="utf-8")
    style = theme_css() + (ASSETS / "page.css").read_text(encoding="utf-8")
    parts = {"CSP": html.escape(policy(script, style)), "TITLE": html.escape(visible(title)),
             "STYLE": style, "DATA": script_json(data), "SCRIPT": script}
    template = (ASSETS / "page.html").read_text(encoding="utf-8")
    # One pass: text substituted in is never searched for placeholders again.
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], template).encode()
