"""The simulated fabric (mrcnet.sim): real frames through the real pipelines and traffic
managers of every switch on the scheduler's clock, checked against an independent computation
of path, timing and rate from the topology file."""

from __future__ import annotations

from itertools import pairwise

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrcnet.fabric.workloads import workload_flows
from mrcnet.sim.events import Scheduler
from mrcnet.sim.fabric import SimError, SimFabric, build_fabric
from mrcnet.sim.hostnode import SimHost, agent_config
from mrcnet.sim.run import SimOptions, simulate
from mrcnet.sim.workload import start_flows
from topologies.addressing import host_gid, mac
from topologies.loader import load
from topologies.model import PathMode, Topology
from topologies.paths import attached_switch
from topologies.trace import trace

MODE = PathMode.STEV  # EV bits pick every uplink, so the path is predictable exactly


def mrc_frame(topo: Topology, src: str, dst: str, ev: int, payload: int = 1000) -> bytes:
    """An MRC RDMA WRITE frame as a host's NIC port 0 sends it (plane 0, Structured EV)."""
    bth = bytes([0xCA, 0, 0xFF, 0xFF, 0, 0, 0, 0x10, 0, 0, 0, 1])
    sw, port = attached_switch(topo, src, 0)
    return bytes(
        Ether(src=mac(topo, src, 0), dst=mac(topo, sw, port))
        / IPv6(src=str(host_gid(topo, src, 0)), dst=str(host_gid(topo, dst, 0)), tc=10 << 2,
               fl=(ev >> 16) & 0xFFFF)
        / UDP(sport=ev & 0xFFFF, dport=4791, chksum=0)
        / Raw(bth + bytes(16) + bytes(payload))
    )


class Capture:
    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.got: list[tuple[float, int, bytes]] = []

    def receive(self, port: int, frame: bytes) -> None:
        self.got.append((self.sched.now, port, frame))


def cabled(topo: Topology) -> tuple[SimFabric, dict[str, Capture]]:
    fab = build_fabric(topo, MODE)
    caps = {}
    for h in topo.hosts:
        caps[h.name] = Capture(fab.sched)
        for port in topo.ports(h.name):
            fab.attach(h.name, port, caps[h.name])
    return fab, caps


def path_time(topo: Topology, nodes: tuple[str, ...], size: int) -> float:
    """Store and forward over idle links: each link serialises the frame, then delays it."""
    total = 0.0
    for a, b in pairwise(nodes):
        (link,) = [lk for lk in topo.links if {lk.a.node, lk.b.node} == {a, b}]
        total += size * 8 / link.params.rate_bps + link.params.delay_s
    return total


@pytest.mark.parametrize("ev", [0, 1 << 29, 3 << 29])
def test_a_frame_takes_the_traced_path_and_arrives_when_the_links_say(ev: int) -> None:
    topo = load("clos-2p")
    fab, caps = cabled(topo)
    frame = mrc_frame(topo, "h0", "h3", ev)
    fab.send("h0", 0, frame)
    fab.sched.run()
    want = trace(topo, MODE, 0, "h0", "h3", ev).nodes
    assert [len(c.got) for c in caps.values()] == [0, 0, 0, 1]
    when, port, out = caps["h3"].got[0]
    assert port == 0
    assert when == pytest.approx(path_time(topo, want, len(frame)), rel=1e-9)
    # every switch on the traced path saw the frame once, no other switch saw it
    seen = {name: sw.counters.rx_frames for name, sw in fab.switches.items()}
    assert seen == {name: int(name in want) for name in fab.switches}
    # the last hop wrote the host's MAC and decremented the hop limit once per switch
    e = Ether(out)
    assert e.dst == mac(topo, "h3", 0)
    assert e[IPv6].hlim == IPv6(bytes(Ether(frame).payload)).hlim - (len(want) - 2)


def test_an_incast_drains_at_the_last_hop_rate() -> None:
    """Two senders at line rate into one host: the leaf's egress queue builds, and frames
    leave it back to back, one frame time apart, with none lost (the queue holds them)."""
    topo = load("clos-2p")
    fab, caps = cabled(topo)
    n = 10
    frames = [mrc_frame(topo, src, "h3", i << 29) for i in range(n) for src in ("h0", "h1")]
    for f in frames:
        fab.send("h0" if Ether(f)[IPv6].src == str(host_gid(topo, "h0", 0)) else "h1", 0, f)
    fab.sched.run()
    times = [t for t, _, _ in caps["h3"].got]
    assert len(times) == 2 * n
    size = len(frames[0])
    last_hop = topo.link_at("h3", 0)
    assert last_hop is not None
    frame_time = size * 8 / last_hop.params.rate_bps
    first = path_time(topo, trace(topo, MODE, 0, "h0", "h3", 0).nodes, size)
    assert times[0] == pytest.approx(first, rel=1e-9)
    gaps = [b - a for a, b in pairwise(times)]
    # once the two streams meet, the last hop is never idle: one frame time per frame
    assert gaps[-1] == pytest.approx(frame_time, rel=1e-6)
    assert times[-1] - times[0] >= (2 * n - 1) * frame_time * (1 - 1e-9)
    leaf = fab.switches[attached_switch(topo, "h3", 0)[0]]
    assert leaf.tm.egress[attached_switch(topo, "h3", 0)[1]].stats.tail_drops == 0


def test_a_cut_link_loses_frames_and_a_restored_one_carries_them() -> None:
    topo = load("clos-2p")
    fab, caps = cabled(topo)
    leaf, _ = attached_switch(topo, "h3", 0)
    fab.set_link(leaf, "h3", up=False)
    fab.send("h0", 0, mrc_frame(topo, "h0", "h3", 0))
    fab.sched.run()
    assert caps["h3"].got == []
    fab.set_link(leaf, "h3", up=True)
    fab.send("h0", 0, mrc_frame(topo, "h0", "h3", 0))
    fab.sched.run()
    assert len(caps["h3"].got) == 1
    with pytest.raises(SimError, match="no link between"):
        fab.set_link("h0", "h3", up=False)


def test_the_same_inputs_give_the_same_run() -> None:
    topo = load("clos-2p")

    def run() -> list[tuple[float, int, bytes]]:
        fab, caps = cabled(topo)
        for i in range(6):
            for src in ("h0", "h1", "h2"):
                fab.send(src, 0, mrc_frame(topo, src, "h3", i << 29, payload=200 * (i + 1)))
        fab.sched.run()
        return caps["h3"].got

    assert run() == run()


def test_a_circuit_fabric_gets_an_ocs_and_refuses_packet_workloads() -> None:
    fab = build_fabric(load("scaleup-ocs"))
    (ocs,) = fab.switches.values()
    assert ocs.pipeline.program is not None and ocs.pipeline.program.name == "ocs"
    assert sorted(ocs.tm.egress) == list(range(1, 17))
    with pytest.raises(SimError, match="circuit fabric"):
        simulate(load("scaleup-ocs"), SimOptions())


def test_scheduler_orders_ties_by_scheduling_and_skips_cancelled() -> None:
    sched = Scheduler()
    seen: list[str] = []
    sched.at(2.0, lambda: seen.append("b"))
    sched.at(1.0, lambda: seen.append("a"))
    sched.at(2.0, lambda: seen.append("c"))
    dead = sched.at(1.5, lambda: seen.append("x"))
    dead.cancel()
    sched.at(0.5, lambda: sched.at(0.1, lambda: seen.append("past-is-now")))
    assert sched.run(until=1.9) == 3
    assert seen == ["past-is-now", "a"] and sched.now == 1.9
    sched.run()
    assert seen == ["past-is-now", "a", "b", "c"] and sched.now == 2.0


def _hosts(topo: Topology, mode: PathMode, window: int = 64 * 1024
           ) -> tuple[SimFabric, dict[str, SimHost]]:
    fab = build_fabric(topo, mode)
    return fab, {h.name: SimHost(h.name, fab, agent_config(fab.plan, h.name, mode, window))
                 for h in topo.hosts}


@pytest.mark.parametrize("qp_type", ["MRC", "RC"])
def test_real_transport_cores_move_verified_bytes_across_the_fabric(qp_type: str) -> None:
    """A permutation of the emulation's writer and sink jobs between the real HostCores, as
    frames through the real switches: every byte lands where it should, no flow beats its
    line rate, every work request of the plan completes."""
    topo = load("clos-2p")
    fab, hosts = _hosts(topo, PathMode.ECMP)
    size = 640 * 1024  # three 256 KiB work requests, the last a WriteImm of 128 KiB
    pairs = [("h0", "h2"), ("h1", "h3"), ("h2", "h1"), ("h3", "h0")]
    flows = workload_flows(pairs, size, seed=3, count=1)
    jobs = start_flows(hosts, flows, {"size": size, "qp_type": qp_type}, seed=3)
    fab.sched.run(until=1.0)
    assert [(f.writer["errors"], f.sink["errors"], f.verified) for f in flows] == \
        [([], [], True)] * len(pairs)
    planes = 2 if qp_type == "MRC" else 1  # RC stays on one plane
    rate = topo.links[0].params.rate_bps * planes
    for f in flows:
        assert f.writer["completed_wrs"] == 3 and f.sink["imm_completions"] == 1
        assert f.writer["seconds"] > size * 8 / rate
        assert [b for _t, b in f.writer["progress"]] == [0, 256 << 10, 512 << 10, size]
        assert f.writer["qp_stats"]["tx_data"] >= size // topo.fabric.mtu
    # a finished flow leaves no QP behind (the jobs release theirs, as the emulation's do)
    assert all(not h.core.qp_numbers() for h in hosts.values())
    assert all(j.flow.writer["qp_state"] == "RTS" for j in jobs)  # read before release
    sent = sum(h.tx_frames for h in hosts.values())
    got = sum(h.rx_frames for h in hosts.values())
    assert 0 < got <= sent


def test_bytes_other_than_the_writer_data_are_not_verified() -> None:
    """The check is real: a byte of the source changed after the expected hash was taken
    (before it was sent) arrives as it is, and the flow is not verified."""
    topo = load("clos-1p")
    fab, hosts = _hosts(topo, PathMode.ECMP)
    size = 512 * 1024
    flows = workload_flows([("h0", "h1"), ("h1", "h0")], size, seed=1, count=1)
    jobs = start_flows(hosts, flows, {"size": size, "qp_type": "MRC"}, seed=1)
    # the second writer's last byte (its own: the windows of the stream overlap, this one is
    # past the first's end), in a work request not posted yet
    jobs[1].data[size - 1] ^= 0xFF
    fab.sched.run(until=1.0)
    assert [f.sink["errors"] for f in flows] == [[], []]  # the transport did its job
    assert [f.verified for f in flows] == [True, False]
