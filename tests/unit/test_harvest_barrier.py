"""Barrier "early": which GPUs a reconfiguration waits for, the ports it darkens, the model.

Independent checks: the changing ports are recomputed here from the two topologies' edges,
the paths of the plan are walked circuit by circuit, and the model's overlap is the
arithmetic of the step times.
"""

from __future__ import annotations

import pytest

from common.collectives import build
from controller.harvest import runplan, schedules
from controller.harvest.engine import Synthesizer
from controller.harvest.model import CircuitTopology, HarvestError, Params
from controller.harvest.routing import PortCircuit, assign_ports
from tests import overlap_plan as op

RANKS = [f"g{i}" for i in range(8)]
SIZE = 1 << 20


def test_circuits_that_stay_keep_their_ports() -> None:
    first, second = op.topologies()
    before = assign_ports(first, 2)
    after = assign_ports(second, 2, before)
    kept = set(before) & set(after)
    # every edge both topologies have is one circuit on the same two ports
    common = {(u, v) for u, v, _ in first.edges} & {(u, v) for u, v, _ in second.edges}
    assert {(c.src, c.dst) for c in kept} == common
    moved = [c for c in after if c not in kept]
    assert sorted((c.src, c.dst) for c in moved) == [(1, 4), (3, 2)]
    # each new circuit takes the ports its predecessor freed
    gone = {(c.src, c.dst): c for c in before if c not in kept}
    assert PortCircuit(1, gone[(1, 2)].src_port, 4, gone[(3, 4)].dst_port) in moved
    assert PortCircuit(3, gone[(3, 4)].src_port, 2, gone[(1, 2)].dst_port) in moved
    # without a previous interval: the same assignment as always (sorted edge order)
    assert assign_ports(second, 2) == assign_ports(second, 2, ())


def test_a_transfer_with_a_path_that_survives_is_not_waited_for() -> None:
    plan = op.overlap_plan(SIZE, RANKS, alpha_r=0.05, barrier="early")
    changed = runplan.changing_circuits(plan, 0, 1)
    assert {g for g, _p in changed} == {1, 3} and len(changed) == 2
    route = plan.steps[0].routes[(0, 2)]
    crossing = [any(hop in changed for hop in path) for path in route.paths]
    assert sorted(crossing) == [False, True]  # the direct circuit, and the path through g1
    assert set(route.buckets) == {0, 1}  # both carry traffic
    step2 = plan.steps[1]
    assert step2.reconfigure_after == ()
    t1 = plan.steps[0].model_s
    assert t1 > 0.05
    assert step2.hidden_reconfiguration_s == pytest.approx(0.05)  # all of alpha_r
    plain = op.overlap_plan(SIZE, RANKS, alpha_r=0.05, barrier="all")
    assert plain.model.model_s - plan.model.model_s == pytest.approx(0.05)
    assert plain.steps[1].reconfigure_after is None and plain.barrier == "all"
    # a barrier applied again, or taken back, gives the same plan
    assert runplan.with_barrier(plan, "early") == plan
    assert runplan.with_barrier(plan, "all") == plain


def test_direct_topologies_wait_for_every_gpu_and_hide_nothing() -> None:
    """Every-step RD: each step's circuits are exactly its own transfers' (one hop), so the
    next step's reconfiguration cuts every transfer's only path: every GPU is waited for."""
    coll = build("rd", 8)
    p = Params(1, 1e8, 1e-4, 1e-5, 1e-3)
    sched = schedules.builtin("every-step", Synthesizer(coll, SIZE, p))
    plan = runplan.with_barrier(runplan.build_plan(coll, sched, SIZE, 1, RANKS), "early")
    reconfiguring = [st for st in plan.steps[1:] if st.reconfigure_after is not None]
    assert len(reconfiguring) == sched.reconfigurations > 0
    for st in reconfiguring:
        assert st.reconfigure_after == tuple(range(8))
        assert st.hidden_reconfiguration_s == 0.0
    assert plan.model.model_s == pytest.approx(sched.model_s)


def test_an_unknown_barrier_is_refused() -> None:
    coll = build("ring", 8)
    sched = schedules.evaluate("static", coll, SIZE, Params(1, 1e8, 0, 0, 0),
                               [(1, len(coll.steps), CircuitTopology.circulant(8, [1]))])
    with pytest.raises(HarvestError, match="barrier"):
        runplan.with_barrier(runplan.build_plan(coll, sched, SIZE, 1, RANKS), "sometimes")
