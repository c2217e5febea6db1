"""The GPU's built-in router: forwards multi-hop traffic of a photonic scale-up domain.

On a circuit fabric a GPU port transmits into one optical circuit; a pair of GPUs without a
direct circuit talks through intermediate GPUs, which forward in their host agent (never the
kernel: GPU namespaces have no IP stack). The routes of each collective step are explicit
paths (controller/harvest/routing.py): commodity (source GPU, destination GPU), EV bucket
``ev % buckets`` -> path. Every GPU on a path holds the next hop for it, so the source's EV
choice pins the whole path and the traffic split the model scored.

Tables are installed per step before the collective starts (:meth:`CircuitRouter.install`) and
switched at each step's barrier (:meth:`select`). Per packet there are two calls, both lean:

- :meth:`tx_port`: the port a locally sent packet leaves on (first hop of its path);
- :meth:`forward_port`: for a received frame, -2 when it is for this GPU, -1 for a counted drop
  (no route, hop limit exhausted, not IPv6/UDP), else the port to forward it on; the frame's
  hop limit is decremented in place.

Frames are plain Ethernet + IPv6 + UDP (the circuit fabric uses the UDP EV format): the
addresses and the UDP source port are read at fixed offsets, never through the codec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ETH_LEN = 14
IP6_HOP_LIMIT = ETH_LEN + 7
IP6_NEXT_HDR = ETH_LEN + 6
IP6_SRC = ETH_LEN + 8
IP6_DST = ETH_LEN + 24
UDP_SPORT = ETH_LEN + 40
MIN_FRAME = UDP_SPORT + 8
ETHERTYPE_IPV6 = b"\x86\xdd"
NEXT_HDR_UDP = 17
LOCAL = -2
DROP = -1

NextPorts = tuple[int, ...]  # per EV bucket: the out port, or -1 when this GPU is not on it


class RouteError(ValueError):
    """Routes that cannot be installed (unknown GPU, bad port, wrong bucket count)."""


@dataclass(slots=True)
class RouterCounters:
    forwarded: int = 0
    forwarded_bytes: int = 0
    no_route: int = 0  # transit frame of a commodity/bucket this GPU has no next hop for
    hop_limit: int = 0  # hop limit reached 1 before forwarding (a loop would end here)
    not_routable: int = 0  # not IPv6/UDP or too short: dropped
    tx_no_route: int = 0  # locally sent packet without a path (sent on the core's port)


class CircuitRouter:
    """Per-step next-hop tables of one GPU (see the module docstring)."""

    def __init__(self, rank: int, gids: Sequence[Sequence[bytes]], ports: int,
                 buckets: int) -> None:
        if not 1 <= buckets <= 256 or buckets & (buckets - 1):
            raise RouteError(f"the EV bucket count must be a power of two up to 256, got "
                             f"{buckets}")
        if not 0 <= rank < len(gids):
            raise RouteError(f"rank {rank} is not one of {len(gids)} GPUs")
        self.rank = rank
        self.n = len(gids)
        self.ports = ports
        self.buckets = buckets
        self._mask = buckets - 1
        self._rank_of: dict[bytes, int] = {}
        for r, owned in enumerate(gids):
            for gid in owned:
                if len(gid) != 16:
                    raise RouteError(f"GPU {r}: a GID is 16 bytes, got {len(gid)}")
                self._rank_of[bytes(gid)] = r
        self._mine = frozenset(bytes(g) for g in gids[rank])
        self._steps: dict[int, list[list[NextPorts | None]]] = {}
        self._table: list[list[NextPorts | None]] = self._empty()
        self.step: int | None = None
        self.counters = RouterCounters()

    def _empty(self) -> list[list[NextPorts | None]]:
        return [[None] * self.n for _ in range(self.n)]

    # -- control -----------------------------------------------------------------------
    def install(self, step: int, next_ports: Mapping[tuple[int, int], NextPorts]) -> None:
        """Tables of ``step``: (source, destination) -> out port per bucket (-1: not here)."""
        table = self._empty()
        for (s, t), ports in next_ports.items():
            if not (0 <= s < self.n and 0 <= t < self.n) or s == t:
                raise RouteError(f"step {step}: bad commodity {s} -> {t}")
            if len(ports) != self.buckets:
                raise RouteError(f"step {step}, {s} -> {t}: {len(ports)} buckets, expected "
                                 f"{self.buckets}")
            if any(not -1 <= p < self.ports for p in ports):
                raise RouteError(f"step {step}, {s} -> {t}: port out of range 0..{self.ports - 1}")
            table[s][t] = tuple(ports)
        self._steps[step] = table

    def select(self, step: int) -> None:
        """Use the tables of ``step`` from now on (called when the step is released)."""
        table = self._steps.get(step)
        if table is None:
            raise RouteError(f"no routes installed for step {step}")
        self._table = table
        self.step = step

    @property
    def installed(self) -> list[int]:
        return sorted(self._steps)

    # -- per packet ---------------------------------------------------------------------
    def tx_port(self, dst_gid: bytes, ev: int, default: int) -> int:
        """Out port of a packet this GPU sends to ``dst_gid`` with EV ``ev``."""
        t = self._rank_of.get(dst_gid)
        if t is not None:
            ports = self._table[self.rank][t]
            if ports is not None:
                port = ports[ev & self._mask]
                if port >= 0:
                    return port
        self.counters.tx_no_route += 1
        return default

    def forward_port(self, frame: memoryview, length: int) -> int:
        """LOCAL, DROP or the port to forward ``frame`` (hop limit decremented) on."""
        if length < MIN_FRAME or frame[12:14] != ETHERTYPE_IPV6:
            return LOCAL  # not ours to judge: the framer counts it
        dst = bytes(frame[IP6_DST:IP6_DST + 16])
        if dst in self._mine:
            return LOCAL
        c = self.counters
        if frame[IP6_NEXT_HDR] != NEXT_HDR_UDP:
            c.not_routable += 1
            return DROP
        t = self._rank_of.get(dst)
        s = self._rank_of.get(bytes(frame[IP6_SRC:IP6_SRC + 16]))
        if t is None or s is None:
            c.no_route += 1
            return DROP
        ports = self._table[s][t]
        # bucket = low bits of the EV, i.e. of the UDP source port's low byte
        port = -1 if ports is None else ports[frame[UDP_SPORT + 1] & self._mask]
        if port < 0:
            c.no_route += 1
            return DROP
        hop = frame[IP6_HOP_LIMIT]
        if hop <= 1:
            c.hop_limit += 1
            return DROP
        frame[IP6_HOP_LIMIT] = hop - 1
        c.forwarded += 1
        c.forwarded_bytes += length
        return port


def next_ports_for(
    rank: int, n: int, buckets: int,
    paths: Mapping[tuple[int, int], tuple[Sequence[Sequence[tuple[int, int]]], Sequence[int]]],
) -> dict[tuple[int, int], NextPorts]:
    """This GPU's next-hop table from explicit paths.

    ``paths[(s, t)] = (path list, bucket -> path index)``; a path is the hop list
    ``[(gpu, out port), ...]`` from s towards t. Entries exist for every commodity whose
    paths pass through (or start at) ``rank``."""
    out: dict[tuple[int, int], NextPorts] = {}
    for (s, t), (plist, bucket_path) in paths.items():
        if len(bucket_path) != buckets:
            raise RouteError(f"{s} -> {t}: {len(bucket_path)} buckets, expected {buckets}")
        hop_of: list[int] = []
        for path in plist:
            port = -1
            for gpu, out_port in path:
                if gpu == rank:
                    port = out_port
                    break
            hop_of.append(port)
        ports = tuple(hop_of[i] for i in bucket_path)
        if any(p >= 0 for p in ports):
            if not (0 <= s < n and 0 <= t < n):
                raise RouteError(f"bad commodity {s} -> {t}")
            out[(s, t)] = ports
    return out


__all__ = ["DROP", "LOCAL", "CircuitRouter", "NextPorts", "RouteError", "RouterCounters",
           "next_ports_for"]
