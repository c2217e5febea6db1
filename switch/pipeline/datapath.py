"""The data path of a committed program: the p4json engine, its outputs as EgressPackets.

Besides port, priority and bytes, the traffic manager keeps per-queue statistics of trimmed
and CE-marked packets; the target derives them from what the program did: a copy is
*trimmed* when truncate() cut it, *CE-marked* when its outgoing IPv4/IPv6 ECN field is CE
(3) and the received frame's was not.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import fields

from switch.p4json.engine import Engine, Output
from switch.pipeline.hooks import TargetHooks
from switch.pipeline.pipeline_types import (
    EgressPacket,
    EgressTuple,
    FailedFn,
    QDepthFn,
)

_new = object.__new__
if tuple(f.name for f in fields(EgressPacket)) != (
    "port", "priority", "data", "trimmed", "ecn_marked"
):  # JsonDataPath.process sets every field by hand
    raise ImportError("EgressPacket fields changed: update JsonDataPath.process")
IPV6 = b"\x86\xdd"
IPV4 = b"\x08\x00"


def _marked(data: bytes, frame: bytes) -> bool:
    """The copy ``data`` leaves CE-marked (3) and the received ``frame`` was not."""
    return (len(data) > 15 and data[12:14] in (IPV6, IPV4) and ecn_of(data) == 3
            and ecn_of(frame) != 3)


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
            eg.ecn_marked = _marked(data, frame)
            return [eg]
        return self._egress_packets(r, frame)

    @staticmethod
    def _egress_packets(r: list[Output], frame: bytes) -> list[EgressPacket]:
        """The engine's outputs (clones, replicas, recirculated copies) as EgressPackets."""
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

    def process_batch(
        self, frames: Sequence[bytes], ingress_port: int, now: float, qdepth: QDepthFn,
        failed: FailedFn,
    ) -> Iterator[EgressTuple]:
        """``process`` for a batch of frames from one port, as (port, priority, data,
        trimmed, ecn_marked) tuples: each frame's copies are yielded before the next frame
        runs (so it sees the queue depths they left), and no object or Python call is added
        per frame around the compiled pipeline (the engine's ``run`` inlined). A frame the
        target cannot handle costs that frame: ``failed(ingress_port)``."""
        engine = self.engine
        fast = engine.fast
        stats = engine.stats
        now_us = engine.now_us(now)
        for frame in frames:
            try:
                kind, r = fast(frame, ingress_port, now_us, len(frame), qdepth)
            except Exception as exc:
                stats.packets += 1
                engine.failed(exc)
                continue
            try:
                if kind == 0 and r is not None:  # one unicast copy: settle() inlined
                    stats.packets += 1
                    stats.outputs += 1
                    port, priority, data, cut = r
                    # the IP ECN byte and the EtherType unchanged: not marked here (the
                    # common case, byte reads); else compare the ECN fields
                    if (len(data) > 15 and len(frame) > 15 and data[15] == frame[15]
                            and data[12] == frame[12] and data[13] == frame[13]):
                        yield port, priority, data, cut, False
                    else:
                        yield port, priority, data, cut, _marked(data, frame)
                    continue
                res = engine.settle(kind, r, frame, ingress_port, now_us, qdepth)
                if res is None:
                    continue
                if isinstance(res, tuple):
                    port, priority, data, cut = res
                    yield port, priority, data, cut, _marked(data, frame)
                    continue
                for eg in self._egress_packets(res, frame):
                    yield eg.port, eg.priority, eg.data, eg.trimmed, eg.ecn_marked
            except Exception:  # (the consumer's own errors never arrive here)
                failed(ingress_port)

    def port_status_changed(self, port: int, up: bool) -> None:
        self.hooks.port_status_changed(port, up)
