"""Translate between the core's packets (TxPacket / RxMeta) and Ethernet frames on a port.

Transmit: the core says port, destination GID, EV, traffic class and ECN; this module fills
one reusable ``Frame`` per port (own MAC, static neighbour MAC, the port's GID as source),
places the EV by path mode (UDP source port, STEV flow label, or an SRv6 uSID container built
from the destination's template) and encodes straight into a preallocated buffer.

Receive: a frame becomes (MrcPacket, RxMeta). Frames that are not for this host (another
destination GID), not MRC (UDP port), malformed, or with a bad ICRC are counted drops.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.classes import ClassMap, TrafficClass
from hosts.agent.config import AgentConfig
from hosts.transport import RxMeta, TxPacket
from hosts.wire import (
    ROCEV2_UDP_PORT,
    EvMode,
    Frame,
    MrcPacket,
    Srv6Outer,
    WireError,
    decode_frame,
    encode_frame,
    ev_to_fields,
    fields_to_ev,
    usid_container,
)
from hosts.wire.ev import UsidTemplate

ECT0 = 2


@dataclass(slots=True)
class RxCounters:
    malformed: int = 0  # WireError from the codec (includes a bad ICRC)
    not_for_us: int = 0  # destination GID is none of this host's
    not_mrc: int = 0  # UDP destination port is not 4791


class Framer:
    """Per-agent encoder/decoder; owns one transmit buffer and one Frame per port."""

    def __init__(self, config: AgentConfig, buf_size: int = 9216) -> None:
        self.mode = config.ev_mode
        self.templates: dict[bytes, UsidTemplate] = dict(config.srv6_templates)
        self.classes: ClassMap = config.classes
        self._dscp: dict[TrafficClass, int] = dict(config.classes.dscp)
        self._gids = [p.gid for p in config.ports]
        self._gid_set = frozenset(self._gids)
        self._frames = [
            Frame(eth_dst=p.neighbor_mac, eth_src=p.mac, ip_src=p.gid) for p in config.ports
        ]
        self.tx_buf = bytearray(buf_size)
        self.tx_view = memoryview(self.tx_buf)
        self.rx = RxCounters()
        self.no_template = 0  # SRv6 packets to a destination without a template (dropped)

    def encode(self, tx: TxPacket) -> int:
        """Encode ``tx`` into ``tx_buf``; return the frame length (0: cannot be sent)."""
        frame = self._frames[tx.port]
        frame.ip_dst = tx.dst_gid
        frame.dscp = self._dscp[tx.tclass]
        frame.ecn = ECT0 if tx.ecn_capable else 0
        sport, flow = ev_to_fields(self.mode, tx.ev)
        frame.udp_sport = sport
        frame.flow_label = flow
        if self.mode == EvMode.SRV6:
            template = self.templates.get(tx.dst_gid)
            if template is None:
                self.no_template += 1
                return 0
            frame.srv6 = Srv6Outer(
                src=frame.ip_src, dst=usid_container(template, tx.ev),
                dscp=frame.dscp, ecn=frame.ecn, flow_label=flow,
            )
        return encode_frame(frame, tx.pkt, self.tx_buf)

    def decode(self, data: memoryview, port: int) -> tuple[MrcPacket, RxMeta] | None:
        """Decode a received frame; None (and a counter) for anything not for this host."""
        try:
            frame, pkt = decode_frame(data)
        except WireError:
            self.rx.malformed += 1
            return None
        if frame.udp_dport != ROCEV2_UDP_PORT:
            self.rx.not_mrc += 1
            return None
        if frame.ip_dst not in self._gid_set:
            self.rx.not_for_us += 1
            return None
        outer = frame.srv6
        dscp = outer.dscp if outer is not None else frame.dscp
        meta = RxMeta(
            port=port,
            src_gid=bytes(frame.ip_src),
            dst_gid=bytes(frame.ip_dst),
            dscp=dscp,
            ce=frame.ce,
            ev=fields_to_ev(self.mode, frame.udp_sport, frame.flow_label),
            length=len(data),
        )
        return pkt, meta
