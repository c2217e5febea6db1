"""Chaos runs: random failures while verified workloads keep running, and the verdict.

``chaos_schedule`` draws a bounded, reproducible (seeded) sequence of faults for a packet
fabric: link flaps between switches, host NIC port flaps (carrier, seen by the agent) and
exactly one whole-plane outage, one fault at a time with a short gap, so every host keeps a
working plane. ``port_flaps`` does the same with port flaps only (a photonic domain has one
plane and no switch-to-switch links). ``verdict`` checks what a chaos run must show: every
round verified byte for byte, no QP in ERR, every fault applied, and nothing of the run left
on the machine. ``run_packet_chaos`` does all of it on a fresh fabric (the CI test and
``mrcnet bench chaos``).
"""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass
from typing import Any

from mrcnet.fabric.failures import FabricEvent, HostPortEvent, LinkEvent, plane_links
from mrcnet.fabric.orchestrator import Fabric, RunOptions
from mrcnet.fabric.scenario import run_scenario
from topologies.model import NodeKind, Topology


@dataclass(frozen=True)
class ChaosSpec:
    duration: float  # seconds over which faults are drawn
    seed: int = 1
    down: tuple[float, float] = (0.3, 1.0)  # how long a flap lasts (s), drawn uniformly
    gap: tuple[float, float] = (0.3, 0.8)  # quiet time between two faults (s)
    plane_down: float = 1.5  # how long the plane outage lasts (s)
    start: float = 0.5  # first fault not before this


def _flap(at: float, length: float, what: tuple[str, Any]) -> list[FabricEvent]:
    kind, target = what
    if kind == "port":
        host, port = target
        return [HostPortEvent(at, host, port, False), HostPortEvent(at + length, host, port, True)]
    links, label = target
    return [LinkEvent(at, links, False, label), LinkEvent(at + length, links, True, label)]


def chaos_schedule(topo: Topology, spec: ChaosSpec) -> list[FabricEvent]:
    """Link flaps, host port flaps and one plane outage, one at a time, in random order."""
    rng = random.Random(spec.seed)
    switches = {n.name for n in topo.nodes_of(NodeKind.SWITCH)}
    fabric_links = [ln for ln in topo.links if ln.a.node in switches and ln.b.node in switches]
    hosts = [n.name for n in topo.nodes_of(NodeKind.HOST, NodeKind.GPU)]
    planes = sorted({n.plane for n in topo.nodes_of(NodeKind.SWITCH) if n.plane is not None})
    outage_at = rng.uniform(spec.start, max(spec.start, spec.duration * 0.6))
    plane = rng.choice(planes)
    out: list[FabricEvent] = []
    t = spec.start
    planned = False
    while t < spec.duration:
        if not planned and t >= outage_at:
            out += _flap(t, spec.plane_down, ("links", (plane_links(topo, plane),
                                                        f"plane {plane}")))
            t += spec.plane_down + rng.uniform(*spec.gap)
            planned = True
            continue
        length = rng.uniform(*spec.down)
        if fabric_links and rng.random() < 0.5:
            link = rng.choice(fabric_links)
            out += _flap(t, length, ("links", ((link,), f"{link.a.node}-{link.b.node}")))
        else:
            host = rng.choice(hosts)
            out += _flap(t, length, ("port", (host, rng.choice(sorted(topo.ports(host))))))
        t += length + rng.uniform(*spec.gap)
    if not planned and len(planes) > 1:
        out += _flap(t, spec.plane_down, ("links", (plane_links(topo, plane), f"plane {plane}")))
    return sorted(out, key=lambda e: e.at)


def port_flaps(topo: Topology, spec: ChaosSpec, count: int) -> list[FabricEvent]:
    """``count`` host (GPU) port flaps, one at a time, from ``spec.start`` on."""
    rng = random.Random(spec.seed)
    hosts = [n.name for n in topo.nodes_of(NodeKind.HOST, NodeKind.GPU)]
    out: list[FabricEvent] = []
    t = spec.start
    for _ in range(count):
        length = rng.uniform(*spec.down)
        host = rng.choice(hosts)
        out += _flap(t, length, ("port", (host, rng.choice(sorted(topo.ports(host))))))
        t += length + rng.uniform(*spec.gap)
    return out


def leftovers(prefix: str) -> list[str]:
    """Interfaces, namespaces and processes whose names carry the run prefix."""
    found = []
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True)
    for line in links.stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(prefix):
            found.append(f"interface {name}")
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    found += [f"netns {ln.split()[0]}" for ln in netns.stdout.splitlines()
              if ln.split() and prefix in ln.split()[0]]
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True)
    found += [f"process {ln.strip()}" for ln in ps.stdout.splitlines()[1:]
              if prefix in ln and "ps -eo" not in ln]
    return found


def verdict(res: dict[str, Any], events: list[FabricEvent]) -> dict[str, Any]:
    """What a chaos run shows, and whether it passed: every round completed and verified,
    zero QP errors, every fault applied."""
    rounds = res.get("workloads", [])
    lost = sum(int(w["flows"]) - int(w["verified_flows"]) for w in rounds)
    out = {
        "rounds": len(rounds),
        "verified_bytes": int(res.get("verified_bytes", 0)),
        "unverified_flows": lost,
        "qp_errors": int(res.get("qp_errors", 0)),
        "faults": len(events) // 2,
        "faults_applied": len(res.get("link_events", [])) // 2,
        "failure_errors": list(res.get("failure_errors", [])),
        "retransmissions": {k: v for k, v in res.get("mechanisms", {}).items()
                            if k.startswith("rtx_")},
    }
    out["passed"] = bool(rounds) and lost == 0 and out["qp_errors"] == 0 and \
        not out["failure_errors"] and out["faults_applied"] == out["faults"] and \
        bool(res.get("completed"))
    return out


def run_packet_chaos(opts: RunOptions, spec: ChaosSpec, size: int = 1 << 20,
                     workload: str = "all-to-all") -> dict[str, Any]:
    """Bring up a fabric, run ``workload`` rounds under ``chaos_schedule`` for
    ``spec.duration`` seconds, stop it; the verdict, the kinds of faults and what was left."""
    fab = Fabric(opts)
    try:
        fab.start()
        assert fab.topo is not None
        events = chaos_schedule(fab.topo, spec)
        res = run_scenario(fab, workload, size, events=events, duration=spec.duration,
                           timeout=120.0)
    finally:
        fab.stop()
    out = verdict(res, events)
    out["leftovers"] = leftovers(fab.prefix)
    out["passed"] = out["passed"] and not out["leftovers"]
    out["kinds"] = sorted({"plane" if e.label.startswith("plane") else
                           "port" if isinstance(e, HostPortEvent) else "link" for e in events})
    out["results_dir"] = res["results_dir"]
    return out
