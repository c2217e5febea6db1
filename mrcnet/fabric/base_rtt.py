"""The base RTT NSCC is scaled for, measured on the running fabric.

NSCC's window limit is 1.5 x link rate x base RTT, and its target delay a fraction of that
base RTT (common/nscc.py). A topology's base RTT counts link delays and serialisation only;
on the emulation every hop also costs a process's scheduling and packet handling (hundreds of
microseconds per switch and agent on 2 cores), so the real unloaded RTT is larger, and a
window scaled for the topology's figure cannot fill the links it was scaled for.

``measure_base_rtt`` runs one writer on the topology's farthest host pair that sends
``PACKETS`` single-MTU Writes one at a time (each a one-packet message: the SACK comes at
once, AckReq) with the fixed window, and takes the smallest network RTT its QP sampled
(service time subtracted). The profile's base RTT is the larger of that and the topology's.
"""

from __future__ import annotations

from typing import Any

from mrcnet.fabric.workloads import WorkloadRunner
from topologies.model import Topology
from topologies.paths import base_rtt, farthest_pair

PACKETS = 32  # RTT samples taken (one single-packet Write after the other)
TIMEOUT_S = 30.0


def measure_base_rtt(runner: WorkloadRunner, topo: Topology, alive: Any = None) -> dict[str, Any]:
    """{"topology_base_rtt", "measured_min_rtt" (None when no sample came), "base_rtt",
    "pair"}: the base RTT to scale NSCC for. Raises RuntimeError when the writer failed."""
    src, dst, _ = farthest_pair(topo)
    mtu = topo.fabric.mtu
    wl = runner.submit(f"pair:{src}:{dst}", PACKETS * mtu, "MRC", timeout=TIMEOUT_S,
                       cc_profile=0, extra={"chunk": mtu, "depth": 1})
    runner.wait(wl, TIMEOUT_S + 10, alive)
    summary = wl.summary()
    if not summary["completed"]:
        raise RuntimeError(f"base RTT calibration {src} -> {dst} failed: {summary['errors']}")
    measured = wl.flows[0].writer.get("rtt", {}).get("min_rtt")
    topo_rtt = base_rtt(topo)
    return {"pair": [src, dst], "topology_base_rtt": topo_rtt, "measured_min_rtt": measured,
            "base_rtt": max(topo_rtt, float(measured or 0.0))}
