"""A link direction's traffic-manager counters as the admin service reports them
(``DirectionStats`` of common/proto/switch_admin.proto), without the service: the switch's
admin service (switch/admin.py) and the simulator's switch samples (mrcnet/sim/record.py)
build their GetPorts answers with it.
"""

from __future__ import annotations

from collections.abc import Callable

from common.proto import switch_admin_pb2 as pb
from switch.traffic import WAIT_BUCKET_S, DirectionStats


def direction_stats(st: DirectionStats, depth: Callable[[int], tuple[int, int]]) -> pb.DirectionStats:
    msg = pb.DirectionStats(
        packets=st.packets,
        bytes=st.bytes,
        tail_drops=st.tail_drops,
        down_drops=st.down_drops,
        loss_drops=st.loss_drops,
    )
    for prio, q in enumerate(st.queues):
        pkts, nbytes = depth(prio)
        msg.queues.add(
            priority=prio,
            wait_hist=q.wait_hist,
            wait_bucket_s=WAIT_BUCKET_S,
            packets=q.packets,
            bytes=q.bytes,
            drops=q.drops,
            trims=q.trims,
            ecn_marks=q.ecn_marks,
            max_depth_pkts=q.max_depth_pkts,
            max_depth_bytes=q.max_depth_bytes,
            depth_pkts=pkts,
            depth_bytes=nbytes,
        )
    return msg
