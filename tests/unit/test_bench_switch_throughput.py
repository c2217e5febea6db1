"""testbed.bench.switch_throughput: its rate estimator and the frame it sends."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether

from testbed.bench.switch_throughput import mrc_frame, rate_estimates


def test_rate_estimates_recover_a_known_rate_despite_late_frames() -> None:
    rate, size, n = 1e9, 8290, 2000
    stamps = [i * size * 8 / rate for i in range(n)]
    sizes = [size] * n
    e2e, fit = rate_estimates(stamps, sizes)
    assert e2e == pytest.approx(rate, rel=1e-9) and fit == pytest.approx(rate, rel=1e-9)
    late = list(stamps)
    late[-1] += 0.01  # the last frame handed over 10 ms late (the process was descheduled)
    e2e_late, fit_late = rate_estimates(late, sizes)
    assert e2e_late < 0.995 * rate  # the end-to-end figure suffers ...
    assert fit_late == pytest.approx(rate, rel=2e-3)  # ... the fitted slope barely moves
    with pytest.raises(ValueError):
        rate_estimates([1.0], [size])


def test_bench_frame_is_a_consistent_write_only_packet() -> None:
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6

    dst = bytes.fromhex("fd000000000000020000000000000001")
    frame = mrc_frame(dst, payload=4096)
    pkt = Ether(frame)
    assert len(frame) == 14 + 40 + 8 + 12 + 4 + 16 + 4096 + 4
    assert pkt[IPv6].plen == len(frame) - 54 and pkt[UDP].len == len(frame) - 54
    assert pkt[UDP].dport == 4791 and bytes(pkt[UDP].payload)[0] == 0xCA


def test_both_targets_are_reported_side_by_side_with_their_ratio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from testbed.bench import switch_throughput as bench

    seen = []

    def fake(kind: str, *args: object) -> dict[str, object]:
        seen.append(kind)
        pps = {"embedded": 60_000, "bmv2": 8_000}[kind]
        return {"target": kind, "packets_per_s": pps, "packets_per_cpu_s": pps + 1000}

    monkeypatch.setattr(bench, "_measure_target", fake)
    both = bench.measure_switch_throughput(1.0, 1, 1.0, target="both")
    assert seen == ["embedded", "bmv2"]  # one after the other, the same arguments
    assert both["embedded"]["packets_per_s"] == 60_000 and both["bmv2"]["target"] == "bmv2"
    assert both["packets_per_s_ratio"] == 7.5
    assert both["packets_per_cpu_s_ratio"] == round(61_000 / 9_000, 2)
    one = bench.measure_switch_throughput(1.0, 1, 1.0, target="bmv2")
    assert one["target"] == "bmv2" and "targets_met" not in one
