"""`mrcnet up` options that reach the fabric: the switches' receive ring, the coalescing."""

from __future__ import annotations

import pytest

from mrcnet.cli import build_parser
from mrcnet.cmd_up import options


def _args(*argv: str) -> object:
    return build_parser(only="up").parse_args(["up", *argv])


def test_rx_ring_reaches_the_run_options_and_is_bounded() -> None:
    assert options(_args()).rx_ring is None  # the switch's own default
    assert options(_args("--rx-ring", "0")).rx_ring == 0  # recvmmsg
    assert options(_args("--rx-ring", "256")).rx_ring == 256
    for bad in ("-1", str((1 << 20) + 1)):
        with pytest.raises(ValueError, match="--rx-ring"):
            options(_args("--rx-ring", bad))


def test_coalesce_reaches_the_run_options_and_is_bounded() -> None:
    assert options(_args()).coalesce == 0.0  # off
    assert options(_args("--coalesce", "0")).coalesce == 0.0
    assert options(_args("--coalesce", "2e-6")).coalesce == 2e-6
    for bad in ("-1e-6", "1.5"):
        with pytest.raises(ValueError, match="--coalesce"):
            options(_args(f"--coalesce={bad}"))
