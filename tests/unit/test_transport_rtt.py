"""RTT estimate (hosts/transport/rtt.py): the first sample, then an EWMA with gain 1/8."""

from __future__ import annotations

import pytest

from hosts.transport.rtt import RttEstimator


def test_first_sample_then_moving_average() -> None:
    est = RttEstimator()
    assert est.srtt is None
    samples = [100e-6, 20e-6, 20e-6, 300e-6]
    expected = samples[0]
    est.on_sample(samples[0])
    assert est.srtt == samples[0]
    for s in samples[1:]:
        expected = expected * 7 / 8 + s / 8
        est.on_sample(s)
        assert est.srtt == pytest.approx(expected, rel=1e-12)
    # a long run of one value converges to it
    for _ in range(200):
        est.on_sample(5e-6)
    assert est.srtt == pytest.approx(5e-6, rel=1e-9)
