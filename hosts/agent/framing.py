"""Translate between the core's packets (TxPacket / RxMeta) and Ethernet frames on a port.

Transmit: the core says port, destination GID, EV, traffic class and ECN; this module fills
one reusable ``Frame`` per port (own MAC, static neighbour MAC, the port's GID as source),
places the EV by path mode (UDP source port, STEV flow label, or an SRv6 uSID container built
from the destination's template) and encodes straight into a preallocated buffer.

Receive: a frame becomes (MrcPacket, RxMeta). Frames that are not for this host (another
destination GID), not MRC (UDP port), malformed, or with a bad ICRC are counted drops.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from common.classes import ClassMap
from common.evbits import UsidTemplate, usid_container
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
)

ECT0 = 2
_new = object.__new__
if tuple(f.name for f in fields(RxMeta)) != (
    "port", "src_gid", "dst_gid", "ev", "dscp", "ce", "length", "rx_time"
):  # Framer.decode sets every field by hand
    raise ImportError("RxMeta fields changed: update Framer.decode")


def _udp_dport(data: memoryview) -> int | None:
    """The UDP destination port of an Ethernet/IPv6/UDP frame (no extension headers), or
    None when the frame is not one (only read for frames the codec refused)."""
    if len(data) < 58 or data[12:14] != b"\x86\xdd" or data[20] != 17:
        return None
    return int.from_bytes(data[56:58], "big")


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
        self._dscp_by_id: dict[int, int] = {id(c): d for c, d in config.classes.dscp.items()}
        self._stev = self.mode == EvMode.STRUCTURED
        self._srv6 = self.mode == EvMode.SRV6
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
        return self.encode_into(tx, self.tx_view)

    def encode_into(self, tx: TxPacket, buf: memoryview, port: int | None = None) -> int:
        """Encode ``tx`` into ``buf`` (a frame-sized writable view); return the frame length
        (0: cannot be sent). ``port``: the port it leaves on when a router chose another
        than the core's (its MAC and GID are the frame's source)."""
        frame = self._frames[tx.port if port is None else port]
        frame.ip_dst = tx.dst_gid
        frame.dscp = self._dscp_by_id[id(tx.tclass)]  # enum hashing is a Python call
        frame.ecn = ECT0 if tx.ecn_capable else 0
        ev = tx.ev
        frame.udp_sport = ev & 0xFFFF
        if self._stev:
            frame.flow_label = (ev >> 16) & 0xFFFF
        elif self._srv6:
            template = self.templates.get(tx.dst_gid)
            if template is None:
                self.no_template += 1
                return 0
            frame.srv6 = Srv6Outer(
                src=frame.ip_src, dst=usid_container(template, ev),
                dscp=frame.dscp, ecn=frame.ecn, flow_label=0,
            )
        return encode_frame(frame, tx.pkt, buf)

    def decode(self, data: memoryview, port: int, rx_time: float = 0.0
               ) -> tuple[MrcPacket, RxMeta] | None:
        """Decode a received frame (that reached the host at ``rx_time`` on the core's clock,
        0.0: unknown); None (and a counter) for anything not for this host."""
        try:
            frame, pkt = decode_frame(data)
        except WireError:
            if _udp_dport(data) not in (None, ROCEV2_UDP_PORT):
                self.rx.not_mrc += 1  # well-formed UDP, just not RoCEv2 (the codec refuses it)
            else:
                self.rx.malformed += 1
            return None
        if frame.udp_dport != ROCEV2_UDP_PORT:
            self.rx.not_mrc += 1
            return None
        if frame.ip_dst not in self._gid_set:  # bytes (a memoryview would raise: unhashable)
            self.rx.not_for_us += 1
            return None
        outer = frame.srv6
        if outer is not None:
            dscp = outer.dscp
            ce = outer.ecn == 3 or frame.ecn == 3
        else:
            dscp = frame.dscp
            ce = frame.ecn == 3
        sport = frame.udp_sport
        ev = ((frame.flow_label & 0xFFFF) << 16 | sport) if self._stev else sport
        src = frame.ip_src
        # object.__new__ + slot stores: no __init__ frame per received packet (checked
        # against RxMeta's fields at import)
        meta = _new(RxMeta)
        meta.port = port
        meta.src_gid = src if type(src) is bytes else bytes(src)
        meta.dst_gid = frame.ip_dst
        meta.ev = ev
        meta.dscp = dscp
        meta.ce = ce
        meta.length = len(data)
        meta.rx_time = rx_time
        return pkt, meta
