"""Two hosts with two planes each through one embedded switch; links flap during the transfer.

The switch (``python -m switch.main``) is programmed over P4Runtime and its ports are flapped
with the switch admin service (SetPortAdmin: the port drops everything while down, the host
NIC keeps its carrier, so the transport has to find out by itself). 64 MiB are written and
checked byte for byte, for MRC and for the RC baseline.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from common.netns import NetKit, wait_until
from hosts.apps import DONE_IMM, pattern
from testbed.host_lab import SwitchHandle, run_transfer, switch_star

pytestmark = pytest.mark.emulation

MiB = 1 << 20
SIZE = 64 * MiB
PACKETS = SIZE // 4096


def _flapper(sw: SwitchHandle, ports: list[int], downs: list[int]) -> object:
    """Once a quarter of the data crossed the switch, take each port down (one at a time, so a
    plane always remains) for an outage of at least 0.3 s that also lasts until the switch
    dropped 100 packets on it (at most 2 s), then up again."""

    def from_h1() -> int:
        stats = sw.port_stats()
        return sum(stats[p]["rx_packets"] for p in ports)

    def flap() -> None:
        wait_until(lambda: from_h1() >= PACKETS // 4, 60, "a quarter of the data at the switch")
        for port in ports:
            before = sw.port_stats()[port]["down_drops"]
            sw.set_port_admin(port, False)
            until = time.monotonic() + 0.3
            try:
                try:
                    wait_until(
                        lambda p=port, b=before, u=until: time.monotonic() >= u
                        and sw.port_stats()[p]["down_drops"] >= b + 100,
                        2.0, f"drops on downed port {port}")
                except TimeoutError:
                    pass  # little traffic on that plane (RC uses one plane)
            finally:
                sw.set_port_admin(port, True)
            downs.append(sw.port_stats()[port]["down_drops"] - before)

    return flap


@pytest.mark.parametrize("qp_type", ["MRC", "RC"])
def test_64mib_through_switch_with_flapping_links(run_prefix: str, tmp_path: Path,
                                                  qp_type: str) -> None:
    downs: list[int] = []
    with NetKit(run_prefix) as kit:
        (h1, h2), sw = switch_star(kit, tmp_path, hosts=2, planes=2)
        h1_ports = [sw.ports[("h1", 0)], sw.ports[("h1", 1)]]
        res = run_transfer(kit, h1, h2, tmp_path, SIZE, qp_type=qp_type, seed=11, timeout=120,
                           during=_flapper(sw, h1_ports, downs))  # type: ignore[arg-type]
        stats = sw.port_stats()
    assert res.writer.get("errors") == [], res.writer
    assert res.writer["bytes"] == SIZE
    assert res.sink["imm"] == DONE_IMM
    assert res.sink["sha256"] == hashlib.sha256(pattern(SIZE, 11)).hexdigest()
    # The flaps hit traffic: packets were dropped by the downed ports.
    assert len(downs) == 2 and sum(downs) > 0, downs
    print(f"{qp_type}: drops per flapped port {downs}, writer {res.writer}")
    assert sum(stats[p]["down_drops"] for p in h1_ports) >= sum(downs)
    if qp_type == "MRC":
        # MRC sprays over both planes (each carried a real share of the data).
        assert min(stats[p]["rx_packets"] for p in h1_ports) > PACKETS // 8
