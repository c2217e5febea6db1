"""common.units: both dialects (topology files and CLIs; scheduler parameters) and bad input."""

from __future__ import annotations

import pytest

from common.units import (
    parse_duration,
    parse_prefixed,
    parse_rate,
    parse_ratio,
    parse_seconds,
    parse_size,
    split_quantity,
)


def test_units() -> None:
    assert parse_rate("10G") == 1e10
    assert parse_rate("250Mbps") == 2.5e8
    assert parse_rate(0) == 0
    assert parse_duration("2.5us") == pytest.approx(2.5e-6)
    assert parse_duration("3ns") == pytest.approx(3e-9)
    assert parse_size("2MiB") == 2 * 1024 * 1024
    assert parse_size("1.5KB") == 1500
    assert parse_ratio("0.5%") == pytest.approx(0.005)
    for bad, fn in (("fast", parse_rate), ("1 parsec", parse_duration), ("1.5B", parse_size)):
        with pytest.raises(ValueError):
            fn(bad)


def test_negative_non_finite_and_non_numeric_input_is_a_value_error() -> None:
    for fn in (parse_rate, parse_duration, parse_size, parse_ratio):
        for bad in ("-1", "+1", "1e999GiB" if fn is parse_size else "x1", "", True, None, [1]):
            with pytest.raises(ValueError):
                fn(bad)


def test_prefixed_dialect_is_case_sensitive_and_checks_the_unit_name() -> None:
    assert parse_prefixed("4GiB", ("B",), "size") == 4 * 2**30
    assert parse_prefixed("4Gi", ("B",), "size") == 4 * 2**30
    assert parse_prefixed("800G", ("bps",), "bandwidth") == 800e9
    assert parse_prefixed("1.5 kb/s", ("bps", "b/s"), "bandwidth") == 1500.0
    assert parse_prefixed("2K", ("B",), "size") == parse_prefixed("2k", ("B",), "size") == 2000.0
    assert parse_prefixed("-3", ("B",), "size") == -3.0  # the caller bounds the value
    for bad in ("4gib", "4GiBB", "4 parsecs", "1e999"):
        with pytest.raises(ValueError):
            parse_prefixed(bad, ("B",), "size")
    assert parse_seconds("500ns", "alpha") == pytest.approx(5e-7)
    assert parse_seconds("2", "alpha") == 2.0
    assert parse_seconds("7ps", "alpha") == pytest.approx(7e-12)
    for bad in ("5 min", "soon", "1e999s"):
        with pytest.raises(ValueError):
            parse_seconds(bad, "alpha")


def test_split_quantity_keeps_the_number_as_written() -> None:
    assert split_quantity(" 1.5 ms ") == ("1.5", 1.5, "ms")
    assert split_quantity("5.") == ("5.", 5.0, "")
    assert split_quantity("ms") is None
