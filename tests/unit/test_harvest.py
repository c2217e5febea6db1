"""Harvest engine: closed forms, flow LP, DP and the worked example of the reference."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from common.collectives import build
from controller.harvest import cli
from controller.harvest.circulant import shift_on_circulant, swing_on_local
from controller.harvest.dp import plan
from controller.harvest.engine import synthesize
from controller.harvest.flow import evaluate_lp, hop_limited_flow, max_concurrent_flow
from controller.harvest.model import CircuitTopology, HarvestError, Params, Pattern
from controller.harvest.unipath import evaluate_unipath
from mrcnet.cli import main as mrcnet_main


def shift(n: int, o: int) -> Pattern:
    return Pattern.of(n, [(u, (u + o) % n) for u in range(n)])


def swing_pat(n: int, rho: int) -> Pattern:
    return Pattern.of(n, [(u, (u + rho) % n if u % 2 == 0 else (u - rho) % n) for u in range(n)])


@pytest.mark.parametrize("n", [5, 8])
def test_unidirectional_ring_theta_is_one_over_offset(n: int) -> None:
    ring = CircuitTopology.circulant(n, [1])
    for o in range(1, n):
        ev = evaluate_lp(ring, shift(n, o))
        assert ev.theta == pytest.approx(1 / o)
        assert ev.hops == o
        assert evaluate_unipath(ring, shift(n, o)).theta == pytest.approx(1 / o)


@pytest.mark.parametrize("n", [6, 8])
def test_bidirectional_ring_splits_both_ways(n: int) -> None:
    ring = CircuitTopology.circulant(n, [1, -1])
    for o in range(1, n):
        expected = 1 / o + 1 / (n - o)
        assert max_concurrent_flow(ring, shift(n, o)) == pytest.approx(expected)
        ev = shift_on_circulant(n, (1, n - 1), o)
        assert ev.theta == pytest.approx(expected)
        # splitting needs the long way round: n-o hops (or o if that is longer)
        assert ev.hops == max(o, n - o)
        assert evaluate_lp(ring, shift(n, o)).hops == max(o, n - o)
        if o != n - o:
            short = min(o, n - o)
            assert hop_limited_flow(ring, shift(n, o), short) == pytest.approx(1 / short)


def test_theta_never_exceeds_degree() -> None:
    rnd = random.Random(3)
    for _ in range(4):
        gens = tuple(rnd.randrange(1, 8) for _ in range(2))
        for o in (1, 3, 4):
            assert max_concurrent_flow(CircuitTopology.circulant(8, gens), shift(8, o)) <= 2 + 1e-9


def test_closed_forms_match_the_flow_lp() -> None:
    rnd = random.Random(7)
    n = 8
    gens_pairs = [(g1, g2) for g1 in range(1, n) for g2 in range(g1, n)]
    for g1, g2 in rnd.sample(gens_pairs, 6):
        topo = CircuitTopology.circulant(n, (g1, g2))
        for o in range(1, n):
            a = shift_on_circulant(n, (g1, g2), o)
            b = evaluate_lp(topo, shift(n, o))
            assert a.theta == pytest.approx(b.theta, abs=1e-7)
            if b.theta > 0:
                assert a.hops == b.hops
    odd = range(1, n, 2)
    for h1, h2 in rnd.sample(list(itertools.combinations_with_replacement(odd, 2)), 5):
        topo = CircuitTopology.local(n, (h1, h2))
        for rho in (1, 3, 5, 7):
            a = swing_on_local(n, (h1, h2), rho)
            b = evaluate_lp(topo, swing_pat(n, rho))
            assert a.theta == pytest.approx(b.theta, abs=1e-7)
            if b.theta > 0:
                assert a.hops == b.hops


def test_unipath_matches_lp_on_random_permutations() -> None:
    rnd = random.Random(11)
    n = 6
    for _ in range(15):
        perm = list(range(n))
        rnd.shuffle(perm)
        if any(perm[u] == u for u in range(n)):
            continue
        topo = CircuitTopology.from_counts(n, {(u, perm[u]): 1 for u in range(n)})
        for o in (1, 2, 3):
            a = evaluate_unipath(topo, shift(n, o))
            b = evaluate_lp(topo, shift(n, o))
            assert a.theta == pytest.approx(b.theta, abs=1e-9)
            if b.theta > 0:
                assert a.hops == b.hops


def test_dp_matches_all_cut_sets() -> None:
    rnd = random.Random(5)
    s = 7
    costs = {(a, b): rnd.uniform(0.1, 1.0) * (b - a + 1) ** rnd.uniform(0.5, 1.5)
             for a in range(s) for b in range(a, s)}
    for alpha_r in (0.0, 0.05, 0.3, 2.0):
        got = plan(s, lambda a, b: costs[(a, b)], alpha_r)
        best = math.inf
        for mask in range(1 << (s - 1)):
            cuts = [i for i in range(s - 1) if mask >> i & 1]
            bounds = [-1, *cuts, s - 1]
            total = sum(costs[(bounds[j] + 1, bounds[j + 1])] for j in range(len(bounds) - 1))
            best = min(best, total + len(cuts) * alpha_r)
        assert got.total == pytest.approx(best)
        assert sum(costs[iv] for iv in got.intervals) + got.cuts * alpha_r == pytest.approx(best)


UNIT = Params(degree=1, bandwidth_bps=8.0)  # 1 byte over one circuit takes 1 s: units of m/c


@pytest.mark.parametrize("alpha_r", [0.0, 0.05, 0.1, 0.125, 0.2, 0.3, 0.5, 1.0])
def test_worked_example_n8(alpha_r: float) -> None:
    p = Params(degree=1, bandwidth_bps=8.0, alpha_r=alpha_r)
    r = synthesize(build("rd", 8), 1.0, p)
    expected = min(3.0, 2.0 + 2 * alpha_r, 1.75 + 4 * alpha_r)
    assert r.completion_time_s == pytest.approx(expected)
    assert r.optimal
    assert r.static_s == pytest.approx(3.0)
    assert r.every_step_s == pytest.approx(1.75 + 4 * alpha_r)
    if 2.0 + 2 * alpha_r < min(3.0, 1.75 + 4 * alpha_r) - 1e-9:
        assert [(iv.first, iv.last) for iv in r.schedule] == [(1, 1), (2, 5), (6, 6)]
        assert r.schedule[1].topology.gens == (2,)


def test_ring_allreduce_is_static() -> None:
    r = synthesize(build("ring", 6), 6.0, Params(degree=2, bandwidth_bps=8.0, alpha_r=0.0))
    assert r.reconfigurations == 0
    assert r.optimal
    # 10 steps of one block (1 byte) each on two circuits: 0.5 s each
    assert r.completion_time_s == pytest.approx(10 * 0.5)


def test_cost_breakdown_adds_up() -> None:
    p = Params(degree=1, bandwidth_bps=1e9, alpha=1e-6, delta=2e-7, alpha_r=3e-6)
    r = synthesize(build("rd", 64), 2**20, p)
    total = sum(st.total_s for iv in r.schedule for st in iv.steps)
    assert r.completion_time_s == pytest.approx(total + r.reconfigurations * p.alpha_r)
    firsts = [iv.first for iv in r.schedule]
    assert firsts[0] == 1 and r.schedule[-1].last == 12
    assert all(b.first == a.last + 1 for a, b in itertools.pairwise(r.schedule))
    assert r.optimal  # degree-1 recursive doubling: circulant theorem
    assert r.completion_time_s <= min(r.static_s, r.every_step_s) + 1e-15


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--collective", "rd", "--gpus", "12"], "power of two"),
        (["--degree", "0"], "degree"),
        (["--delta=-1ns"], "delta"),
        (["--alpha=-1"], "alpha"),
        (["--alpha-r=-5us"], "alpha-r"),
        (["--size=-3"], "size"),
        (["--bandwidth", "fast"], "bandwidth"),
    ],
)
def test_cli_bad_parameters(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
                            ) -> None:
    assert mrcnet_main(["harvest", *argv]) == 2
    assert message in capsys.readouterr().err


def test_bad_params_raise() -> None:
    with pytest.raises(HarvestError, match="degree"):
        Params(degree=0, bandwidth_bps=1.0).validate()
    with pytest.raises(HarvestError, match="alpha-r"):
        Params(degree=1, bandwidth_bps=1.0, alpha_r=-1.0).validate()
    with pytest.raises(HarvestError, match="bandwidth"):
        Params(degree=1, bandwidth_bps=0.0).validate()


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["harvest", "--collective", "rd", "--gpus", "8", "--degree", "1", "--size", "1",
            "--bandwidth", "8", "--alpha", "0", "--delta", "0", "--alpha-r", "0.1", "--json"]
    assert mrcnet_main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["completion_time_s"] == pytest.approx(2.15)
    assert out["reconfigurations"] == 4
    assert out["optimal"] is True
    assert out["baselines"]["static_s"] == pytest.approx(3.0)
    assert out["baselines"]["every_step_s"] == pytest.approx(2.15)
    assert [iv["steps"] for iv in out["schedule"]] == [[1, 1], [2, 2], [3, 4], [5, 5], [6, 6]]
    assert sorted(out["schedule"][2]["edges"]) == sorted([u, (u + 4) % 8, 1] for u in range(8))
    assert "method" in out


def test_cli_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert mrcnet_main(["harvest", "--collective", "swing", "--gpus", "16", "--degree", "2",
                        "--size", "1GiB", "--alpha", "500ns", "--delta", "500ns"]) == 0
    text = capsys.readouterr().out
    assert "completion time" in text and "static" in text and "speedup" in text


def test_cli_module_parses_units() -> None:
    from controller.harvest.units import parse_amount, parse_time

    assert parse_amount("4GiB", "B", "size") == 4 * 2**30
    assert parse_amount("800G", "bps", "bandwidth") == 800e9
    assert parse_time("500ns", "alpha") == pytest.approx(5e-7)
    assert parse_time("10us", "alpha") == pytest.approx(1e-5)
    with pytest.raises(HarvestError):
        parse_time("soon", "alpha")
    assert cli.describe(CircuitTopology.circulant(4, [1])).startswith("circulant")


def test_orbit_cycles_agree_with_route_walking() -> None:
    from controller.harvest import exchange
    from controller.harvest.model import demands_of

    p = Params(degree=1, bandwidth_bps=8.0, delta=0.1)
    for n in (16, 32):
        steps = demands_of(build("swing", n), 1.0)
        for a, b in ((0, 1), (1, 3), (0, 4), (2, len(steps) - 1), (0, len(steps) - 1)):
            found = exchange.solve(n, steps[a : b + 1], p)
            assert found is not None
            topo, evals, cost, bound, proven = found
            assert topo.max_degrees() == (1, 1)
            for ev, st in zip(evals, steps[a : b + 1]):
                walked = evaluate_unipath(topo, st.pattern)
                assert ev.theta == pytest.approx(walked.theta)
                assert ev.hops == walked.hops
            assert bound <= cost * (1 + 1e-12)
            assert proven == (bound == cost)


def test_swing_degree1_proven_at_64() -> None:
    r = synthesize(build("swing", 64), 2**30, Params(1, 800e9, 0.0, 0.0, 1e-5))
    assert r.optimal
    assert "orbit-cycles" in r.method


@pytest.mark.slow
def test_sweep_writes_results(tmp_path: pytest.TempPathFactory,
                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"  # type: ignore[operator]
    argv = ["harvest", "sweep", "--collective", "swing", "--gpus", "16", "--degree", "2",
            "--alpha", "500ns", "--delta", "500ns", "--alpha-r-range", "10ns:10ms:4",
            "--sizes", "1KiB:1GiB:3", "--out", str(out), "--json"]
    assert mrcnet_main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    data = json.loads((out / "sweep.json").read_text())
    assert summary["rows"] == len(data["rows"]) == 12
    for row in data["rows"]:
        # static and reconfigure-every-step are both schedules the DP considers
        assert row["speedup_vs_static"] >= 1 - 1e-9
        assert row["speedup_vs_every_step"] >= 1 - 1e-9
    for name in ("speedup_vs_alpha_r.png", "speedup_vs_size.png", "reconfigurations.png",
                 "timeline.png"):
        assert (out / name).stat().st_size > 1000
    # more reconfiguration delay never buys more reconfigurations
    for size in {r["size_bytes"] for r in data["rows"]}:
        ks = [r["reconfigurations"] for r in data["rows"] if r["size_bytes"] == size]
        assert ks == sorted(ks, reverse=True)
