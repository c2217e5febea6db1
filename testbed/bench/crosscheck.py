"""``mrcnet bench crosscheck``: the simulator against the emulation, experiment by experiment.

Each case runs twice with the same topology, workload, size, rates, transport, congestion
control, load balancing, failures and seed: once emulated (``mrcnet up ... --no-cli --json`` in
a child process, the production path, at ``--tdf``, default ``auto``: the smallest factor
that keeps every process on time) and once simulated (``mrcnet.sim.runfolder.run_into``, what
``mrcnet sim`` runs). ``mrcnet sim compare``'s rows (mrcnet/sim/compare.py) are then judged
against the bounds of the simulation issue (mrcnet/sim/compare.py ``judge``): the goodput of
all flows and of each host, FCT p50/p99/p100 and an incast's p99 queueing delay within 10 %,
the worst stall of a run with a failure and the resent and trimmed packets within 20 %, the
same verified flows and QP errors; which rows each case judges is said below.

The cases (``--cases``, comma separated; default all):

- ``permutation``, ``all-to-all``: clos-2p at 100 Mb/s (``mrcnet up``'s rate), MRC, a fixed
  window, 4 MiB and 1 MiB per flow. The permutation's window is 256 KiB, not ``mrcnet up``'s
  64 KiB: at 64 KiB its two flows that cross the spines are window-limited, and in the
  emulation every hop's software latency (which the simulator does not model) made them
  7-14 % slower in every run (docs/simulation.md); at 256 KiB the two agree within 1 %;
- ``incast``: incast-8 at its own rates (100 Mb/s, 2.5 ms), every host into h8, NSCC and REPS,
  8 MiB per sender (long enough that the p99 queueing delay is NSCC's standing queue, not the
  first round trip's burst, which depends on how far apart the senders start: at once in the
  simulator, some milliseconds apart in the emulation); judged on the goodput of all flows
  (not how the senders split it), FCT, the p99 queueing delay and the counts;
- ``failover``: clos-1p at 20 Mb/s, ``shift:2`` of 6 MiB per flow, the fixed 32 KiB window,
  leaf0 -- spine0 cut 1.5 s in, for MRC and RC at control-plane delays of 0.5, 1 and 2 s (six
  runs each way; the bench failover's experiment); judged: the longest stall of any flow
  (the issue's figure for failover), verified flows and QP errors; the rest is reported.
  MRC's cases are emulated three times and simulated with the cut at nine moments 5 ms
  apart (1.500-1.540 s), and judged on the median emulated run against the median simulated
  one: MRC steers round the cut by SACK gaps and a loss probe, and whether the unluckiest
  flow needs a second probe depends on which EVs its packets, its probe and the probe's
  answers happened to take when the link died, i.e. on where in the packet train the cut
  falls, which no emulated run controls to the microsecond (docs/simulation.md). Every stall
  is in the case's ``emulated_stalls`` and ``simulated_stalls``;
- ``collectives``: RD and Swing AllReduce on scaleup-ocs (8 GPUs) at 20 Mb/s (``mrcnet up``'s
  circuit rate), 8 MiB, every schedule (static, every-step, harvest), each calibrated on its
  own fabric as ``mrcnet up`` does; judged: each schedule's time within 5 %, the same fastest
  schedule (within 1 % is a tie), every sum verified on both sides. 8 MiB, not the
  collectives' default 2 MiB: each emulated step costs some milliseconds of software the
  simulator does not model (the barrier's RPCs, the OCS's reconfiguration beyond its dark
  time, posting and completing the Writes), 5-8 % of the short steps of a 2 MiB every-step
  schedule (docs/simulation.md).

``--small`` shrinks every case (sizes / 8, failover at 0.3 s with 1 s of control-plane delay
only) for a quick check of the whole path; its figures are not the comparison's.

A case whose emulated run was not faithful is reported with its rows but is no result (the
verdict line says so, exit 3 under ``--strict``); a case whose rows are all within their
bounds passes. Exit status 1 when a faithful case was outside a bound.
The figures go to ``results/bench/crosscheck-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mrcnet.sim.compare import QUEUE_P99, STALL, Row, judge
from testbed.bench import verdicts

REPO = Path(__file__).resolve().parents[2]
EMULATION_TIMEOUT_S = 1200.0
MRC_FAILOVER_REPEATS = 3  # emulated runs of an MRC failover case (the median stall is judged)
MRC_FAILOVER_PHASES = 9  # simulated runs of it, the failures PHASE_STEP_S apart
PHASE_STEP_S = 0.005


@dataclass(frozen=True)
class Case:
    """One experiment, in the options both `mrcnet up` and `mrcnet sim` take."""

    name: str
    topology: str
    run: str
    size: str
    rate: str | None  # None: the file's rates
    qp: str = "MRC"
    cc: str = "fixed"
    lb: str = "rotation"
    window: str = "64KiB"
    fail: tuple[str, ...] = ()
    cp_delay: float | None = None
    per_host: bool = True  # each host's goodput is judged (an incast: only the aggregate)
    judged: tuple[str, ...] = ()  # the rows judged, by metric prefix (empty: every row)
    queueing: bool = False  # the p99 queueing delay is judged (an incast's standing queue)
    collective: bool = False  # a circuit fabric: ``run`` is PHASE:ALGORITHM, all schedules
    repeats: int = 1  # emulated runs; the one with the median longest stall is judged
    phases: int = 1  # simulated runs, the failures PHASE_STEP_S later each; the median is judged

    def verdict(self, row: Row) -> bool | None:
        """``row`` against its bound, if this case judges it (None: reported only)."""
        if self.judged and not row.metric.startswith(self.judged):
            return None
        if row.metric == QUEUE_P99 and not self.queueing:
            return None
        return judge(row, self.per_host)


def cases() -> dict[str, list[Case]]:
    """The full comparison, by case name."""
    failover = [Case(f"failover-{qp}-cp{cp:g}", "clos-1p", "shift:2", "6MiB", "20Mbps", qp=qp,
                     window="32KiB", fail=("leaf0-spine0@1.5",), cp_delay=cp,
                     judged=(STALL, "verified flows", "QP errors"),
                     repeats=MRC_FAILOVER_REPEATS if qp == "MRC" else 1,
                     phases=MRC_FAILOVER_PHASES if qp == "MRC" else 1)
                for qp in ("MRC", "RC") for cp in (0.5, 1.0, 2.0)]
    return {
        "permutation": [Case("permutation", "clos-2p", "permutation", "4MiB", "100Mbps",
                             window="256KiB")],
        "all-to-all": [Case("all-to-all", "clos-2p", "all-to-all", "1MiB", "100Mbps")],
        "incast": [Case("incast", "incast-8", "incast:h8", "8MiB", None, cc="nscc", lb="reps",
                          per_host=False, queueing=True)],
        "failover": failover,
        "collectives": [Case(f"allreduce-{alg}", "scaleup-ocs", f"allreduce:{alg}", "8MiB",
                             "20Mbps", collective=True) for alg in ("rd", "swing")],
    }


def small(case: Case) -> Case:
    """The quick version of ``case`` (--small)."""
    from common.units import parse_size

    size = f"{max(int(parse_size(case.size)) // 8, 64 * 1024)}"
    if case.fail:
        return replace(case, size="1MiB", fail=tuple(f.split("@")[0] + "@0.3" for f in case.fail),
                       repeats=1, phases=1)
    return replace(case, size=size)


def emulate(case: Case, tdf: str) -> dict[str, Any]:
    """``mrcnet up`` of ``case`` in a child process; its --json object (results_dir, faithful,
    ...). RuntimeError when it did not produce one."""
    cmd = [sys.executable, "-m", "mrcnet.cli", "up", case.topology, "--run", case.run,
           "--size", case.size, "--rate", case.rate or "file", "--tdf", tdf,
           "--no-cli", "--quiet", "--json"]
    if not case.collective:  # a circuit fabric keeps its own transport defaults
        cmd += ["--qp", case.qp, "--cc", case.cc, "--lb", case.lb, "--window", case.window]
    for spec in case.fail:
        cmd += ["--fail", spec]
    if case.cp_delay is not None:
        cmd += ["--cp-delay", f"{case.cp_delay:g}"]
    print(f"[bench crosscheck] {case.name}: emulating ({' '.join(cmd[3:])})", file=sys.stderr,
          flush=True)
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True,
                          timeout=EMULATION_TIMEOUT_S, check=False)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            out: dict[str, Any] = json.loads(line)
            return out
    raise RuntimeError(f"mrcnet up exited {proc.returncode} without its JSON summary")


def simulate_collective(case: Case, out: Path) -> Path:
    """``mrcnet sim`` of a collective case (in this process) into a folder under ``out``; its
    results.json."""
    from mrcnet.cli import main

    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    argv = ["sim", case.topology, "--run", case.run, "--size", case.size, "--out", str(out)]
    if case.rate:
        argv += ["--rate", case.rate]
    print(f"[bench crosscheck] {case.name}: simulating", file=sys.stderr, flush=True)
    status = main(argv)
    made = sorted(set(out.iterdir()) - before)
    if not made or not (made[-1] / "results.json").is_file():
        raise RuntimeError(f"mrcnet sim {' '.join(argv[1:])}: exit {status}, no results")
    return made[-1] / "results.json"


def simulate_case(case: Case, out: Path) -> Path:
    """The simulated run of ``case`` into ``out``; its results.json."""
    from common.units import parse_size
    from mrcnet.sim.run import SimOptions
    from mrcnet.sim.runfolder import new_run_dir, run_into

    if case.collective:
        return simulate_collective(case, out)
    opts = SimOptions(run=case.run, qp=case.qp, size=int(parse_size(case.size)),
                      window=int(parse_size(case.window)), cc=case.cc, lb=case.lb,
                      cp_delay=1.0 if case.cp_delay is None else case.cp_delay,
                      fail=case.fail, rate=case.rate, limit_s=60.0)
    run_dir = new_run_dir(out)
    print(f"[bench crosscheck] {case.name}: simulating", file=sys.stderr, flush=True)
    run_into(run_dir, case.topology, opts)
    return run_dir / "results.json"


def shifted(fail: tuple[str, ...], delay: float) -> tuple[str, ...]:
    """Failure specs A-B@S with S ``delay`` seconds later."""
    out = []
    for spec in fail:
        link, _at, when = spec.rpartition("@")
        out.append(f"{link}@{float(when) + delay:.6g}")
    return tuple(out)


def simulate_phases(case: Case, out: Path) -> list[Path]:
    """``case.phases`` simulated runs of ``case``, the k-th with its failures k x
    PHASE_STEP_S later; their results.json files."""
    return [simulate_case(replace(case, fail=shifted(case.fail, k * PHASE_STEP_S)), out)
            for k in range(case.phases)]


def longest_stall(results: Path) -> float:
    """The longest stall of any flow of a run (0 without one)."""
    from mrcnet.sim.compare import figures, read

    return figures(read(results)).stall or 0.0


def _median(values: list[float]) -> int:
    """Index of the median of ``values`` (the upper one of an even count)."""
    return sorted(range(len(values)), key=values.__getitem__)[len(values) // 2]


def _stall(rows: list[Row]) -> float:
    """The emulated longest stall of a comparison's rows (0 without one)."""
    return next((r.emu for r in rows if r.metric == STALL and r.emu is not None), 0.0)


def check(case: Case, tdf: str, out: Path) -> dict[str, Any]:
    """Both runs of ``case`` (the emulation ``case.repeats`` times, the simulation at
    ``case.phases`` moments of the failures: the runs with the median longest stall are
    judged) and their judged rows."""
    from mrcnet.sim.compare import compare_collectives, compare_files

    emus = [emulate(case, tdf) for _ in range(case.repeats)]
    sims = simulate_phases(case, out)
    sim_stalls = [longest_stall(r) for r in sims] if len(sims) > 1 else []
    sim_results = sims[_median(sim_stalls)] if sim_stalls else sims[0]
    stalls: list[float] = []
    if case.collective:
        emu = emus[0]
        rows = compare_collectives(emu, json.loads(sim_results.read_text()))
        differ: list[str] = []
    else:
        compared = [(e, *compare_files(Path(e["results_dir"]) / "results.json", sim_results))
                    for e in emus]
        stalls = [_stall(rows) for _e, rows, _d in compared]
        emu, rows, differ = compared[_median(stalls)]
    judged = [{"metric": r.metric, "emu": r.emu, "sim": r.sim, "rel": r.rel,
               "within_bound": case.verdict(r)} for r in rows]
    faithful = [e.get("faithful") for e in emus]
    out_case: dict[str, Any] = {
        "case": case.name, "emulation": str(emu["results_dir"]),
        "simulation": str(sim_results.parent), "tdf": emu.get("tdf"),
        "faithful": False if False in faithful else (None if None in faithful else True),
        "mismatches": differ, "rows": judged,
        "within_bounds": not differ and all(r["within_bound"] is not False for r in judged)}
    if case.repeats > 1:
        out_case["emulated_stalls"] = stalls
        out_case["emulations"] = [str(e["results_dir"]) for e in emus]
    if sim_stalls:
        out_case["simulated_stalls"] = sim_stalls
        out_case["simulations"] = [str(r.parent) for r in sims]
    return out_case


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verdicts.add_strict(parser)
    parser.add_argument("--cases", default=",".join(cases()),
                        help=f"comma separated, of {', '.join(cases())} (default all)")
    parser.add_argument("--small", action="store_true",
                        help="every case shrunk (a quick check of the path, not the figures)")
    parser.add_argument("--tdf", default="auto", metavar="N|auto",
                        help="the emulation's time-dilation factor (default auto)")
    parser.add_argument("--results", default=str(REPO / "results" / "bench"))
    parser.add_argument("--json", action="store_true")


def _print(result: dict[str, Any]) -> None:
    from mrcnet.sim.compare import table

    rows = [Row(r["metric"], r["emu"], r["sim"]) for r in result["rows"]]
    word = "within bounds" if result["within_bounds"] else "OUTSIDE bounds"
    faithful = {True: "faithful", False: "NOT faithful", None: "fidelity unknown"}[
        result["faithful"]]
    print(f"\n== {result['case']}: {word} (emulation TDF {result['tdf']}, {faithful})",
          file=sys.stderr)
    if "emulated_stalls" in result:
        print("   emulated longest stalls: " + ", ".join(
            f"{s:.3f} s" for s in result["emulated_stalls"]) + " (the median run is judged)",
            file=sys.stderr)
    for what in result["mismatches"]:
        print(f"   not the same experiment: {what}", file=sys.stderr)
    print(table(rows, [r["within_bound"] for r in result["rows"]]), file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    available = cases()
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in available]
    if unknown or not names:
        print(f"mrcnet bench crosscheck: unknown case {', '.join(unknown) or '(none)'}; "
              f"one of {', '.join(available)}", file=sys.stderr)
        return 2
    todo = [c for n in names for c in available[n]]
    if args.small:
        todo = [small(c) for c in todo if not c.fail or c.cp_delay == 1.0]
    out = Path(args.results)
    sim_out = out / f"crosscheck-{time.strftime('%Y%m%d-%H%M%S')}"
    results = []
    for case in todo:
        result = check(case, args.tdf, sim_out)
        _print(result)
        results.append(result)
    figures: dict[str, Any] = {"small": args.small, "cases": results}
    runs = {r["case"]: r["faithful"] for r in results}
    status = verdicts.conclude("crosscheck", figures, runs, args.strict)
    failed = [r["case"] for r in results if r["faithful"] and not r["within_bounds"]]
    figures["outside_bounds"] = failed
    out.mkdir(parents=True, exist_ok=True)
    path = sim_out.with_suffix(".json")
    path.write_text(json.dumps(figures, indent=1) + "\n")
    passed = sum(1 for r in results if r["faithful"] and r["within_bounds"])
    print(f"[bench crosscheck] {passed} of {len(results)} cases faithful and within bounds; "
          f"outside: {', '.join(failed) or 'none'}; figures {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(figures))
    return status or (1 if failed else 0)
