"""Fixtures for specdeck's tests, benchmarks and scripts: tiny models built from code
(``tiny_models``), hand-built traces (``traces``) and Pilot helpers (``pilot``).

specdeck itself never imports this package; it needs nothing beyond specdeck's own
dependencies (mlx and the ``tokenizers`` that mlx-lm's transformers brings).
"""
