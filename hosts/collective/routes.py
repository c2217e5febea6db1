"""A GPU's router tables from the collective plan's routes (``common.collective_plan``)."""

from __future__ import annotations

from common.collective_plan import PlanError, RunPlan
from hosts.agent.router import NextPorts, RouteError, next_ports_for


def router_tables(plan: RunPlan, rank: int) -> dict[int, dict[tuple[int, int], NextPorts]]:
    """Per step: GPU ``rank``'s next-hop table (for hosts.agent.router.CircuitRouter)."""
    out = {}
    for st in plan.steps:
        paths = {pair: (route.paths, route.buckets) for pair, route in st.routes.items()}
        try:
            out[st.step] = next_ports_for(rank, plan.gpus, plan.buckets, paths)
        except RouteError as exc:
            raise PlanError(f"step {st.step}: {exc}") from None
    return out


__all__ = ["router_tables"]
