"""`mrcnet harvest sweep`: speedup over both baselines vs alpha_r and message size, and a
schedule timeline, as PNG plots plus one JSON file in a results folder."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from common.collectives import build

from .engine import Result, Synthesizer
from .model import HarvestError, Params, step_time
from .units import fmt_bytes, fmt_time, parse_amount, parse_time


def parse_range(text: str, parse: Any, what: str) -> list[float]:
    parts = text.split(":")
    if len(parts) != 3:
        raise HarvestError(f"{what} range must be START:STOP:COUNT, got {text!r}")
    start, stop = parse(parts[0]), parse(parts[1])
    try:
        count = int(parts[2])
    except ValueError as exc:
        raise HarvestError(f"{what} range count must be an integer, got {parts[2]!r}") from exc
    if count < 1 or start <= 0 or stop < start:
        raise HarvestError(f"{what} range needs 0 < START <= STOP and COUNT >= 1, got {text!r}")
    if count == 1:
        return [start]
    return [float(v) for v in np.geomspace(start, stop, count)]


def _row(r: Result) -> dict[str, Any]:
    return {
        "size_bytes": r.message_bytes, "alpha_r_s": r.params.alpha_r,
        "completion_time_s": r.completion_time_s, "static_s": r.static_s,
        "every_step_s": r.every_step_s, "speedup_vs_static": r.speedup_static(),
        "speedup_vs_every_step": r.speedup_every_step(), "reconfigurations": r.reconfigurations,
        "intervals": [[iv.first, iv.last] for iv in r.schedule], "optimal": r.optimal,
        "method": r.method,
    }


def run_sweep(args: argparse.Namespace, base: Params) -> int:
    """``base``: the link parameters of the command line (alpha_r is swept separately)."""
    coll = build(args.collective, args.gpus, args.phase)
    alpha_rs = parse_range(args.alpha_r_range, lambda t: parse_time(t, "alpha-r"), "alpha-r")
    sizes = parse_range(args.sizes, lambda t: parse_amount(t, "B", "size"), "sizes")
    focus_size = parse_amount(args.size, "B", "size")
    focus_ar = parse_time(args.alpha_r, "alpha-r")
    if focus_ar < 0:
        raise HarvestError("alpha-r must be >= 0")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path("results") / "harvest" / stamp
    out.mkdir(parents=True, exist_ok=True)

    def say(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    grid_static = np.zeros((len(sizes), len(alpha_rs)))
    grid_every = np.zeros_like(grid_static)
    grid_k = np.zeros_like(grid_static)
    for i, size in enumerate(sizes):
        say(f"[{i + 1}/{len(sizes)}] size {fmt_bytes(size)} ({time.perf_counter() - t0:.1f} s)")
        synth = Synthesizer(coll, size, base, args.method, args.exact_max_n, args.time_limit,
                            progress=(lambda m: say(f"      {m}")))
        for j, ar in enumerate(alpha_rs):
            r = synth.result(ar)
            rows.append(_row(r))
            grid_static[i, j] = r.speedup_static()
            grid_every[i, j] = r.speedup_every_step()
            grid_k[i, j] = r.reconfigurations
    say("timeline point")
    focus_synth = Synthesizer(coll, focus_size, base, args.method, args.exact_max_n,
                              args.time_limit)
    focus = focus_synth.result(focus_ar)
    meta = {
        "collective": coll.name, "phase": coll.phase, "gpus": coll.n, "degree": base.degree,
        "bandwidth_bps": base.bandwidth_bps, "alpha_s": base.alpha, "delta_s": base.delta,
        "sizes_bytes": sizes, "alpha_r_s": alpha_rs, "seconds": time.perf_counter() - t0,
    }
    (out / "sweep.json").write_text(json.dumps(
        {"meta": meta, "rows": rows, "timeline": focus.to_json()}, indent=1,
        default=lambda x: None))
    plots = _plots(out, coll.name, coll.n, base, sizes, alpha_rs, grid_static, grid_every,
                   grid_k, focus_synth, focus)
    if args.json:
        print(json.dumps({"out": str(out), "plots": plots, "rows": len(rows),
                          "seconds": meta["seconds"]}))
    else:
        print(f"{'size':>10} {'alpha_r':>10} {'k':>3} {'vs static':>10} {'vs every':>10}")
        for row in rows[:: max(1, len(rows) // 24)]:
            print(f"{fmt_bytes(row['size_bytes']):>10} {fmt_time(row['alpha_r_s']):>10} "
                  f"{row['reconfigurations']:>3} {row['speedup_vs_static']:>10.3f} "
                  f"{row['speedup_vs_every_step']:>10.3f}")
        print(f"{len(rows)} points in {meta['seconds']:.1f} s; results in {out}")
    return 0


def _pick(values: list[float], k: int) -> list[int]:
    if len(values) <= k:
        return list(range(len(values)))
    return sorted({round(x) for x in np.linspace(0, len(values) - 1, k)})


def _plots(out: Path, name: str, n: int, p: Params, sizes: list[float], alpha_rs: list[float],
           g_static: np.ndarray, g_every: np.ndarray, g_k: np.ndarray, synth: Synthesizer,
           focus: Result) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title = f"{name}, n={n}, d={p.degree}, c={p.bandwidth_bps:.3g} bit/s"
    files = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, grid, label in ((axes[0], g_static, "static"), (axes[1], g_every, "every step")):
        for i in _pick(sizes, 6):
            ax.plot(alpha_rs, grid[i], marker="o", ms=3, label=fmt_bytes(sizes[i]))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("reconfiguration delay alpha_r [s]")
        ax.set_title(f"speedup over {label}")
    axes[0].set_ylabel("speedup")
    axes[1].legend(title="message", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    files.append(str(out / "speedup_vs_alpha_r.png"))
    fig.savefig(files[-1], dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, grid, label in ((axes[0], g_static, "static"), (axes[1], g_every, "every step")):
        for j in _pick(alpha_rs, 6):
            ax.plot(sizes, grid[:, j], marker="o", ms=3, label=fmt_time(alpha_rs[j]))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("message size [bytes]")
        ax.set_title(f"speedup over {label}")
    axes[0].set_ylabel("speedup")
    axes[1].legend(title="alpha_r", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    files.append(str(out / "speedup_vs_size.png"))
    fig.savefig(files[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    mesh = ax.pcolormesh(np.arange(len(alpha_rs) + 1), np.arange(len(sizes) + 1), g_k,
                         cmap="viridis", shading="flat")
    ax.set_xticks(np.arange(len(alpha_rs)) + 0.5, [fmt_time(a) for a in alpha_rs],
                  rotation=60, fontsize=7)
    ax.set_yticks(np.arange(len(sizes)) + 0.5, [fmt_bytes(s) for s in sizes], fontsize=7)
    ax.set_xlabel("alpha_r")
    ax.set_ylabel("message size")
    fig.colorbar(mesh, label="reconfigurations in the optimal schedule")
    ax.set_title(title)
    fig.tight_layout()
    files.append(str(out / "reconfigurations.png"))
    fig.savefig(files[-1], dpi=120)
    plt.close(fig)

    files.append(str(out / "timeline.png"))
    _timeline(plt, files[-1], synth, focus)
    return files


def _timeline(plt: Any, path: str, synth: Synthesizer, focus: Result) -> None:
    """Three rows: Harvest schedule, static topology, reconfigure before every step."""
    p = focus.params
    steps = synth.steps
    s = len(steps)
    static = synth.solver.solve(0, s - 1)
    rows: list[tuple[str, list[tuple[float, str, str]]]] = []
    harvest: list[tuple[float, str, str]] = []
    colours = plt.get_cmap("tab10")
    for k, iv in enumerate(focus.schedule):
        if k:
            harvest.append((p.alpha_r, "reconf", "lightgrey"))
        for st in iv.steps:
            harvest.append((st.total_s, str(st.step), colours(k % 10)))
    rows.append((f"Harvest ({focus.reconfigurations} reconf.)", harvest))
    rows.append(("static", [(step_time(ev, st.volume_bytes, p), str(i + 1), colours(0))
                            for i, (ev, st) in enumerate(zip(static.evals, steps))]))
    every: list[tuple[float, str, str]] = []
    for i in range(s):
        if i and steps[i].pattern != steps[i - 1].pattern:
            every.append((p.alpha_r, "reconf", "lightgrey"))
        every.append((synth.solver.solve(i, i).cost, str(i + 1), colours(i % 10)))
    rows.append(("every step", every))
    fig, ax = plt.subplots(figsize=(11, 3.2))
    for y, (_label, segs) in enumerate(rows):
        x = 0.0
        for width, text, colour in segs:
            if not math.isfinite(width):
                continue
            hatch = "//" if text == "reconf" else None
            ax.barh(y, width, left=x, color=colour, edgecolor="black", lw=0.4, hatch=hatch)
            if text != "reconf":
                ax.text(x + width / 2, y, text, ha="center", va="center", fontsize=7)
            x += width
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("time [s] (hatched: reconfiguration)")
    ax.set_title(f"{focus.collective}, n={focus.n}, d={p.degree}, m={fmt_bytes(focus.message_bytes)},"
                 f" alpha_r={fmt_time(p.alpha_r)}: colour = topology interval, label = step")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
