"""specdeck: compare LLM decoding strategies side by side.

This package holds the command line and the session layer (recording, replay, diff);
the decoding core is ``engines`` and the app is ``tui``.
"""
