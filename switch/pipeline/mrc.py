"""Data path of p4/mrc_switch.p4: parser, ingress and egress (egress runs at enqueue time).

Mirrors the P4 source statement by statement, built as MRC_EMBEDDED_TARGET: the egress
thresholds compare the real bytes queued (``qdepth(port, priority)[1]``, the program's
``meta.enq_qdepth_bytes``); see that file for the behaviour and docs/switch.md for the
deviations from BMv2. The per-packet path uses struct offsets on one
bytearray, dict lookups, per-prefix-length LPM dicts and a bounded cache of selector hashes.
"""

from __future__ import annotations

import struct
from dataclasses import fields

from common.p4schema.mrc_switch import DropReason
from switch.pipeline.externs import crc16_arc
from switch.pipeline.pipeline_types import EgressPacket, QDepthFn
from switch.pipeline.state import ActionCall, ProgramState

_U16x3 = struct.Struct("!HHH")
_U16 = struct.Struct("!H")
ROCEV2_PORT = 4791
MAX_SEGMENTS = 4
IMM_OPCODES = (0xC9, 0xCB)
LOW80 = (1 << 80) - 1
HASH_CACHE_MAX = 1 << 16
DROP_PORT = 511
HOP_BYTES = tuple(bytes((i,)) for i in range(256))
_new = object.__new__
if tuple(f.name for f in fields(EgressPacket)) != (
    "port", "priority", "data", "trimmed", "ecn_marked"
):  # MrcDataPath.process sets every field by hand
    raise ImportError("EgressPacket fields changed: update MrcDataPath.process")


def _set_dscp(buf: bytearray, off: int, dscp: int) -> None:
    word = int.from_bytes(buf[off : off + 4], "big")
    word = (word & ~(0x3F << 22)) | ((dscp & 0x3F) << 22)
    buf[off : off + 4] = word.to_bytes(4, "big")


def _sub16(buf: bytearray, off: int, delta: int) -> None:
    (value,) = _U16.unpack_from(buf, off)
    _U16.pack_into(buf, off, (value - delta) & 0xFFFF)


class MrcDataPath:
    """Executes mrc_switch.p4 against a ProgramState."""

    def __init__(self, state: ProgramState) -> None:
        p = state.program
        self.state = state
        self.my_usid = state.table("MrcIngress.my_usid")
        self.route = state.table("MrcIngress.ipv6_route")
        self.ecmp = state.table("MrcIngress.ecmp")
        self.ev_uplink = state.table("MrcIngress.ev_uplink")
        self.dscp_class = state.table("MrcIngress.dscp_class")
        self.port_config = state.table("MrcEgress.port_config")
        self.selector = state.profile("MrcIngress.ecmp_selector")
        self.rx = state.counter("MrcIngress.rx_port_class")
        self.drops = state.counter("MrcIngress.drop_reason")
        self.tx = state.counter("MrcEgress.tx_port_class")
        self.tx_queue = state.counter("MrcEgress.tx_port_queue")
        self.trims = state.counter("MrcEgress.trim_port_queue")
        self.ecn_marks = state.counter("MrcEgress.ecn_port_queue")
        self.port_down = state.register("MrcIngress.port_down")
        self.max_qdepth = state.register("MrcEgress.max_qdepth")
        self.a_drop = p.id("MrcIngress.drop")
        self.a_nexthop = p.id("MrcIngress.set_nexthop")
        self.a_route_ecmp = p.id("MrcIngress.route_ecmp")
        self.a_route_ev = p.id("MrcIngress.route_ev")
        self.a_usid_shift = p.id("MrcIngress.usid_shift")
        self.a_usid_decap = p.id("MrcIngress.usid_decap")
        self.a_set_class = p.id("MrcIngress.set_class")
        self.a_port_params = p.id("MrcEgress.set_port_params")
        self.hash_cache: dict[bytes, int] = {}
        self.l2_cache: dict[tuple[int, ...], bytes] = {}  # set_nexthop params -> dmac+smac

    # -- control-plane notifications -------------------------------------------------------
    def port_status_changed(self, port: int, up: bool) -> None:
        self.port_down.write(port, 0 if up else 1)
        self.selector.rebuild(self.state.port_up)

    def _drop(self, reason: int, nbytes: int) -> list[EgressPacket]:
        self.drops.count(reason, nbytes)
        return []

    # -- the program ------------------------------------------------------------------------
    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        n = len(frame)
        # ---- parser
        if n < 14:
            return self._drop(DropReason.PARSE_ERROR, n)
        if frame[12] != 0x86 or frame[13] != 0xDD:
            return self._drop(DropReason.NOT_IPV6, n)
        if n < 54 or frame[14] >> 4 != 6:
            return self._drop(DropReason.PARSE_ERROR, n)
        next_hdr = frame[20]
        off = 54
        srh_off = inner_off = udp_off = -1
        nseg = 0
        sport = dport = 0
        if next_hdr == 43:
            if n < off + 8:
                return self._drop(DropReason.PARSE_ERROR, n)
            nseg = frame[off + 4] + 1
            if nseg > MAX_SEGMENTS or frame[off + 1] != 2 * nseg or n < off + 8 + 16 * nseg:
                return self._drop(DropReason.PARSE_ERROR, n)
            srh_off = off
            next_hdr = frame[off]
            off += 8 + 16 * nseg
        if next_hdr == 41:
            if n < off + 40 or frame[off] >> 4 != 6:
                return self._drop(DropReason.PARSE_ERROR, n)
            inner_off = off
            next_hdr = frame[off + 6]
            off += 40
        if next_hdr == 17:
            if n < off + 8:
                return self._drop(DropReason.PARSE_ERROR, n)
            udp_off = off
            sport, dport, udp_len = _U16x3.unpack_from(frame, off)
            off += 8
            if dport == ROCEV2_PORT:
                if n < off + 12:
                    return self._drop(DropReason.PARSE_ERROR, n)
                opcode = frame[off]
                tsh = frame[off + 8] & 0x10
                off += 12
                if 0xC6 <= opcode <= 0xCB:  # an RDMA Write opcode
                    ext = 24 if tsh else 20
                    if opcode in IMM_OPCODES:
                        ext += 4
                    if n < off + ext:
                        return self._drop(DropReason.PARSE_ERROR, n)
                    off += ext
        hdr_bytes = off
        # ---- ingress: length sanity
        (payload_len,) = _U16.unpack_from(frame, 18)
        if payload_len + 54 > n or (
            udp_off >= 0 and (udp_len < 8 or udp_len + udp_off > n)
        ):
            return self._drop(DropReason.BAD_LENGTH, n)
        # ---- DSCP class
        dscp = frame[14] << 2 & 0x3C | frame[15] >> 6
        entry = self.dscp_class.entries.get((dscp,))
        act = entry.action if entry is not None and entry.action else self.dscp_class.default
        class_id = priority = trimmable = 0
        if act.action_id == self.a_set_class:
            class_id, priority, trimmable = act.params
        cell_in = ingress_port * 8 + class_id
        if 0 <= cell_in < self.rx.size:
            self.rx.packets[cell_in] += 1
            self.rx.bytes[cell_in] += n
        if frame[21] <= 1:
            return self._drop(DropReason.HOP_LIMIT, n)
        # the frame is copied only when a header changes beyond L2 + hop limit
        buf: bytearray | None = None
        cur: bytes | bytearray = frame
        # ---- SRv6 uSID
        dst = int.from_bytes(frame[38:54], "big")
        if self.my_usid.lengths:
            hit = self.my_usid.lookup_lpm(dst)
            if hit is not None and hit.action is not None:
                aid = hit.action.action_id
                if aid == self.a_usid_shift:
                    cur = buf = bytearray(frame)
                    dst = (dst >> 96 << 96) | ((dst & LOW80) << 16)
                    if srh_off >= 0 and (dst >> 80) & 0xFFFF == 0:
                        left = buf[srh_off + 3]
                        if left == 0 or left - 1 >= nseg:
                            return self._drop(DropReason.USID_ERROR, n)
                        left -= 1
                        buf[srh_off + 3] = left
                        seg = srh_off + 8 + 16 * left
                        dst = int.from_bytes(buf[seg : seg + 16], "big")
                    buf[38:54] = dst.to_bytes(16, "big")
                elif aid == self.a_usid_decap:
                    if inner_off < 0:
                        return self._drop(DropReason.USID_ERROR, n)
                    cur = buf = bytearray(frame)
                    delta = inner_off - 14
                    del buf[14:inner_off]
                    hdr_bytes -= delta
                    if udp_off >= 0:
                        udp_off -= delta
                    srh_off = inner_off = -1
                    dst = int.from_bytes(buf[38:54], "big")
        # ---- routing: TableState.lookup_lpm, inlined (per packet)
        route = self.route
        hit = None
        masks = route.masks
        by_len = route.by_len
        for plen in route.lengths:
            hit = by_len[plen].get(dst & masks[plen])
            if hit is not None:
                break
        act = hit.action if hit is not None and hit.action else route.default
        aid = act.action_id
        nexthop: ActionCall | None = None
        ev_group = 0
        if aid == self.a_nexthop:
            nexthop = act
        elif aid == self.a_route_ecmp:
            nexthop = self._ecmp(act.params[0], cur, sport, dport)
        elif aid == self.a_route_ev:
            ev_group, shift, mask, fallback = act.params
            flow = int.from_bytes(cur[16:18], "big")  # flow label bits 15..0
            ev = (flow << 16) | sport
            ev_hit = self.ev_uplink.entries.get((ev_group, (ev >> shift) & mask))
            if ev_hit is None or ev_hit.action is None:  # miss: default action, then fallback
                ev_act = self.ev_uplink.default
                nexthop = ev_act if ev_act.action_id == self.a_nexthop else None
                if fallback:
                    nexthop = self._ecmp(fallback, cur, sport, dport)
            elif ev_hit.action.action_id == self.a_nexthop:
                nexthop = ev_hit.action
                if fallback and self.port_down.read(nexthop.params[0]):
                    nexthop = self._ecmp(fallback, cur, sport, dport)
        if nexthop is None or nexthop.action_id != self.a_nexthop:
            reason = DropReason.EV_MISS if ev_group else DropReason.NO_ROUTE
            return self._drop(reason, n)
        port = nexthop.params[0]
        if port == DROP_PORT:
            return self._drop(DropReason.NO_ROUTE, n)
        pd = self.port_down  # RegisterArray.read, inlined (per packet)
        if 0 <= port < pd.size and pd.cells[port]:
            return self._drop(DropReason.PORT_DOWN, n)
        # keyed by the params tuple: hashed in C, where an ActionCall hashes in Python
        l2 = self.l2_cache.get(nexthop.params)
        if l2 is None:
            l2 = nexthop.params[2].to_bytes(6, "big") + nexthop.params[1].to_bytes(6, "big")
            if len(self.l2_cache) >= HASH_CACHE_MAX:
                self.l2_cache.clear()
            self.l2_cache[nexthop.params] = l2
        hop_limit = cur[21] - 1
        # ---- egress (at enqueue time); MRC_EMBEDDED_TARGET: the byte depth is intrinsic
        cell = port * 8 + priority
        enq, enq_bytes = qdepth(port, priority)
        if enq > 0x7FFFF:
            enq = 0x7FFFF
        if enq_bytes > 0xFFFFFFFF:
            enq_bytes = 0xFFFFFFFF
        qmax = self.max_qdepth.cells
        if 0 <= cell < len(qmax) and enq > qmax[cell]:
            qmax[cell] = enq
        ecn_th = trim_th = last_hop = trim_dscp = trim_prio = 0
        pc = self.port_config.entries.get((port,))
        pc_act = pc.action if pc is not None and pc.action else self.port_config.default
        if pc_act.action_id == self.a_port_params:
            ecn_th, trim_th, last_hop, trim_dscp, trim_prio = pc_act.params
        trimmed = marked = False
        if trimmable and trim_th and enq_bytes >= trim_th:
            if buf is None:
                cur = buf = bytearray(frame)
            self.trims.count(cell, len(buf))
            cut = len(buf) - hdr_bytes
            if cut > 0:
                del buf[hdr_bytes:]
                _sub16(buf, 18, cut)
                if inner_off >= 0:
                    _sub16(buf, inner_off + 4, cut)
                if udp_off >= 0:
                    _sub16(buf, udp_off + 4, cut)
            if udp_off >= 0:
                buf[udp_off + 6 : udp_off + 8] = b"\x00\x00"
            _set_dscp(buf, 14, trim_dscp)
            if inner_off >= 0:
                _set_dscp(buf, inner_off, trim_dscp)
            priority = trim_prio
            trimmed = True
        elif not last_hop and ecn_th and cur[15] & 0x30 and enq_bytes >= ecn_th:
            if buf is None:
                cur = buf = bytearray(frame)
            buf[15] |= 0x30
            self.ecn_marks.count(cell, len(buf))
            marked = True
        if buf is None:
            data = b"".join((l2, frame[12:21], HOP_BYTES[hop_limit], memoryview(frame)[22:]))
        else:
            buf[0:12] = l2
            buf[21] = hop_limit
            data = bytes(buf)
        size = len(data)
        cell_out = port * 8 + class_id
        if 0 <= cell_out < self.tx.size:
            self.tx.packets[cell_out] += 1
            self.tx.bytes[cell_out] += size
            cell_q = port * 8 + priority
            self.tx_queue.packets[cell_q] += 1
            self.tx_queue.bytes[cell_q] += size
        eg = _new(EgressPacket)  # no __init__ frame per packet (fields checked at import)
        eg.port = port
        eg.priority = priority
        eg.data = data
        eg.trimmed = trimmed
        eg.ecn_marked = marked
        return [eg]

    def _ecmp(self, group: int, buf: bytes | bytearray, sport: int, dport: int) -> ActionCall | None:
        entry = self.ecmp.entries.get((group,))
        if entry is None:
            return None
        profile = self.selector
        if entry.member_id is not None:
            return profile.members.get(entry.member_id)
        if entry.group_id is None:
            return entry.action
        choices = profile.choices.get(entry.group_id)
        if not choices:
            return None
        tail = (
            (int.from_bytes(buf[15:18], "big") & 0xFFFFF) << 44
            | buf[20] << 36
            | sport << 20
            | dport << 4
        )
        key = bytes(buf[22:54]) + tail.to_bytes(8, "big")
        h = self.hash_cache.get(key)
        if h is None:
            h = crc16_arc(key)
            if len(self.hash_cache) >= HASH_CACHE_MAX:
                self.hash_cache.clear()
            self.hash_cache[key] = h
        return choices[h % len(choices)]
