"""Pure parts of the fabric: run plan, failure specs, workloads, EV arrays, convergence."""

from __future__ import annotations

from typing import Any

import pytest

from controller.convergence import Convergence
from mrcnet.fabric.ctlclient import ev_array
from mrcnet.fabric.failures import FailureSpecError, find_link, parse_schedule
from mrcnet.fabric.plan import PlanError, make_plan
from mrcnet.fabric.workloads import WorkloadError, flows_for
from topologies.addressing import host_gid, mac
from topologies.loader import load
from topologies.model import PathMode
from topologies.routes import switch_tables


@pytest.fixture(scope="module")
def clos2() -> Any:
    return load("clos-2p")


def test_plan_names_addresses_and_specs(clos2: Any) -> None:
    plan = make_plan(clos2, PathMode.STEV, "m1a2b")
    names = [n for s in plan.switches for n in s.ifnames.values()]
    names += [p.ifname for h in plan.hosts for p in h.ports]
    # switch side: 8 host-facing ports + 8 leaf-spine links x 2 ends; host side: 8 NIC ports
    assert len(names) == len(set(names)) == 8 + 16 + 8
    assert all(n.startswith("m1a2b") and len(n) <= 15 for n in names)
    h2 = plan.host("h2")
    port1 = h2.ports[1]
    assert port1.gid == "fd00:6d72:6300:1::3" == str(host_gid(clos2, "h2", 1))
    assert (port1.switch, port1.switch_port) == ("p1-leaf1", 1)
    assert port1.neighbor_mac == mac(clos2, "p1-leaf1", 1)
    leaf = next(s for s in plan.switches if s.name == "p0-leaf0")
    assert set(leaf.ingress) == {1, 2}  # host-facing ports shaped in both directions
    # the host direction queues by class (the NIC's priorities: ACKs not behind data), and a
    # NIC's queue holds 1024 MTU frames where the switch's holds 32 packets / 128 KiB
    assert leaf.egress[1] == "rate=1e+09,delay=5e-06,loss=0,qpkts=32,qbytes=131072"
    assert leaf.ingress[1] == (f"rate=1e+09,delay=5e-06,loss=0,qpkts=1024,qbytes={1024 * 4096},"
                               "nicprio=1")
    assert leaf.egress[3] == "rate=1e+09,delay=5e-06,loss=0,qpkts=32,qbytes=131072"
    with pytest.raises(PlanError, match="longer than 15"):
        make_plan(clos2, PathMode.STEV, "averylongpfx")


def test_an_ocs_serialises_nothing_a_gpu_nic_sends_and_wide_windows_ack_less_often() -> None:
    """Circuit fabrics: the GPU's NIC (the OCS's ingress shaping) serialises a frame once; the
    OCS's egress only delays it (light, no second store and forward). A GPU's SACKs cover
    an eighth of a wide window (at least 4 frames' wire time, the default window's)."""
    from mrcnet.fabric.runparams import ack_coalesce_frames, circuit_agent

    topo = load("scaleup-ocs")
    plan = make_plan(topo, topo.fabric.path_mode, "m1")
    (ocs,) = plan.switches
    assert ocs.egress and all(spec.startswith("rate=0,delay=1e-06,") for spec in
                              ocs.egress.values())
    assert all(spec.startswith("rate=1e+09,delay=1e-06,") and spec.endswith("nicprio=1")
               for spec in ocs.ingress.values())
    mtu = topo.fabric.mtu
    assert (ack_coalesce_frames(128 << 10, mtu), ack_coalesce_frames(2 << 20, mtu)) == (4, 64)
    for window, frames, count in ((128 << 10, 4, 8), (2 << 20, 64, 64)):
        core: dict[str, Any] = {}
        circuit_agent(plan, "g0", window, core)
        assert core["ack_delay"] == pytest.approx(frames * mtu * 8 / 1e9)
        assert core["ack_coalesce"] == count


def test_srv6_templates_name_the_spine_or_the_shared_leaf(clos2: Any) -> None:
    plan = make_plan(clos2, PathMode.SRV6, "m1")
    t = plan.host("h0").srv6_templates
    far = t["fd00:6d72:6300::3"]  # h2 on plane 0: through a spine chosen by EV bit 15
    assert far["slots"] == [{"base": 0x2000, "ev_shift": 15, "ev_width": 1}]
    near = t["fd00:6d72:6300::2"]  # h1, same leaf: the leaf's own uSID (decapsulates)
    assert near["slots"] == [{"base": 0x1000, "ev_shift": 0, "ev_width": 0}]
    assert near["block"] == hex(0xFCBBBB00)


def test_failure_specs(clos2: Any) -> None:
    link = find_link(clos2, "p0-leaf0-p0-spine0")
    assert {link.a.node, link.b.node} == {"p0-leaf0", "p0-spine0"}
    assert find_link(clos2, "p0-spine0-p0-leaf0") is link
    assert find_link(clos2, "p0-leaf0:3") is link
    assert find_link(clos2, str(link.index)) is link
    for bad in ("p0-leaf0-p0-leaf1", "h0-h1", "p0-leaf0:9", "99", "nothing", "\u00b9",
                "p0-leaf0:\u00b3"):
        with pytest.raises(FailureSpecError):
            find_link(clos2, bad)
    events = parse_schedule(clos2, ["h0-p0-leaf0@3"], ["h0-p0-leaf0@1.5"])
    assert [(e.at, e.up) for e in events] == [(1.5, True), (3.0, False)]
    for bad in ("p0-leaf0-p0-spine0", "p0-leaf0-p0-spine0@x", "p0-leaf0-p0-spine0@-1",
                "plane:2@1", "plane:x@1", "plane:@1"):
        with pytest.raises(FailureSpecError):
            parse_schedule(clos2, [bad], [])


def test_plane_failure_spec_names_every_link_of_the_plane(clos2: Any) -> None:
    (down, up) = parse_schedule(clos2, ["plane:1@2"], ["plane:1@4"])
    assert (down.at, down.up, down.label) == (2.0, False, "plane 1") and up.up
    want = {ln.index for ln in clos2.links
            if any(n.startswith("p1-") for n in (ln.a.node, ln.b.node))}
    assert {ln.index for ln in down.links} == want and len(want) == 8  # 4 host + 4 uplinks
    assert all(clos2.node(n).plane == 1 for ln in down.links for n in (ln.a.node, ln.b.node)
               if clos2.node(n).kind.value == "switch")


def test_workloads() -> None:
    hosts = ["h0", "h1", "h2", "h3"]
    a2a = flows_for("all-to-all", hosts)
    assert len(a2a) == 12 and len(set(a2a)) == 12 and all(a != b for a, b in a2a)
    perm = flows_for("permutation", hosts, seed=7)
    assert sorted(a for a, _ in perm) == hosts == sorted(b for _, b in perm)
    assert all(a != b for a, b in perm)
    assert flows_for("shift:2", hosts) == [("h0", "h2"), ("h1", "h3"), ("h2", "h0"),
                                           ("h3", "h1")]
    assert flows_for("pair:h1:h3", hosts) == [("h1", "h3")]
    for bad in ("shift:4", "pair:h1:h1", "pair:h1:h9", "ring"):
        with pytest.raises(WorkloadError):
            flows_for(bad, hosts)


@pytest.mark.parametrize("mode", list(PathMode))
def test_ev_array_covers_every_uplink_with_distinct_values(clos2: Any, mode: PathMode) -> None:
    _fmt, widths, evs = ev_array(clos2, mode)
    values = [int(e.value) for e in evs]
    assert len(values) == len(set(values))  # one value, one EV of one port
    assert {int(e.port) for e in evs} == {1, 2}
    total = sum(widths)
    assert total == {PathMode.ECMP: 16, PathMode.STEV: 32, PathMode.SRV6: 16}[mode]
    assert all(v < 1 << total for v in values)
    if mode != PathMode.ECMP:  # the spine bit (MSB) takes both values on each plane
        for port in (1, 2):
            assert {int(e.value) >> (total - 1) for e in evs if e.port == port} == {0, 1}


class _FakeClient:
    def __init__(self) -> None:
        self.writes: list[tuple[str, Any]] = []

    def modify(self, table: str, match: Any, action: str, params: Any) -> None:
        self.writes.append(("modify", (match, action, params)))

    def insert_group(self, profile: str, gid: int, members: Any) -> None:
        self.writes.append(("group", (gid, [m[2]["port"] for m in members])))

    def table_entry(self, *a: Any, **k: Any) -> Any:
        return (a, k)

    def update(self, kind: int, **entity: Any) -> Any:
        return entity

    def write(self, updates: Any) -> None:
        self.writes.append(("write", updates))


def test_convergence_withdraws_and_restores(clos2: Any) -> None:
    tables = switch_tables(clos2, PathMode.STEV)
    clients = {name: _FakeClient() for name in tables}
    conv = Convergence(clos2, tables, clients, delay=0.0)
    conv._stop.clear()
    with conv._lock:
        conv._port_down.add(("p0-leaf0", 3))  # p0-leaf0:3 -- p0-spine0:1
    want = conv.desired()
    # leaf0 reaches h2/h3 only through spine1 (port 4); leaf1 reaches h0/h1 only via spine1
    assert want == {
        ("p0-leaf0", "fd00:6d72:6300::3/128"): (4,),
        ("p0-leaf0", "fd00:6d72:6300::4/128"): (4,),
        ("p0-leaf1", "fd00:6d72:6300::1/128"): (4,),
        ("p0-leaf1", "fd00:6d72:6300::2/128"): (4,),
    }
    assert conv.reconcile() == 4
    leaf1 = clients["p0-leaf1"].writes
    assert leaf1[0] == ("group", (900, [4]))
    assert leaf1[-1][1][1:] == ("MrcIngress.route_ecmp", {"group": 900})
    assert conv.reconcile() == 0  # nothing changed
    with conv._lock:
        conv._port_down.clear()
    assert conv.reconcile() == 4 and conv.withdrawn == {}
    assert leaf1[-1][1][1] == "MrcIngress.route_ev"  # original action back


def test_flow_rows_carry_the_longest_stall_completion_time_and_counters() -> None:
    from mrcnet.fabric.workloads import Flow, Workload, flow_timing

    assert flow_timing([]) == (None, None) and flow_timing([[5.0, 0]]) == (None, None)
    progress = [[100.0, 0], [100.2, 65536], [100.3, 131072], [101.5, 196608], [101.6, 262144]]
    stall, fct = flow_timing(progress)
    assert stall == pytest.approx(1.2) and fct == pytest.approx(1.6)
    f = Flow("f", "h0", "h1", 262144, 1,
             writer={"progress": progress, "qp_state": "RTS",
                     "qp_stats": {"tx_rtx": 3, "rtx_nack": 2, "rtx_probe": 1, "timeouts": 1,
                                  "bytes_in_flight": 4096}},
             sink={"qp_state": "RTS", "qp_stats": {"rx_trimmed": 2, "tx_nack_trimmed": 2}})
    row = f.row()
    assert row["longest_stall_s"] == pytest.approx(1.2) and row["fct_s"] == pytest.approx(1.6)
    assert row["rtx"] == {"rtx_nack": 2, "rtx_probe": 1}
    wl = Workload("pair:h0:h1", "MRC", [f, f], 0.0)
    assert wl.mechanisms() == {"rtx_nack": 4, "rtx_probe": 2, "rx_trimmed": 4, "timeouts": 2,
                               "tx_nack_trimmed": 4, "tx_rtx": 6}  # gauges left out


def test_a_window_too_small_for_a_rings_acknowledgement_path_is_warned_about() -> None:
    """64 GPUs at 1 Gb/s with 5 us fibres: a ring's ACKs come back 63 hops, about
    64 x (2 x 5 us + 32.8 us) = 2.74 ms, 343 KB at the rate plus a SACK interval: the default
    128 KiB window is warned about (with a window that covers it suggested), 2 MiB is not;
    on 8 GPUs 128 KiB covers the path."""
    import yaml

    from mrcnet.fabric.runparams import circuit_window_warning
    from topologies.generate import DEFAULT_LINK, scaleup
    from topologies.loader import loads

    topo = loads(yaml.safe_dump(scaleup(64, 2, link={**DEFAULT_LINK, "delay": "5us"})))
    big = make_plan(topo, topo.fabric.path_mode, "w1")
    warning = circuit_window_warning(big, 128 << 10)
    rtt = 64 * (2 * 5e-6 + 4096 * 8 / 1e9)
    assert warning is not None and f"{rtt * 1e3:.2f} ms" in warning
    assert "--window 512KiB" in warning  # 342,835 + 16,384 bytes, rounded up to a power of 2
    assert circuit_window_warning(big, 2 << 20) is None
    small_topo = load("scaleup-ocs")
    assert circuit_window_warning(make_plan(small_topo, small_topo.fabric.path_mode, "w2"),
                                  128 << 10) is None
