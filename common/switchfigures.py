"""The figures the controller sums from an embedded switch's GetPorts answer (bytes its MRC
queues sent per port, drops, trims, ECN marks): the controller's embedded driver and the
simulator's switch samples (mrcnet/sim/record.py) read the same answer the same way.
"""

from __future__ import annotations

from common.classes import BEST_EFFORT_PRIORITY
from common.proto import switch_admin_pb2 as pb


def embedded_figures(resp: pb.GetPortsResponse) -> tuple[dict[int, int], int, int, int]:
    """(bytes sent per port by its MRC queues, not the best-effort queue of the hosts' kernel
    traffic; tail + down + random-loss drops; trims; ECN marks) of a GetPorts answer."""
    drops = trims = ecn = 0
    for p in resp.ports:
        for d in (p.egress, p.ingress):
            drops += d.tail_drops + d.down_drops + d.loss_drops
            for q in d.queues:
                trims += q.trims
                ecn += q.ecn_marks
    sent = {p.port: sum(q.bytes for q in p.egress.queues if q.priority != BEST_EFFORT_PRIORITY)
            for p in resp.ports}
    return sent, drops, trims, ecn
