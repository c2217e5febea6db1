"""A classic BPF socket filter that lets only MRC frames reach a NIC port's raw socket.

Host namespaces run a kernel IPv6 stack too (``ping``, ``iperf3`` through the fabric), and
an AF_PACKET socket bound to ETH_P_IPV6 sees every IPv6 frame of its interface. The filter
keeps the others out in the kernel, so they cost the agent nothing and never show up in its
decode counters: accepted are IPv6 frames whose next header is UDP with destination port
4791 (RoCEv2), a routing header (SRv6 SRH) or IPv6 (SRv6 encapsulation without SRH); the
codec still judges those.
"""

from __future__ import annotations

import ctypes
import socket
import struct

from hosts.wire.enums import ROCEV2_UDP_PORT

SO_ATTACH_FILTER = 26
ETH_HLEN = 14
IPV6_NEXT_HEADER = ETH_HLEN + 6
UDP_DPORT = ETH_HLEN + 40 + 2
NH_UDP, NH_ROUTING, NH_IPV6 = 17, 43, 41
ACCEPT_BYTES = 0x40000  # ret #k: bytes to keep (more than any frame)

# opcodes (linux/filter.h): BPF_LD|BPF_B|BPF_ABS, BPF_LD|BPF_H|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K,
# BPF_RET|BPF_K
_LDB, _LDH, _JEQ, _RET = 0x30, 0x28, 0x15, 0x06


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def mrc_filter_program() -> bytes:
    """The filter as an array of ``struct sock_filter``."""
    return b"".join([
        _insn(_LDB, 0, 0, IPV6_NEXT_HEADER),  # 0: A = next header
        _insn(_JEQ, 3, 0, NH_UDP),  # 1: UDP -> 5
        _insn(_JEQ, 5, 0, NH_ROUTING),  # 2: SRH -> accept (8)
        _insn(_JEQ, 4, 0, NH_IPV6),  # 3: IPv6-in-IPv6 -> accept (8)
        _insn(_RET, 0, 0, 0),  # 4: drop
        _insn(_LDH, 0, 0, UDP_DPORT),  # 5: A = UDP destination port
        _insn(_JEQ, 1, 0, ROCEV2_UDP_PORT),  # 6: RoCEv2 -> accept (8)
        _insn(_RET, 0, 0, 0),  # 7: drop
        _insn(_RET, 0, 0, ACCEPT_BYTES),  # 8: accept
    ])


def attach_mrc_filter(sock: socket.socket) -> None:
    """Attach the filter (raises OSError if the kernel refuses it)."""
    program = mrc_filter_program()
    count = len(program) // 8
    insns = ctypes.create_string_buffer(program, len(program))
    # struct sock_fprog { unsigned short len; struct sock_filter *filter; } (padded to 16)
    fprog = struct.pack("HL", count, ctypes.addressof(insns))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
