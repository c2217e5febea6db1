"""The socket-free host path benchmark moves the data exactly once and reports per-packet CPU."""

from __future__ import annotations

import pytest

from testbed.bench.host_path_cpu import measure_host_path_cpu


@pytest.mark.parametrize("mtu", [4096, 1024])
def test_path_bench_moves_each_packet_once_with_coalesced_sacks(mtu: int) -> None:
    size = (1 << 20) + 100  # a partial last packet
    res = measure_host_path_cpu(size, mtu)
    packets = -(-size // mtu)
    assert res["packets"] == packets  # measure_host_path_cpu() raises on wrong bytes or retransmissions
    # in-order delivery: one SACK per ack_coalesce (8) packets at least, never one per packet
    assert packets // 8 <= res["sacks"] < packets
    for key in ("writer_us_per_packet", "sink_us_per_packet", "writer_build_encode_us_p10",
                "sink_decode_receive_us_p10", "writer_per_sack_us_p10"):
        assert res[key] > 0
