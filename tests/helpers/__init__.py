"""Helpers the tests share (imported as ``helpers.*``; tests/ is on pytest's pythonpath)."""
