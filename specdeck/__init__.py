"""specdeck: compare LLM decoding strategies side by side.

This package holds the command line and the session layer (recording, replay, diff).
The decoding core (``specdeck.engines``), the app (``specdeck.tui``) and the built-in
prompts (``specdeck.prompts``) live in the repository's top-level folders ``engines/``,
``tui/`` and ``prompts/`` and install under this namespace (pyproject's package-dir).
"""
