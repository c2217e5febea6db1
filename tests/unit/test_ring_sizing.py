"""Receive rings sized from a port's link (common/pktring.py), as the switch and the
orchestrator's memory plan compute them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from common.pktring import FRAME_SIZE, FRAMES, MIN_FRAMES, STALL_WALL, frames_for, ring_bytes
from mrcnet.fabric.plan import receive_ring_bytes
from switch.main import build_parser, ring_slots
from switch.traffic import LinkConfig
from topologies.loader import load, resolve


def _expected(rate_bps: float, tdf: float, frame: int = 4096) -> int:
    """The rule, written out: the frames the link delivers in STALL_WALL wall seconds (plus
    one), within [MIN_FRAMES, FRAMES]."""
    n = math.floor(rate_bps / 8 / frame / tdf * STALL_WALL) + 1
    return min(FRAMES, max(MIN_FRAMES, n))


@pytest.mark.parametrize(("rate", "tdf"), [(100e6, 1), (1e9, 1), (1e9, 20), (10e9, 200),
                                           (10e9, 1), (400e9, 500)])
def test_slots_follow_the_frames_a_link_delivers_in_a_stall(rate: float, tdf: float) -> None:
    assert frames_for(rate, tdf) == _expected(rate, tdf)


def test_bounds_and_the_unlimited_link() -> None:
    assert frames_for(0.0, 1.0) == FRAMES  # no rate: as fast as the far end can send
    assert frames_for(1e3, 1.0) == MIN_FRAMES  # a whole window still fits
    assert frames_for(1e12, 1.0) == FRAMES
    assert frames_for(1e8, 1.0, 1500) > frames_for(1e8, 1.0, 4096)  # smaller frames: more


def test_ring_memory_is_whole_kernel_blocks() -> None:
    assert ring_bytes(0) == 0
    assert ring_bytes(1) == 65536  # one block of four 16 KiB slots
    assert ring_bytes(128) == 128 * FRAME_SIZE
    assert ring_bytes(FRAMES) == 16 << 20


def test_clos_2p_plan_before_and_after() -> None:
    """clos-2p has 24 switch ports (per plane: two leaves of 4, two spines of 2). At its 1 Gb/s
    and TDF 1 every ring is the largest (16 MiB: 384 MiB, what every run asked for before the
    rings were sized); at TDF 20 the smallest suffices (2 MiB each)."""
    topo = load(resolve("clos-2p"))
    assert receive_ring_bytes(topo, 1.0) == 24 * (16 << 20)
    assert receive_ring_bytes(topo, 20.0) == 24 * ring_bytes(_expected(1e9, 20))
    assert receive_ring_bytes(topo, 1.0, asked=0) == 0
    assert receive_ring_bytes(topo, 1.0, asked=256) == 24 * ring_bytes(256)


def test_a_switch_port_sizes_from_its_far_ends_side() -> None:
    host_side = LinkConfig(rate_bps=1e9)
    fabric_side = LinkConfig(rate_bps=10e9)
    unshaped = LinkConfig()
    assert ring_slots(None, fabric_side, unshaped, 1.0, 4096) == frames_for(10e9, 1.0)
    assert ring_slots(None, fabric_side, host_side, 1.0, 4096) == frames_for(1e9, 1.0)
    assert ring_slots(64, fabric_side, host_side, 1.0, 4096) == 64  # asked for: as asked
    assert ring_slots(None, unshaped, unshaped, 1.0, 4096) == FRAMES


def test_the_switch_command_line_takes_auto_or_slots() -> None:
    parser = build_parser()
    base = ["--name", "s", "--grpc-addr", "127.0.0.1:1", "--port", "1=x"]
    assert parser.parse_args(base).rx_ring is None  # auto
    assert parser.parse_args([*base, "--rx-ring", "auto"]).rx_ring is None
    assert parser.parse_args([*base, "--rx-ring", "0"]).rx_ring == 0
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--rx-ring", "lots"])


def test_a_fabric_whose_rings_do_not_fit_is_refused_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The orchestrator plans the rings' memory first: more than half of what is available
    is refused with the numbers, and no switch, host or controller was started."""
    from mrcnet.fabric import orchestrator
    from mrcnet.fabric.orchestrator import Fabric, FabricError, RunOptions

    monkeypatch.setattr(orchestrator, "mem_available", lambda: 256 << 20)
    fab = Fabric(RunOptions(topology="clos-2p", rate="1Gbps", results_root=tmp_path))
    with pytest.raises(FabricError, match=r"receive rings need 0\.38 GiB .*24 ports at TDF 1"):
        fab.start()
    assert fab.mn is None and not fab.agents
    # the same fabric at TDF 20 (48 MiB of rings) gets past the plan
    assert receive_ring_bytes(load(resolve("clos-2p")), 20.0) < (256 << 20) // 2
