"""One side of a bulk transfer: a QP with its CQ and registered buffer, what it tells its
peer (``PeerInfo``), and the file handshake that connects a writer and its sink.

The handshake (``connect_by_files``): each side publishes its ``PeerInfo`` as ``NAME`` and
waits for its peer's; the sink, once connected, publishes ``NAME-ready`` and the writer waits
for it before it posts, since data reaching a QP that is not yet RTR would be dropped (and
cost a retransmission timeout). Receives for WriteImm are posted when the endpoint is made,
before the peer can know it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hosts.api import (
    CQ,
    MR,
    QP,
    Access,
    Context,
    QpAttr,
    QpHint,
    QpInitAttr,
    QpType,
    RecvWR,
    RemoteQp,
    connect_qp,
    init_qp,
)
from hosts.bulk.oob import await_published, publish


@dataclass(frozen=True)
class PeerInfo:
    """What a side tells its peer out of band: its QP, its GID per plane, its buffer."""

    qpn: int
    gids: tuple[bytes, ...]
    addr: int
    rkey: int
    length: int

    @property
    def remote_qp(self) -> RemoteQp:
        return RemoteQp(self.qpn, self.gids)

    def to_json(self) -> dict[str, Any]:
        return {"qpn": self.qpn, "gids": [g.hex() for g in self.gids], "addr": self.addr,
                "rkey": self.rkey, "length": self.length}

    @staticmethod
    def from_json(data: dict[str, Any]) -> PeerInfo:
        try:
            return PeerInfo(int(data["qpn"]), tuple(bytes.fromhex(g) for g in data["gids"]),
                            int(data["addr"]), int(data["rkey"]), int(data["length"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a peer record needs qpn, gids (hex), addr, rkey and length: "
                             f"{exc!r}") from None


class Endpoint:
    """A QP of ``qp_type`` with its own CQ, ``buf`` registered, brought to INIT with
    ``receives`` WriteImm receives posted (wr_id 1, 2, ...). ``release`` frees all of it."""

    def __init__(self, ctx: Context, buf: bytearray | memoryview, *,
                 qp_type: QpType = QpType.MRC, attr: QpAttr | None = None, cqe: int = 4096,
                 access: int = Access.LOCAL_WRITE | Access.REMOTE_WRITE,
                 hint: QpHint | None = None, receives: int = 0) -> None:
        self.ctx = ctx
        self.buf = buf
        self.cq: CQ = ctx.create_cq(cqe)
        try:
            self.qp: QP = ctx.create_qp(QpInitAttr(send_cq=self.cq, recv_cq=self.cq,
                                                   qp_type=qp_type))
        except BaseException:
            self.cq.destroy()
            raise
        try:
            self.mr: MR = ctx.reg_mr(buf, access)
        except BaseException:
            self.qp.destroy()
            self.cq.destroy()
            raise
        self.released = False
        try:
            init_qp(self.qp, attr, hint)
            if receives:
                self.qp.post_recv([RecvWR(wr_id=i + 1) for i in range(receives)])
        except BaseException:
            self.release()
            raise

    def info(self) -> PeerInfo:
        ctx = self.ctx
        gids = tuple(ctx.query_port(i).gid for i in range(ctx.query_device().phys_port_cnt))
        return PeerInfo(self.qp.qpn, gids, self.mr.addr, self.mr.rkey, self.mr.length)

    def connect(self, peer: PeerInfo, attr: QpAttr | None = None) -> None:
        """(INIT ->) RTR -> RTS towards ``peer``."""
        connect_qp(self.qp, peer.remote_qp, attr)

    def release(self) -> None:
        """Destroy the QP and the CQ, deregister the buffer (once)."""
        if self.released:
            return
        self.released = True
        self.qp.destroy()
        self.cq.destroy()
        self.mr.dereg()


def connect_by_files(ep: Endpoint, folder: Path, name: str, peer: str, *, sink: bool,
                     attr: QpAttr | None, timeout: float, need: int = 0) -> PeerInfo:
    """Publish ``ep`` as ``name``, connect it to ``peer``'s published endpoint, then the
    ready handshake: a sink says it is connected, a writer waits until its sink is.
    ``ValueError`` (before connecting) when the peer's buffer is shorter than ``need``."""
    publish(folder, name, ep.info().to_json())
    info = PeerInfo.from_json(await_published(folder, peer, timeout))
    if info.length < need:
        raise ValueError(f"peer {peer!r} has a buffer of {info.length} bytes, {need} are to "
                         f"be written")
    ep.connect(info, attr)
    if sink:
        publish(folder, f"{name}-ready", {"qpn": ep.qp.qpn})
    else:
        await_published(folder, f"{peer}-ready", timeout)
    return info


__all__ = ["Endpoint", "PeerInfo", "connect_by_files"]
