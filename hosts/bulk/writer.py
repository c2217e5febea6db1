"""The bulk writer: a registered buffer written into the peer's, in WRs of ``chunk`` bytes
with at most ``depth`` outstanding, the last one (or every one) a WriteImm whose receive
completion tells the sink its data is there. Offset k x chunk lands at the peer's offset
k x chunk. Completions are counted as they come back, with the acknowledged bytes over time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hosts.api import CQ, MR, QP, Completion, SendWR, WcStatus, WrOpcode
from hosts.bulk.completions import WAIT_SLICE_S
from hosts.bulk.endpoint import PeerInfo

DONE_IMM = 0xD0E  # the immediate of a transfer's last WriteImm, unless it is numbered


@dataclass(frozen=True)
class Immediates:
    """Which WRs of a transfer are WriteImms and what they carry: the last one only, or
    ``every`` one; WR i carries i + 1, the last ``last`` when that is given."""

    every: bool = False
    last: int | None = None

    def of(self, index: int, count: int) -> int | None:
        """The immediate of WR ``index`` of ``count`` (None: a plain Write)."""
        if index == count - 1:
            return index + 1 if self.last is None else self.last
        return index + 1 if self.every else None

    def expected(self, count: int) -> list[int]:
        """The immediates a sink receives, in order, from a transfer of ``count`` WRs."""
        return [v for i in range(count) if (v := self.of(i, count)) is not None]


def wr_count(size: int, chunk: int) -> int:
    """How many WRs write ``size`` bytes in ``chunk``-byte pieces."""
    if size <= 0 or chunk <= 0:
        raise ValueError(f"a transfer needs a positive size and chunk, got {size} and {chunk}")
    return -(-size // chunk)


@dataclass
class WriteOutcome:
    """What a transfer did: completions in arrival order, errors, acknowledged bytes and
    ``progress`` = (clock time, bytes acknowledged) from the first post to every success."""

    wrs: int
    completions: list[Completion] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    acked_bytes: int = 0
    progress: list[tuple[float, int]] = field(default_factory=list)
    seconds: float = 0.0  # first post -> last completion (or giving up)
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return len(self.completions) == self.wrs and not self.errors

    def record(self, wc: Completion, size: int, chunk: int, now: float,
               first_wr_id: int = 0) -> None:
        """Count one completion of the transfer at ``now`` (an error, or acknowledged bytes
        and a progress stamp)."""
        self.completions.append(wc)
        if wc.status != WcStatus.SUCCESS:
            self.errors.append(f"wr {wc.wr_id}: {wc.status.value}")
        else:
            k = wc.wr_id - first_wr_id
            self.acked_bytes += min(chunk, size - k * chunk)
            self.progress.append((now, self.acked_bytes))


def work_request(index: int, count: int, size: int, chunk: int, imm: Immediates,
                 local_addr: int, lkey: int, peer: PeerInfo, first_wr_id: int = 0) -> SendWR:
    """WR ``index`` of ``count`` of a transfer of ``size`` bytes from the buffer at
    ``local_addr`` into ``peer``'s: offset index x chunk at the same offset on both sides."""
    off = index * chunk
    value = imm.of(index, count)
    return SendWR(
        wr_id=first_wr_id + index,
        opcode=WrOpcode.WRITE if value is None else WrOpcode.WRITE_WITH_IMM,
        local_addr=local_addr + off, length=min(chunk, size - off), lkey=lkey,
        remote_addr=peer.addr + off, rkey=peer.rkey, imm=value or 0)


def write_buffer(qp: QP, cq: CQ, mr: MR, peer: PeerInfo, size: int, *, chunk: int,
                 depth: int, imm: Immediates, clock: Callable[[], float], timeout: float,
                 first_wr_id: int = 0) -> WriteOutcome:
    """Write the first ``size`` bytes of ``mr`` into ``peer``'s buffer (WR k has wr_id
    ``first_wr_id + k``); stop at the first failed completion or after ``timeout`` seconds
    of ``clock``. ``cq`` must be the QP's send CQ and carry nothing else meanwhile."""
    count = wr_count(size, chunk)
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    start = clock()
    out = WriteOutcome(count, progress=[(start, 0)])
    deadline = start + timeout
    posted = 0
    while len(out.completions) < count and not out.errors:
        while posted < count and posted - len(out.completions) < depth:
            qp.post_send(work_request(posted, count, size, chunk, imm, mr.addr, mr.lkey, peer,
                                      first_wr_id))
            posted += 1
        left = deadline - clock()
        if left <= 0:
            out.timed_out = True
            out.errors.append(f"timed out after {timeout:g} s with {len(out.completions)}/"
                              f"{count} WRs done")
            break
        for wc in cq.wait(1, min(WAIT_SLICE_S, left)) + cq.poll(depth):
            out.record(wc, size, chunk, clock(), first_wr_id)
    out.seconds = clock() - start
    return out


__all__ = ["DONE_IMM", "Immediates", "WriteOutcome", "work_request", "wr_count",
           "write_buffer"]
