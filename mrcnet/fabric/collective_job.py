"""The ``collective`` role of a GPU's job app (run inside the agent by hostjobs.serve).

The job names the plan file, the GPU's rank, the controller session and an exchange folder;
the GPU runs its part (hosts/collective/runner.py) and reports per-step timings, the SHA-256
of its final buffer and its own check against the recomputed sum of every input.
"""

from __future__ import annotations

from typing import Any

from common.collective_plan import CUSTOM, RunPlan
from hosts.api import Context, QpAttr, RetryAttr
from hosts.collective.rendezvous import ControllerBarrier, FileExchange
from hosts.collective.runner import CollectiveRunner


def collective_attr(job: dict[str, Any]) -> QpAttr:
    """The QP attributes of a collective job's QPs (the simulator's GPUs use them too)."""
    return QpAttr(ev_profile_id=int(job.get("ev_profile", 0)),
                  mpr=int(job.get("mpr", 8)), mpr_dest=int(job.get("mpr", 8)),
                  timeout=int(job.get("ack_timeout", 19)),
                  retry=RetryAttr(linear_cnt=int(job.get("linear_cnt", 7)),
                                  exp_cnt=int(job.get("exp_cnt", 25))))


def run_collective_job(ctx: Context, job: dict[str, Any]) -> dict[str, Any]:
    plan = RunPlan.load(str(job["plan"]))
    rank = int(job["rank"])
    timeout = ctx.agent.run_clock.to_wall(float(job.get("timeout", 120)))  # run-clock s
    timing_start = ctx.agent.timing()
    barrier = ControllerBarrier(str(job["controller"]), str(job["session"]), rank)
    attr = collective_attr(job)
    router = ctx.agent.router
    if router is None:
        raise RuntimeError("this agent has no circuit router (not a GPU of a circuit fabric)")
    before = {k: getattr(router.counters, k) for k in router.counters.__slots__}
    runner = CollectiveRunner(ctx, plan, rank, barrier, FileExchange(job["exchange"], rank),
                              router, seed=int(job.get("seed", 1)), clock=ctx.agent.clock,
                              timeout=timeout, attr=attr)
    try:
        try:
            runner.setup()
            result = runner.run()
        finally:
            barrier.close()
        if plan.collective != CUSTOM and job.get("verify", True):
            runner.verify()
        out = result.to_json()
        out["router"] = {k: getattr(router.counters, k) - v for k, v in before.items()}
        core: Any = ctx.agent.core
        out["qp_stats"] = {str(peer): dict(ctx.agent.call(core.qp_stats, qp.qpn))
                           for peer, qp in runner.qps.items()}
        out["qp_states"] = {str(peer): qp.query().qp_state.name
                            for peer, qp in runner.qps.items()}
        out["timing"] = {"start": timing_start, "end": ctx.agent.timing()}
        out["errors"] = []
        return out
    finally:
        runner.close()  # the next run must not meet this one's QPs
