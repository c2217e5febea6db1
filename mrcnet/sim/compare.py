"""Cross-check a simulated run against an emulated one: ``mrcnet sim compare EMU SIM``.

Both runs write results.json with the same workload summary (mrcnet/fabric/workloads.py
``Workload.summary``): per-flow rows (source, destination, bytes, verified, FCT,
retransmissions), the workload's retransmitted packets and mechanism counters, and switch
counter samples. This reads one workload round of each (the first by default) and sets side
by side, with the relative difference (sim - emu) / emu:

- goodput of all flows: their bytes x 8 over the longest FCT;
- goodput per source host: the bytes of its verified flows x 8 over its longest FCT (for a
  permutation: its one flow's rate);
- FCT p50 / p99 / p100 over the flows (nearest rank: a value some flow had);
- the 99th percentile of the round's queueing delay at the switches' egress data queues
  (``queue_delay``, mrcnet/fabric/queuedelay.py), where both runs measured it;
- with link events (a failure): the longest stall of any flow (the longest time its
  writer's cumulative ACK stood still with packets outstanding, ``longest_stall_s``);
- retransmitted packets, trims at the switches (the last sample's count, since the switches
  started), trimmed packets the receivers saw (``rx_trimmed``), verified flows, QP errors.

Runs that do not describe the same experiment (topology, workload, QP type, flow pairs,
size) are compared anyway, under a warning that names what differs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class CompareError(ValueError):
    """A results file cannot be read or lacks what a comparison needs (said which)."""


@dataclass(frozen=True)
class Row:
    metric: str
    emu: float | None
    sim: float | None

    @property
    def rel(self) -> float | None:
        """(sim - emu) / emu; None when either is missing or emu is 0."""
        if self.emu is None or self.sim is None or self.emu == 0:
            return None
        return (self.sim - self.emu) / self.emu


@dataclass(frozen=True)
class Figures:
    """What a comparison reads of one run's workload round."""

    topology: str | None
    workload: str | None
    qp: str | None
    pairs: tuple[tuple[str, str], ...]
    sizes: tuple[int, ...]
    goodput: dict[str, float | None]  # source host -> bit/s (None: nothing verified)
    fcts: list[float]
    rtx: int | None
    trims: int | None
    rx_trimmed: int | None
    verified: int
    flows: int
    qp_errors: int | None
    stall: float | None = None  # the longest stall of any flow, in a run with link events
    total: float | None = None  # bytes of the verified flows x 8 / the longest FCT
    queue_p99: float | None = None  # the round's data packets' queueing delay, p99 (s)


def read(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CompareError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CompareError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CompareError(f"{path}: not a results.json (a JSON object)")
    return data


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (no interpolation: a value some flow really had)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def figures(res: dict[str, Any], where: str = "results", round_no: int = 1) -> Figures:
    """The figures of workload round ``round_no`` (1-based) of a results.json."""
    workloads = res.get("workloads")
    if not isinstance(workloads, list) or not workloads:
        raise CompareError(f"{where}: no workloads (a run without --run?)")
    if not 1 <= round_no <= len(workloads):
        raise CompareError(f"{where}: round {round_no} of {len(workloads)}")
    wl = workloads[round_no - 1]
    rows = wl.get("per_flow") if isinstance(wl, dict) else None
    if not isinstance(rows, list):
        raise CompareError(f"{where}: workload round {round_no} has no per_flow rows")
    try:
        by_src: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            by_src.setdefault(str(r["src"]), []).append(r)
        goodput: dict[str, float | None] = {}
        for src, own in by_src.items():
            ok = [r for r in own if r.get("verified") and r.get("fct_s")]
            longest = max((float(r["fct_s"]) for r in ok), default=0.0)
            goodput[src] = (sum(int(r["bytes"]) for r in ok) * 8 / longest
                            if longest > 0 else None)
        fcts = [float(r["fct_s"]) for r in rows if r.get("fct_s") is not None]
        done = [r for r in rows if r.get("verified") and r.get("fct_s")]
        longest_all = max((float(r["fct_s"]) for r in done), default=0.0)
        total = (sum(int(r["bytes"]) for r in done) * 8 / longest_all
                 if longest_all > 0 else None)
        pairs = tuple((str(r["src"]), str(r["dst"])) for r in rows)
        sizes = tuple(sorted({int(r["bytes"]) for r in rows}))
    except (KeyError, TypeError, ValueError) as exc:
        raise CompareError(f"{where}: a per_flow row lacks {exc}") from None
    stall = None
    if res.get("link_events"):
        stalls = [float(r["longest_stall_s"]) for r in rows
                  if r.get("longest_stall_s") is not None]
        stall = max(stalls) if stalls else None
    qd = wl.get("queue_delay")
    queue_p99 = float(qd["p99_s"]) if isinstance(qd, dict) and "p99_s" in qd else None
    samples = res.get("samples") or []
    trims = samples[-1].get("trims") if samples and isinstance(samples[-1], dict) else None
    mech = wl.get("mechanisms") or {}
    rtx = wl.get("retransmitted_packets")
    return Figures(
        topology=res.get("topology"), workload=wl.get("workload"), qp=wl.get("qp_type"),
        pairs=pairs, sizes=sizes, goodput=goodput, fcts=fcts,
        rtx=None if rtx is None else int(rtx),
        trims=None if trims is None else int(trims),
        rx_trimmed=int(mech.get("rx_trimmed", 0)) if mech else None,
        verified=sum(1 for r in rows if r.get("verified")), flows=len(rows),
        qp_errors=wl.get("qp_errors"), stall=stall, total=total,
        queue_p99=queue_p99)


def mismatches(emu: Figures, sim: Figures) -> list[str]:
    """What makes the two runs different experiments (empty: the same one)."""
    out = []
    for name in ("topology", "workload", "qp", "sizes"):
        a, b = getattr(emu, name), getattr(sim, name)
        if a != b:
            out.append(f"{name}: {a} vs {b}")
    if sorted(emu.pairs) != sorted(sim.pairs):
        out.append("flow pairs differ (another seed?)")
    return out


def compare(emu: Figures, sim: Figures) -> list[Row]:
    rows = [Row(TOTAL, emu.total, sim.total)]
    rows += [Row(f"goodput {h} (bit/s)", emu.goodput.get(h), sim.goodput.get(h))
             for h in sorted(set(emu.goodput) | set(sim.goodput))]
    for q in (50, 99, 100):
        rows.append(Row(f"FCT p{q} (s)", percentile(emu.fcts, q), percentile(sim.fcts, q)))
    if emu.queue_p99 is not None or sim.queue_p99 is not None:
        rows.append(Row(QUEUE_P99, emu.queue_p99, sim.queue_p99))
    if emu.stall is not None or sim.stall is not None:
        rows.append(Row(STALL, emu.stall, sim.stall))
    counts = [("retransmitted packets", emu.rtx, sim.rtx),
              ("switch trims", emu.trims, sim.trims),
              ("trimmed packets received", emu.rx_trimmed, sim.rx_trimmed),
              ("verified flows", emu.verified, sim.verified),
              ("QP errors", emu.qp_errors, sim.qp_errors)]
    rows += [Row(name, None if a is None else float(a), None if b is None else float(b))
             for name, a, b in counts]
    return rows


STALL = "longest stall p100 (s)"
TOTAL = "goodput, all flows (bit/s)"
QUEUE_P99 = "queueing delay p99 (s)"
# The bounds on |sim - emu| / emu: rates, times and the p99 queueing delay 10 %, the
# worst stall and the counts of resent and trimmed packets 20 %; a count also passes within
# COUNT_SLACK packets (1 resent packet against 0 is no disagreement about the fabric);
# verified flows and QP errors must be equal. A collective: each schedule's time within 5 %,
# the same fastest schedule, every sum verified on both sides.
BOUNDS = (("goodput", 0.10), ("FCT ", 0.10), (QUEUE_P99, 0.10), (STALL, 0.20),
          ("schedule ", 0.05),
          ("retransmitted", 0.20), ("switch trims", 0.20), ("trimmed packets", 0.20))
COUNT_SLACK = 2
FASTEST = "same fastest schedule"
EQUAL = ("verified flows", "QP errors", "sums verified", FASTEST)
TIE = 0.01  # schedules whose times differ by less than this share are equally fast


def _fastest(schedules: dict[str, Any]) -> set[str]:
    """The schedules within TIE of the fastest measured one."""
    times = {name: float(s["measured_s"]) for name, s in schedules.items()
             if s.get("measured_s") is not None}
    if not times:
        return set()
    best = min(times.values())
    return {name for name, t in times.items() if t <= best * (1 + TIE)}


def compare_collectives(emu: dict[str, Any], sim: dict[str, Any]) -> list[Row]:
    """An emulated and a simulated collective (``mrcnet up``'s --json / collectives.json and
    ``mrcnet sim``'s results.json of a circuit fabric): each schedule's measured time, whether
    every sum was verified, and whether the fastest schedule is the same (schedules within 1 %
    of the fastest count as a tie)."""
    try:
        e_s, s_s = emu["schedules"], sim["schedules"]
        rows = [Row(f"schedule {name} (s)", float(e_s[name]["measured_s"]),
                    float(s_s[name]["measured_s"]) if name in s_s else None)
                for name in e_s]
        rows.append(Row("sums verified", float(bool(emu["verified"])),
                        float(bool(sim["verified"]))))
    except (KeyError, TypeError, ValueError) as exc:
        raise CompareError(f"a collective's results lack {exc}") from None
    rows.append(Row(FASTEST, 1.0, 1.0 if _fastest(e_s) & _fastest(s_s) else 0.0))
    return rows


def judge(row: Row, per_host: bool = True) -> bool | None:
    """Whether ``row`` is within its bound (None: a row without one, or a figure missing).
    ``per_host=False``: the goodput of each host has none (an incast, where the experiment is
    the aggregate and the split among the senders is a draw of who wins the queue)."""
    if row.emu is None or row.sim is None:
        return None
    if not per_host and row.metric.startswith("goodput") and row.metric != TOTAL:
        return None
    if row.metric in EQUAL:
        return row.emu == row.sim
    bound = next((b for prefix, b in BOUNDS if row.metric.startswith(prefix)), None)
    if bound is None:
        return None
    diff = abs(row.sim - row.emu)
    if any(row.metric.startswith(p) for p in ("retransmitted", "switch trims", "trimmed")):
        return diff <= max(bound * max(row.emu, row.sim), COUNT_SLACK)
    return diff <= bound * abs(row.emu) if row.emu else diff == 0


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    if v == int(v) and abs(v) < 1e12:
        return str(int(v))
    return f"{v:.6g}"


def table(rows: list[Row], verdicts: list[bool | None] | None = None) -> str:
    """The rows side by side; ``verdicts``: each row's (default: ``judge``)."""
    lines = [("metric", "emulation", "simulation", "sim vs emu", "within bound")]
    for i, r in enumerate(rows):
        rel = r.rel
        ok = judge(r) if verdicts is None else verdicts[i]
        lines.append((r.metric, _num(r.emu), _num(r.sim), "-" if rel is None else f"{rel:+.1%}",
                       {True: "yes", False: "NO", None: "-"}[ok]))
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    out = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                     enumerate(zip(line, widths))) for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def compare_files(emu_path: str | Path, sim_path: str | Path, round_no: int = 1
                  ) -> tuple[list[Row], list[str]]:
    """(rows, mismatches) of two results.json files; CompareError for unreadable input."""
    emu = figures(read(emu_path), str(emu_path), round_no)
    sim = figures(read(sim_path), str(sim_path), 1)
    return compare(emu, sim), mismatches(emu, sim)
