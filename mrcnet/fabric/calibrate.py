"""``--tdf auto``: find the smallest time-dilation factor that keeps every process on time.

A probe brings up the run's fabric at one factor (its own run folder under
``<results_root>/calibration/``), runs the workload once (at most ``PROBE_BYTES`` per flow),
takes the workload's fidelity verdict (mrcnet/fabric/fidelity.py) and stops the fabric. The
search starts at TDF 1; after an unfaithful probe the next factor is the probe's suggestion
(at least 1.5 x); once a faithful factor is known, the factors of the grid 1, 1.5, 2, 2.5,
3, 4, 5, 6, 8, 10, 15, ... between the largest unfaithful and the smallest faithful one are
bisected. The answer is the smallest faithful factor probed; after ``max_probes`` without a
faithful one, the last suggestion (``verified`` false). Per-packet CPU grows as the load
falls (fewer frames per wake-up), which is why the factor is measured, not computed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol, TypedDict

from mrcnet.fabric.fidelity import MIN_STEP, nice_tdf

PROBE_BYTES = 2 << 20
DEFAULT_PROBES = 5


def _grid_between(lo: float, hi: float) -> list[float]:
    out = []
    t = nice_tdf(lo * 1.0001)
    while t < hi - 1e-9:
        if t > lo + 1e-9:
            out.append(t)
        t = nice_tdf(t * 1.0001)
    return out


class ProbeResult(TypedDict):
    """What one probe found; ``faithful`` is true only on a measured, faithful verdict."""

    tdf: float
    completed: bool
    faithful: bool
    max_lag_fraction: float | None
    slowest: str | None
    goodput_fraction: float | None
    suggested_tdf: float | None
    results_dir: str


class Probe(Protocol):
    """The one signature of a calibration probe, for packet and circuit fabrics alike."""

    def __call__(self, opts: Any, tdf: float, workload: str, size: int, qp_type: str,
                 timeout: float, extra: dict[str, Any] | None = None) -> ProbeResult: ...


def probe_result(tdf: float, completed: bool, fidelity: dict[str, Any] | None,
                 goodput_fraction: float | None, results_dir: str) -> ProbeResult:
    """A probe's verdict from a run's fidelity figures: faithful only when the verdict is a
    measured ``True`` (``None``, no measurement, counts as not faithful)."""
    fid = fidelity or {}
    faithful = completed and fid.get("faithful") is True
    suggested = fid.get("suggested_tdf") or nice_tdf(tdf * 2)
    return {"tdf": tdf, "completed": completed, "faithful": faithful,
            "max_lag_fraction": fid.get("max_lag_fraction"), "slowest": fid.get("slowest"),
            "goodput_fraction": goodput_fraction,
            "suggested_tdf": None if faithful else float(suggested),
            "results_dir": results_dir}


def probe(opts: Any, tdf: float, workload: str, size: int, qp_type: str,
          timeout: float, extra: dict[str, Any] | None = None) -> ProbeResult:
    """One fabric at ``tdf``, one round of ``workload`` (its job fields ``extra``, e.g. the
    WriteImm mode of ``--wimm``); the fidelity figures."""
    from mrcnet.fabric.orchestrator import Fabric

    fab = Fabric(replace(opts, tdf=tdf, show=False,
                         results_root=opts.results_root / "calibration"))
    fab.say = lambda text: None  # type: ignore[method-assign]  # one line per probe (calibrate)
    try:
        fab.start()
        assert fab.runner is not None
        wl = fab.runner.submit(workload, size, qp_type, timeout=timeout, extra=extra)
        fab.runner.wait(wl, timeout + 30, fab.check_alive)
        summary = wl.summary()
    finally:
        fab.stop()
    return probe_result(tdf, bool(summary["completed"]), summary.get("fidelity"),
                        summary.get("goodput_fraction"), str(fab.run_dir))


def calibrate(opts: Any, workload: str, size: int, qp_type: str = "MRC",
              timeout: float = 60.0, max_probes: int = DEFAULT_PROBES,
              say: Callable[[str], None] | None = None,
              run_probe: Probe = probe,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The calibration (see the module docstring): {"tdf", "verified", "probes", "seconds"};
    the probes run ``workload`` with the run's own job fields ``extra``."""
    say = say or (lambda _text: None)
    size = min(size, PROBE_BYTES)
    t0 = time.monotonic()
    probes: list[ProbeResult] = []
    lo: float | None = None  # largest unfaithful factor
    hi: float | None = None  # smallest faithful factor
    nxt = 1.0
    while len(probes) < max_probes:
        say(f"calibration probe {len(probes) + 1}: TDF {nxt:g}")
        res = run_probe(opts, nxt, workload, size, qp_type, timeout, extra)
        probes.append(res)
        say(f"  TDF {nxt:g}: {'faithful' if res['faithful'] else 'not faithful'} (slowest "
            f"{res['slowest']} behind {res['max_lag_fraction'] or 0:.1%}; goodput "
            f"{res['goodput_fraction'] or 0:.0%} of capacity)")
        if res["faithful"]:
            hi = nxt if hi is None else min(hi, nxt)
        else:
            lo = nxt if lo is None else max(lo, nxt)
        if hi is not None and (lo is None or not _grid_between(lo, hi)):
            break  # nothing left between the largest unfaithful and the smallest faithful
        if hi is None:
            assert lo is not None
            nxt = max(float(res["suggested_tdf"] or 0.0), nice_tdf(lo * MIN_STEP))
        else:
            assert lo is not None
            grid = _grid_between(lo, hi)
            nxt = grid[len(grid) // 2]
    if hi is not None:
        chosen, verified = hi, True
    else:
        chosen, verified = nxt, False
    return {"tdf": chosen, "verified": verified, "probes": probes,
            "seconds": round(time.monotonic() - t0, 1)}
