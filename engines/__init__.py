"""The decoding core: strategies as event streams, statistics, cache rollback.

Never imports textual or rich. Importing the package itself imports nothing heavy, so
the pure modules (events, stats, config) serve replay on machines without mlx.
"""
