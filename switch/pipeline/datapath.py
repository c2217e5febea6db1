"""The data path of a committed program: the p4json engine, its outputs as EgressPackets.

Besides port, priority and bytes, the traffic manager keeps per-queue statistics of trimmed
and CE-marked packets; the target derives them from what the program did: a copy is
*trimmed* when truncate() cut it, *CE-marked* when its outgoing IPv4/IPv6 ECN field is CE
(3) and the received frame's was not.
"""

from __future__ import annotations

from dataclasses import fields

from switch.p4json.engine import Engine
from switch.pipeline.hooks import TargetHooks
from switch.pipeline.pipeline_types import EgressPacket, QDepthFn

_new = object.__new__
if tuple(f.name for f in fields(EgressPacket)) != (
    "port", "priority", "data", "trimmed", "ecn_marked"
):  # JsonDataPath.process sets every field by hand
    raise ImportError("EgressPacket fields changed: update JsonDataPath.process")
IPV6 = b"\x86\xdd"
IPV4 = b"\x08\x00"


def ecn_of(frame: bytes) -> int:
    """ECN bits of the frame's first IP header (-1: not IP)."""
    kind = frame[12:14]
    if kind == IPV6 and len(frame) >= 16:
        return (frame[15] >> 4) & 3
    if kind == IPV4 and len(frame) >= 16:
        return frame[15] & 3
    return -1


class JsonDataPath:
    """Executes the committed program's JSON; the switch process calls ``process``."""

    def __init__(self, engine: Engine, hooks: TargetHooks) -> None:
        self.engine = engine
        self.hooks = hooks
        self._run = engine.run

    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        r = self._run(frame, ingress_port, now, qdepth)
        if r is None:
            return []
        if isinstance(r, tuple):  # the common case: one unicast copy
            port, priority, data, cut = r
            eg = _new(EgressPacket)  # no __init__ frame per packet (fields checked at import)
            eg.port = port
            eg.priority = priority
            eg.data = data
            eg.trimmed = cut
            eg.ecn_marked = (len(data) > 15 and data[12:14] in (IPV6, IPV4) and ecn_of(data) == 3
                             and ecn_of(frame) != 3)
            return [eg]
        ecn_in = -2
        result = []
        for o in r:
            data = o.data
            eg = _new(EgressPacket)
            eg.port = o.port
            eg.priority = o.priority
            eg.data = data
            eg.trimmed = o.truncated
            marked = False
            if len(data) > 15 and data[12:14] in (IPV6, IPV4) and ecn_of(data) == 3:
                if ecn_in == -2:
                    ecn_in = ecn_of(frame)
                marked = ecn_in != 3
            eg.ecn_marked = marked
            result.append(eg)
        return result

    def port_status_changed(self, port: int, up: bool) -> None:
        self.hooks.port_status_changed(port, up)
