"""One simulated run into its run folder: the topology as run (after ``--rate/--delay``),
results.json and perf.json; for a single run also each QP's qlog (``qlog/``) and the
emulation's plots (mrcnet/fabric/results.py ``plot``: overview, goodput, EV states,
retransmissions, and cc.png of an NSCC writer QP), on simulated time. `mrcnet sim` calls it
once, `mrcnet sim sweep` once per point of its grid (in a worker process, without qlog and
plots: the sweep plots its grid), so both write the same results the same way."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from mrcnet.sim.run import Progress, SimOptions, SimRun, simulate
from topologies.model import Topology


def prepare(topology: str, rate: str | None, delay: str | None) -> tuple[Topology, str]:
    """The topology (name or file) with every link's rate/delay replaced when given, and
    its YAML text as run. TopologyError/ValueError for a bad file or value."""
    from mrcnet.fabric.plan import derive_topology
    from topologies.loader import load, resolve

    source = resolve(topology)
    if rate or delay:
        with tempfile.TemporaryDirectory() as tmp:
            derived = derive_topology(source, Path(tmp) / "topology.yaml", rate, delay)
            return load(derived), derived.read_text()
    return load(source), source.read_text()


def new_run_dir(out: Path, prefix: str = "sim") -> Path:
    """``out/<prefix>-<time>``, made; a second one in the same second gets ``.2``."""
    run_dir = out / time.strftime(f"{prefix}-%Y%m%d-%H%M%S")
    n = 1
    while run_dir.exists():  # two runs in one second: keep both
        n += 1
        run_dir = run_dir.with_name(f"{run_dir.name.split('.')[0]}.{n}")
    run_dir.mkdir(parents=True)
    return run_dir


def write(run_dir: Path, topo_text: str, sim: SimRun) -> str:
    """The run's files; returns results.json's text (deterministic: sorted keys)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "topology.yaml").write_text(topo_text)
    text = json.dumps(sim.results, indent=1, sort_keys=True)
    (run_dir / "results.json").write_text(text + "\n")
    (run_dir / "perf.json").write_text(json.dumps(sim.perf, indent=1, sort_keys=True) + "\n")
    return text


def run_into(run_dir: Path, topology: str, opts: SimOptions,
             progress: Progress | None = None, records: bool = False) -> SimRun:
    """Prepare, simulate and write one run (ValueError/TopologyError: refused input);
    ``records``: also the qlog files and the plots."""
    topo, text = prepare(topology, opts.rate, opts.delay)
    sim = simulate(topo, opts, progress, run_dir / "qlog" if records else None)
    write(run_dir, text, sim)
    if records:
        plots(run_dir, topo.fabric.planes, sim)
    return sim


CC_CANDIDATES = 64  # writer QPs whose qlog is read to choose cc.png's QP


def plots(run_dir: Path, planes: int, sim: SimRun) -> list[Path]:
    """The emulation's plots of a run (its qlog must be in ``run_dir/qlog``)."""
    from mrcnet.fabric import ccplot, results
    from mrcnet.fabric.liveview import Sample

    res = sim.results
    cc_qp = None
    if res.get("cc") == "nscc":
        best = 0
        for host, qpn in sim.writers[:CC_CANDIDATES]:
            n = len(ccplot.series(run_dir, host, qpn, 0.0).t)
            if n > best:
                best, cc_qp = n, f"{host}:{qpn}"
    samples = [Sample(**s) for s in res["samples"]]
    return results.plot(run_dir, samples, res["link_events"], res["ev_events"], planes,
                        wall_t0=0.0, workloads=[(0.0, float(res["sim"]["simulated_s"]))],
                        cc_qp=cc_qp)
