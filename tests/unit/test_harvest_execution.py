"""Executable Harvest schedules: model times, path routing, EV buckets, plans, GPU routers.

Independent checks: schedule times against the engine's own totals, path-LP throughput against
the model's theta, and the plan's per-GPU next-hop tables walked hop by hop (by a walker that
shares no code with the router) from every source to every destination.
"""

from __future__ import annotations

import itertools
import json
import struct

import pytest

from common.collective_plan import RunPlan
from common.collectives import build
from controller.harvest import runplan, schedules
from controller.harvest.engine import Synthesizer, synthesize
from controller.harvest.model import CircuitTopology, HarvestError, Params, demands_of
from controller.harvest.routing import assign_ports, bucket_theta, step_routes
from hosts.agent.router import DROP, LOCAL, CircuitRouter, RouteError, next_ports_for
from hosts.collective.routes import router_tables

N = 8
SIZE = 1 << 20
CASES = [("rd", 1), ("rd", 2), ("swing", 1), ("swing", 2), ("ring", 1), ("ring", 2)]


def params(d: int, alpha_r: float = 1e-3) -> Params:
    return Params(d, 1e8, 1e-4, 1e-5, alpha_r)


@pytest.mark.parametrize(("name", "d"), CASES)
def test_builtin_schedules_cost_what_the_engine_says(name: str, d: int) -> None:
    coll = build(name, N)
    syn = Synthesizer(coll, SIZE, params(d))
    res = syn.result()
    got = {k: schedules.builtin(k, syn) for k in schedules.SCHEDULE_KINDS}
    assert got["static"].model_s == pytest.approx(res.static_s, rel=1e-9)
    assert got["every-step"].model_s == pytest.approx(res.every_step_s, rel=1e-9)
    assert got["harvest"].model_s == pytest.approx(res.completion_time_s, rel=1e-9)
    assert got["harvest"].reconfigurations == res.reconfigurations
    assert got["static"].reconfigurations == 0
    assert got["harvest"].model_s <= min(got["static"].model_s, got["every-step"].model_s) + 1e-12


def test_schedule_file_round_trip_and_refusals() -> None:
    coll = build("rd", N)
    p = params(1, 1e-4)
    res = synthesize(coll, SIZE, p)
    assert res.reconfigurations > 0
    again = schedules.from_json(json.loads(json.dumps(res.to_json())), coll, SIZE, p)
    assert again.model_s == pytest.approx(res.completion_time_s, rel=1e-9)
    assert [(iv.first, iv.last) for iv in again.intervals] == \
        [(iv.first, iv.last) for iv in res.schedule]
    data = res.to_json()
    with pytest.raises(HarvestError, match="collective 'rd'"):
        schedules.from_json(data, build("swing", N), SIZE, p)
    with pytest.raises(HarvestError, match="degree"):
        schedules.from_json({**data, "degree": 2}, coll, SIZE, p)
    short = {**data, "schedule": data["schedule"][:-1]}
    with pytest.raises(HarvestError, match="covers steps"):
        schedules.from_json(short, coll, SIZE, p)
    bad_edge = json.loads(json.dumps(data))
    bad_edge["schedule"][0]["edges"].append([0, 9, 1])
    with pytest.raises(HarvestError, match="outside"):
        schedules.from_json(bad_edge, coll, SIZE, p)
    with pytest.raises(HarvestError, match="needs degree 2"):
        schedules.evaluate("x", coll, SIZE, p, [(1, 6, CircuitTopology.circulant(N, [1, 2]))])


def test_ports_are_assigned_once_per_direction() -> None:
    topo = CircuitTopology.circulant(N, [1, 3])
    circuits = assign_ports(topo, 2)
    assert len(circuits) == 16
    assert len({(c.src, c.src_port) for c in circuits}) == 16
    assert len({(c.dst, c.dst_port) for c in circuits}) == 16
    assert sorted((c.src, c.dst) for c in circuits) == sorted(
        (u, v) for u, v, k in topo.edges for _ in range(k))
    with pytest.raises(HarvestError, match="more than 1 ports"):
        assign_ports(topo, 1)


@pytest.mark.parametrize(("name", "d"), CASES)
def test_routes_realise_the_model_throughput(name: str, d: int) -> None:
    coll = build(name, N)
    syn = Synthesizer(coll, SIZE, params(d))
    demands = demands_of(coll, SIZE)
    for kind in schedules.SCHEDULE_KINDS:
        for iv in schedules.builtin(kind, syn).intervals:
            circuits = assign_ports(iv.topology, d)
            for st in iv.steps:
                pat = demands[st.step - 1].pattern
                routes = step_routes(iv.topology, circuits, pat, st.hops, 64, st.theta)
                assert routes.theta == pytest.approx(st.theta, rel=1e-6)
                assert routes.hops <= st.hops
                # even spraying over the EV buckets keeps (within rounding) the model's theta
                assert bucket_theta(routes, pat, len(circuits), 64) >= st.theta * (1 - 2 / 64)
                for (s, t), pr in routes.pairs.items():
                    assert len(pr.buckets) == 64
                    for path in pr.paths:  # a chain of circuits from s to t, no GPU twice
                        nodes = [circuits[path[0]].src] + [circuits[k].dst for k in path]
                        assert nodes[0] == s and nodes[-1] == t
                        assert all(circuits[a].dst == circuits[b].src
                                   for a, b in itertools.pairwise(path))
                        assert len(set(nodes)) == len(nodes)


def walk(tables: dict[int, dict[tuple[int, int], tuple[int, ...]]], peers: dict[tuple[int, int], int],
         s: int, t: int, bucket: int) -> list[int] | None:
    """Follow the per-GPU next-hop tables (no router code): the GPUs visited, or None."""
    node, seen = s, [s]
    while node != t:
        ports = tables[node].get((s, t))
        if ports is None or ports[bucket] < 0:
            return None
        node = peers[(node, ports[bucket])]
        if node in seen:
            return None
        seen.append(node)
    return seen


@pytest.mark.parametrize(("name", "d", "kind"), [("rd", 1, "static"), ("swing", 2, "static"),
                                                 ("rd", 2, "every-step"), ("ring", 1, "harvest")])
def test_plan_tables_deliver_every_pair(name: str, d: int, kind: str) -> None:
    coll = build(name, N)
    syn = Synthesizer(coll, SIZE, params(d))
    sched = schedules.builtin(kind, syn)
    written = runplan.build_plan(coll, sched, SIZE, d, [f"g{i}" for i in range(N)])
    plan = RunPlan.from_json(json.loads(json.dumps(written.to_json())))
    tables = {r: router_tables(plan, r) for r in range(N)}
    for st in plan.steps:
        iv = written.intervals[st.interval]
        peers = {(c.src, c.src_port): c.dst for c in iv.circuits}
        step_tables = {r: tables[r][st.step] for r in range(N)}
        hops = written.steps[st.step - 1].hops
        for s, t in coll.steps[st.step - 1].pairs:
            for b in range(plan.buckets):
                path = walk(step_tables, peers, s, t, b)
                assert path is not None and len(path) - 1 <= hops, (st.step, s, t, b)


def frame(src: bytes, dst: bytes, sport: int, hop: int = 64, nxt: int = 17) -> bytearray:
    eth = b"\x02" * 6 + b"\x02" * 6 + b"\x86\xdd"
    ip6 = struct.pack("!IHBB", 6 << 28, 8, nxt, hop) + src + dst
    return bytearray(eth + ip6 + struct.pack("!HHHH", sport, 4791, 8, 0))


def gid(rank: int, port: int) -> bytes:
    return bytes(14) + bytes([port, rank + 1])


def test_router_forwards_drops_and_counts() -> None:
    gids = [[gid(r, p) for p in range(2)] for r in range(4)]
    router = CircuitRouter(1, gids, 2, 4)
    # commodity 0 -> 3 crosses GPU 1: buckets 0, 2 leave on port 0, 1, 3 on port 1
    router.install(5, {(0, 3): (0, 1, 0, 1), (1, 2): (1, 1, 1, 1)})
    router.select(5)
    f = frame(gids[0][0], gids[3][1], 0xC002)
    assert router.forward_port(memoryview(f), len(f)) == 0
    assert f[21] == 63  # hop limit decremented in place
    f = frame(gids[0][1], gids[3][0], 0xC003)
    assert router.forward_port(memoryview(f), len(f)) == 1
    local = frame(gids[0][0], gids[1][1], 1)
    assert router.forward_port(memoryview(local), len(local)) == LOCAL
    unknown = frame(gids[2][0], gids[3][0], 1)  # 2 -> 3 does not cross GPU 1
    assert router.forward_port(memoryview(unknown), len(unknown)) == DROP
    dying = frame(gids[0][0], gids[3][0], 0, hop=1)
    assert router.forward_port(memoryview(dying), len(dying)) == DROP
    tcp = frame(gids[0][0], gids[3][0], 0, nxt=6)
    assert router.forward_port(memoryview(tcp), len(tcp)) == DROP
    c = router.counters
    assert (c.forwarded, c.no_route, c.hop_limit, c.not_routable) == (2, 1, 1, 1)
    assert router.tx_port(gids[2][0], 0xC001, default=0) == 1
    assert router.tx_port(gids[3][0], 0xC001, default=0) == 0 and c.tx_no_route == 1
    with pytest.raises(RouteError, match="buckets"):
        router.install(6, {(0, 3): (0, 1)})
    with pytest.raises(RouteError, match="port out of range"):
        router.install(6, {(0, 3): (0, 5, 0, 0)})
    with pytest.raises(RouteError, match="no routes installed for step 9"):
        router.select(9)


def test_next_ports_from_paths() -> None:
    paths = {(0, 2): ([[(0, 0), (1, 1)], [(0, 1), (3, 0)]], [0, 1, 0, 1])}
    assert next_ports_for(1, 4, 4, paths) == {(0, 2): (1, -1, 1, -1)}
    assert next_ports_for(0, 4, 4, paths) == {(0, 2): (0, 1, 0, 1)}
    assert next_ports_for(2, 4, 4, paths) == {}
