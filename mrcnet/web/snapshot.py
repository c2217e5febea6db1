"""What the page draws at one moment, from the figures the fabric already samples.

``LinkIndex`` maps each switch port (``switch:port``, as the live view's samples key them,
mrcnet/fabric/portstats.py) to its link, so a ``Sample`` becomes one load per link: the
larger of its two directions (each switch end's egress, and for host links the switch's
ingress, which is what the host sent) over the link's rate. A link is down when a switch end
reports its port down (admin or carrier), or, for switches without port state (BMv2), when
the run's link log says so. ``qp_states`` gives every QP's EV state counts from the latest
EV reports (only EVs that changed are reported: the rest of the profile is GOOD).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mrcnet.fabric.liveview import Sample
from topologies.model import NodeKind, Topology


class LinkIndex:
    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.count = len(topo.links)
        self.rate = [ln.params.rate_bps for ln in topo.links]
        self.port_link: dict[str, int] = {}
        switchy = (NodeKind.SWITCH, NodeKind.OCS)
        for i, ln in enumerate(topo.links):
            for end in (ln.a, ln.b):
                if topo.node(end.node).kind in switchy:
                    self.port_link[f"{end.node}:{end.port}"] = i

    def loads(self, sample: Sample | None) -> tuple[list[float], list[float]]:
        """(load fraction, bits/s) per link: the busier direction."""
        bps = [0.0] * self.count
        if sample is not None:
            for figures in (sample.port_bps, sample.port_in_bps):
                for key, value in figures.items():
                    i = self.port_link.get(key)
                    if i is not None and value > bps[i]:
                        bps[i] = value
        load = [round(b / r, 4) if r > 0 else 0.0 for b, r in zip(bps, self.rate)]
        return load, [round(b) for b in bps]

    def down(self, sample: Sample | None, link_log: Iterable[Mapping[str, Any]] = ()
             ) -> list[int]:
        """Indices of the links down now."""
        out = set()
        if sample is not None:
            for key in sample.ports_down:
                i = self.port_link.get(key)
                if i is not None:
                    out.add(i)
        out |= self._logged_down(link_log)
        return sorted(out)

    def _logged_down(self, link_log: Iterable[Mapping[str, Any]]) -> set[int]:
        """Links the run's link log leaves down (labels as the orchestrator logs them)."""
        from mrcnet.fabric.failures import FailureSpecError, find_link, plane_links

        state: dict[str, bool] = {}
        for e in link_log:
            state[str(e["link"])] = bool(e["up"])
        out: set[int] = set()
        for label, up in state.items():
            if up:
                continue
            try:
                if label.startswith("plane "):
                    links = list(plane_links(self.topo, int(label.split()[1])))
                elif ":" in label:
                    host, _, port = label.rpartition(":")
                    ln = self.topo.link_at(host, int(port))
                    links = [ln] if ln is not None else []
                else:
                    links = [find_link(self.topo, label)]
            except (FailureSpecError, ValueError, KeyError):
                continue
            out |= {ln.index for ln in links}
        return out

    def depths(self, sample: Sample | None) -> dict[str, dict[str, int]]:
        """Switch -> port -> bytes queued at its egress now (ports with a queue only)."""
        out: dict[str, dict[str, int]] = {}
        if sample is not None:
            for key, depth in sample.port_depth.items():
                switch, _, port = key.rpartition(":")
                out.setdefault(switch, {})[port] = int(depth)
        return out


def qp_states(latest: Mapping[tuple[str, int, int, int], str],
              known: Iterable[tuple[str, int]], ev_count: int) -> list[dict[str, Any]]:
    """Per QP (``host/qpn``): EVs GOOD, ASSUMED_BAD, DENIED and which are not GOOD; the QPs
    with EVs not GOOD first."""
    per: dict[tuple[str, int], dict[str, Any]] = {
        q: {"bad": 0, "denied": 0, "not_good": []} for q in known}
    for (host, qpn, ev, port), state in sorted(latest.items()):
        row = per.setdefault((host, qpn), {"bad": 0, "denied": 0, "not_good": []})
        if state == "ASSUMED_BAD":
            row["bad"] += 1
        elif state == "DENIED":
            row["denied"] += 1
        else:
            continue
        row["not_good"].append(f"{ev:#x}@{port} {state}")
    out = []
    for (host, qpn), row in sorted(per.items(), key=lambda kv: (
            -(kv[1]["bad"] + kv[1]["denied"]), kv[0])):
        good = max(0, ev_count - row["bad"] - row["denied"]) if ev_count else None
        out.append({"qp": f"{host}/{qpn}", "good": good, **row})
    return out


def packet_snapshot(index: LinkIndex, sample: Sample | None, link_log: Iterable[Mapping[str, Any]],
                    qps: list[dict[str, Any]], clock: Mapping[str, Any]) -> dict[str, Any]:
    load, bps = index.loads(sample)
    return {
        **clock,
        "t": round(sample.t, 3) if sample is not None else 0.0,
        "load": load, "bps": bps, "down": index.down(sample, link_log),
        "depth": index.depths(sample),
        "planes": [round(b) for b in sample.plane_bps] if sample is not None else [],
        "totals": ({"drops": sample.drops, "trims": sample.trims, "ecn": sample.ecn,
                    "ev_bad": sample.ev_bad} if sample is not None else {}),
        "qps": qps,
    }
