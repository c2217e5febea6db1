"""A collective plan whose reconfiguration meets a transfer that is still running.

Eight GPUs, two optical ports each. Step 1: g0 writes four blocks to g2, every other GPU is
idle; the topology is C(1) + C(2), so g0 -> g2 has the direct circuit and the two-hop path
through g1, and the model splits it over both. Step 2: g1 writes one block to g4 on a
topology in which g1 -> g2 and g3 -> g4 became g1 -> g4 and g3 -> g2: g1's port towards g2
changes. Under barrier "early" no GPU has to be waited for (g0 -> g2 keeps its direct path,
and its acknowledgements come back over C(2)), so the reconfiguration starts when the first
idle GPU arrives, while g0 is still writing: the two-hop path goes dark under it. Under
barrier "all" it starts once g0 and g2 are done. Shared by the unit and the emulation tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from common.collective_plan import RunPlan
from common.collectives import Collective, Step
from controller.harvest import runplan, schedules
from controller.harvest.model import CircuitTopology, Params
from hosts.collective.runner import make_input

N = 8
DEGREE = 2
WRITER, READER, SECOND_WRITER, SECOND_READER = 0, 2, 1, 4
BLOCKS = (0, 1, 2, 3)


def _only(src: int, dst: int, blocks: tuple[int, ...]) -> Step:
    sends = tuple(dst if u == src else None for u in range(N))
    return Step("all-gather", sends, tuple(blocks if u == src else () for u in range(N)), N)


def topologies() -> tuple[CircuitTopology, CircuitTopology]:
    first = CircuitTopology.circulant(N, [1, 2])
    counts = {(u, v): c for u, v, c in first.edges}
    for u, v in ((1, 2), (3, 4)):
        del counts[(u, v)]
    counts[(1, 4)] = counts[(3, 2)] = 1
    return first, CircuitTopology.from_counts(N, counts)


def overlap_plan(size: int, ranks: Sequence[str], alpha_r: float, barrier: str,
                 bandwidth_bps: float = 20e6) -> RunPlan:
    coll = Collective("custom", "custom", N, (_only(WRITER, READER, BLOCKS),
                                              _only(SECOND_WRITER, SECOND_READER, (5,))))
    first, second = topologies()
    params = Params(DEGREE, bandwidth_bps, 0.0, 0.0, alpha_r)
    sched = schedules.evaluate("overlap", coll, size, params, [(1, 1, first), (2, 2, second)])
    plan = runplan.build_plan(coll, sched, size, DEGREE, list(ranks),
                              bandwidth_bps=bandwidth_bps, dark_s=alpha_r)
    return runplan.with_barrier(plan, barrier)


def expected_digests(seed: int, size: int) -> list[str]:
    """Every GPU's final buffer, recomputed from the inputs: its own, with the blocks it
    received replaced by the sender's."""
    count = size // 4
    per_block = count // N
    out = []
    for rank in range(N):
        data = make_input(seed, rank, "int32", count).copy()
        for src, dst, blocks in ((WRITER, READER, BLOCKS), (SECOND_WRITER, SECOND_READER, (5,))):
            if rank == dst:
                sent = make_input(seed, src, "int32", count)
                for b in blocks:
                    data[b * per_block:(b + 1) * per_block] = sent[b * per_block:
                                                                   (b + 1) * per_block]
        out.append(hashlib.sha256(data.astype(np.int32).tobytes()).hexdigest())
    return out
