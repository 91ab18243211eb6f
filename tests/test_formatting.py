"""How numbers read, known answers: one convention for the CLI and the app."""

from __future__ import annotations

import pytest

from specdeck.sessions.diff import StatRow
from specdeck.engines.core.formatting import (
    MISSING, byte_size, duration, format_stat, percent, plural, stats_table, times,
)


@pytest.mark.parametrize("count, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (56 * 1024, "56.0 KiB"),
    (int(30.2 * 2**20), "30.2 MiB"), (int(99.96 * 2**20), "100 MiB"), (340 * 2**20, "340 MiB"),
    (int(1.2 * 2**30), "1.2 GiB"), (3 * 2**40, "3.0 TiB"), (None, MISSING),
])
def test_bytes_read_in_binary_units_with_their_names(count, text) -> None:
    assert byte_size(count) == text


def test_signed_sizes_say_which_way() -> None:
    assert byte_size(2 * 2**20, signed=True) == "+2.0 MiB"
    assert byte_size(-2 * 2**20, signed=True) == "-2.0 MiB"
    assert byte_size(-2 * 2**20) == "-2.0 MiB"
    assert byte_size(0, signed=True) == "0 B"


@pytest.mark.parametrize("seconds, text", [
    (0.0004, "0.4 ms"), (0.0123, "12 ms"), (0.9994, "999 ms"), (0.9996, "1.00 s"),
    (1.25, "1.25 s"), (None, MISSING),
])
def test_times_read_in_ms_under_a_second(seconds, text) -> None:
    assert duration(seconds) == text


def test_a_time_too_large_for_milliseconds_still_reads() -> None:
    """A damaged session's seconds (the fuzz test drew 1.8e305): in ms, infinity."""
    text = duration(1.797693134862316e305)
    assert text.endswith(" s") and float(text[:-2]) == 1.797693134862316e305


def test_shares_speedups_and_plurals() -> None:
    assert percent(0.625) == "62%" and percent(0.625, 1) == "62.5%" and percent(None) == MISSING
    assert times(1.3449) == "1.34x" and times(None) == MISSING
    assert plural(1, "token") == "1 token" and plural(0, "token") == "0 tokens"
    assert plural(2, "more line") == "2 more lines" and plural(1, "more line") == "1 more line"
    assert plural(12_000, "token") == "12,000 tokens"
    assert plural(2, "child", "children") == "2 children"


@pytest.mark.parametrize("name, value, text", [
    ("acceptance_rate", 0.625, "62.5%"), ("peak_memory_bytes", 30 * 2**20, "30.0 MiB"),
    ("ttft_seconds", 0.0123, "12 ms"), ("tokens_per_s", 141.26, "141.3"),
    ("speedup_vs_plain", 1.5, "1.50x"), ("predicted_speedup", 0.5, "0.50x"),
    ("generated_tokens", 12000, "12,000"), ("mean_accepted", 1.23456, "1.23"),
    ("acceptance_by_position", [0.8, 0.5], "80% 50%"), ("acceptance_by_position", [], MISSING),
    ("finish_reason", "length", "length"), ("acceptance_rate", None, MISSING),
])
def test_statistics_format_by_name(name, value, text) -> None:
    assert format_stat(name, value) == text


def test_the_stats_table_both_front_ends_draw() -> None:
    columns, rows = stats_table("a plain", "b draft", [
        StatRow("tokens_per_s", 100.0, 150.0, 1.5), StatRow("acceptance_rate", None, 0.5, None)])
    assert columns == [("", "left"), ("a plain", "right"), ("b draft", "right"),
                       ("b / a", "right")]
    assert rows == [("tokens_per_s", "100.0", "150.0", "1.50"),
                    ("acceptance_rate", MISSING, "50.0%", MISSING)]
