"""Where the page's data comes from: a running fabric, a finished run, or a synthetic one.

Each source gives ``topology()`` (mrcnet/web/layout.py, once) and ``snapshot()`` (what the
page draws now, mrcnet/web/snapshot.py). ``LiveSource`` reads only what the run already
samples: the live view's latest ``Sample`` (switch admin service reads, mrcnet/fabric/
liveview.py), the ``EvTracker``'s EV states, the link log, the QPs the agents' qlog shows
(``QpTail``), and on circuit fabrics the controller's circuits and collective records
(``GetCircuits``, ``GetCollective`` through the run's controller client). It opens no
P4Runtime session. ``ReplaySource`` plays a finished run's ``results.json`` (or
``collectives.json``) in a loop at the speed of its own clock. ``SyntheticSource`` animates a
topology file with made-up loads, for trying the page on a large fabric without running it.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from mrcnet.fabric.liveview import Sample
from mrcnet.web.layout import layout
from mrcnet.web.snapshot import LinkIndex, packet_snapshot, qp_states
from topologies.loader import load
from topologies.model import NodeKind, Topology


class Source(Protocol):
    def topology(self) -> dict[str, Any]: ...

    def snapshot(self) -> dict[str, Any]: ...


def _clock(tdf: float, mode: str) -> dict[str, Any]:
    return {"tdf": tdf, "time": "virtual" if tdf != 1.0 else "wall", "source": mode}


def collective_view(state: Any) -> dict[str, Any]:
    """A ``CollectiveState`` (controller) as the page's step timeline."""
    return {"session": state.session, "steps": int(state.steps), "done": bool(state.done),
            "reconfigurations": int(state.reconfigurations), "error": state.error,
            "records": [{"step": r.step, "interval": r.interval, "reconfigured": r.reconfigured,
                         "first_arrival_s": r.first_arrival_s,
                         "last_arrival_s": r.last_arrival_s, "released_s": r.released_s,
                         "dark_start_s": r.dark_start_s, "dark_end_s": r.dark_end_s}
                        for r in state.records]}


class LiveSource:
    """A running ``Fabric`` (mrcnet/fabric/orchestrator.py)."""

    def __init__(self, fab: Any) -> None:
        self.fab = fab
        assert fab.topo is not None
        self.topo: Topology = fab.topo
        self.index = LinkIndex(self.topo)
        self._topology = layout(self.topo)
        self._ev_count: int | None = None
        self._lock = threading.Lock()

    def topology(self) -> dict[str, Any]:
        return self._topology

    def ev_count(self) -> int:
        if self._ev_count is None:
            try:
                self._ev_count = len(self.fab.ctl.ev_array()) if self.fab.ctl else 0
            except Exception:  # the controller is stopping; counts without the total
                return 0
        return self._ev_count

    def _qps(self) -> list[dict[str, Any]]:
        tracker = self.fab.tracker
        known: set[tuple[str, int]] = set()
        sampler = self.fab.sampler
        if sampler is not None and sampler.qps is not None:
            known |= set(sampler.qps.latest)
        with tracker.lock:
            latest = dict(tracker.latest)
        return qp_states(latest, known, self.ev_count())

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            clock = _clock(self.fab.clock.tdf, "live")
            if self.fab.circuit:
                return {**clock, "t": round(self.fab.clock.now() - self.fab.tracker.t0, 3),
                        **self._circuits()}
            sampler = self.fab.sampler
            sample = sampler.samples[-1] if sampler is not None and sampler.samples else None
            return packet_snapshot(self.index, sample, list(self.fab.link_log), self._qps(),
                                   clock)

    def _circuits(self) -> dict[str, Any]:
        from common.proto import mrc_ctl_pb2 as pb

        ctl = self.fab.ctl
        out: dict[str, Any] = {"circuits": [], "collective": None}
        if ctl is None:
            return out
        try:
            state = ctl.fabric.GetCircuits(pb.GetCircuitsRequest(), timeout=2.0)
            out["circuits"] = [[c.src, c.dst] for c in state.circuits]
            session = latest_session(self.fab.run_dir)
            if session:
                coll = ctl.fabric.GetCollective(pb.GetCollectiveRequest(session=session),
                                                timeout=2.0)
                out["collective"] = collective_view(coll)
        except Exception as exc:  # the controller is busy or stopping: say so on the page
            out["error"] = str(exc)[:200]
        return out


def latest_session(run_dir: Path) -> str | None:
    """The collective run started last (its folder under collectives/)."""
    folders = [p for p in (run_dir / "collectives").glob("*") if p.is_dir()]
    return max(folders, key=lambda p: p.stat().st_mtime).name if folders else None


class ReplaySource:
    """A finished run's results, replayed in a loop on its own clock."""

    def __init__(self, run_dir: Path, speed: float = 1.0) -> None:
        self.run_dir = Path(run_dir)
        topo_file = self.run_dir / "topology.yaml"
        if not topo_file.exists():
            raise FileNotFoundError(f"{run_dir}: no topology.yaml (not a run folder of "
                                    "mrcnet up)")
        self.topo = load(str(topo_file))
        self.index = LinkIndex(self.topo)
        self._topology = layout(self.topo)
        self.speed = speed
        res_path = self.run_dir / "results.json"
        coll_path = self.run_dir / "collectives.json"
        self.results = json.loads(res_path.read_text()) if res_path.exists() else {}
        self.collectives = json.loads(coll_path.read_text()) if coll_path.exists() else {}
        if not self.results and not self.collectives:
            raise FileNotFoundError(f"{run_dir}: no results.json or collectives.json yet")
        fields = set(Sample.__dataclass_fields__)
        self.samples = [Sample(**{k: v for k, v in s.items() if k in fields})
                        for s in self.results.get("samples", [])]
        self.tdf = float(self.results.get("tdf", 1.0))
        self.t0 = time.monotonic()

    def topology(self) -> dict[str, Any]:
        return self._topology

    def position(self) -> float:
        """The replayed run's time now (seconds of its clock)."""
        if not self.samples:
            return 0.0
        first, last = self.samples[0].t, self.samples[-1].t
        span = max(1e-3, last - first)
        return first + ((time.monotonic() - self.t0) * self.speed) % span

    def snapshot(self) -> dict[str, Any]:
        clock = _clock(self.tdf, "replay")
        if self.topo.fabric.kind.value == "circuit":
            return {**clock, "t": 0.0, **self._collective()}
        t = self.position()
        sample = None
        for s in self.samples:
            if s.t > t:
                break
            sample = s
        log = [e for e in self.results.get("link_events", []) if e["t"] <= t]
        latest: dict[tuple[str, int, int, int], str] = {}
        for e in self.results.get("ev_events", []):
            if e["t"] <= t:
                latest[(e["host"], int(e["qpn"]), int(e["ev"]), int(e["port"]))] = e["state"]
        out = packet_snapshot(self.index, sample, log, qp_states(latest, (), 0), clock)
        out["t"] = round(t, 3)
        out["span"] = [self.samples[0].t, self.samples[-1].t] if self.samples else [0, 0]
        return out

    def _collective(self) -> dict[str, Any]:
        runs = self.collectives.get("runs", [])
        if not runs:
            return {"circuits": [], "collective": None}
        i = int((time.monotonic() - self.t0) * self.speed / 3.0) % len(runs)  # 3 s per run
        run = runs[i]
        plan = run.get("plan", {})
        intervals = plan.get("intervals", [])
        circuits = []
        if intervals:
            for u, pu, v, pv in intervals[-1].get("circuits", []):
                circuits.append([f"{self._gpu(u)}:{pu}", f"{self._gpu(v)}:{pv}"])
        return {"circuits": circuits, "collective": {
            "session": run.get("tag", f"run {i + 1}"), "steps": len(plan.get("steps", [])),
            "done": True, "reconfigurations": run.get("reconfigurations", 0), "error": "",
            "records": run.get("records", [])}}

    def _gpu(self, rank: int) -> str:
        gpus = self.topo.nodes_of(NodeKind.GPU, NodeKind.HOST)
        return gpus[rank].name if 0 <= rank < len(gpus) else str(rank)


class SyntheticSource:
    """Made-up loads on a topology file (every link a random walk, one spine link down, a
    queue at a few ports, a few QPs with ASSUMED_BAD EVs): the page on a large fabric."""

    def __init__(self, topo: Topology, seed: int = 1) -> None:
        self.topo = topo
        self.index = LinkIndex(topo)
        self._topology = layout(topo)
        self.rng = random.Random(seed)
        self.t0 = time.monotonic()
        self.level = [self.rng.random() for _ in topo.links]
        sw = [ln for ln in topo.links if all(topo.node(e.node).kind == NodeKind.SWITCH
                                             for e in (ln.a, ln.b))]
        self.failed = sw[0] if sw else None
        self.hosts = [h.name for h in topo.nodes_of(NodeKind.HOST, NodeKind.GPU)]

    def topology(self) -> dict[str, Any]:
        return self._topology

    def snapshot(self) -> dict[str, Any]:
        t = time.monotonic() - self.t0
        rng = self.rng
        port_bps: dict[str, float] = {}
        depth: dict[str, int] = {}
        down: list[str] = []
        for i, ln in enumerate(self.topo.links):
            self.level[i] = min(1.0, max(0.0, self.level[i] + rng.uniform(-0.1, 0.1)))
            key = next((f"{e.node}:{e.port}" for e in (ln.a, ln.b)
                        if f"{e.node}:{e.port}" in self.index.port_link), None)
            if key is None:
                continue
            if ln is self.failed:
                down.append(key)
                continue
            port_bps[key] = self.level[i] * (ln.params.rate_bps or 1e9)
            if self.level[i] > 0.8:
                depth[key] = int((self.level[i] - 0.8) * 5 * (ln.params.queue_bytes or 1 << 20))
        planes = [0.0] * self.topo.fabric.planes
        for key, bps in port_bps.items():
            i = self.index.port_link[key]
            ln = self.topo.links[i]
            if any(self.topo.node(e.node).kind == NodeKind.HOST for e in (ln.a, ln.b)):
                planes[int(self.topo.node(key.rpartition(":")[0]).plane or 0)] += bps
        sample = Sample(round(t, 3), planes, 0, 0, 0, 0, [0] * len(planes),
                        port_bps=port_bps, port_depth=depth, ports_down=down)
        latest = {(h, 100 + k, 0x100 | k, 1): ("ASSUMED_BAD" if k % 5 == 0 else "GOOD")
                  for k, h in enumerate(self.hosts)}
        qps = qp_states(latest, [(h, 100 + k) for k, h in enumerate(self.hosts)], 32)
        return packet_snapshot(self.index, sample, [], qps, _clock(1.0, "synthetic"))
