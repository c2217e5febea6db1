"""Applications the agent can start (``"apps"`` in its config): a bulk Write source and sink.

Both are the bulk transfer of hosts/bulk over the public API (hosts.api): each side makes
an ``Endpoint`` and connects by files in ``OOB_DIR`` (``NAME.json``, then the sink's
``NAME-ready.json``: hosts/bulk/endpoint.py). The writer moves ``size`` bytes of
``pattern(size, seed)`` in WRs of ``chunk`` bytes with up to ``depth`` outstanding, the last
a WriteImm carrying ``DONE_IMM``, whose receive completion tells the sink the data is
complete. When the writer is finished it writes ``NAME-done.json``; the sink, which has its
data as soon as the WriteImm completes, waits for that file before it returns (its agent
exits with its apps, and a lost final acknowledgement is only answered by a QP that still
exists). Both release their QP, CQ and memory region before they return. Each side writes a
JSON result file:

- writer: {"bytes", "seconds" (first post -> last completion), "goodput_bps", "errors",
  "completed_wrs", "cpu_seconds"}
- sink: {"bytes", "sha256" of the whole buffer, "seconds", "imm", "errors", "cpu_seconds"}

``bytes`` is 0 and ``errors`` says why when a side failed. ``cpu_seconds`` is the CPU time of
the whole agent process (loop and app threads) over the transfer: with the packet count it
gives the per-packet cost independent of machine load. ``seconds``, ``goodput_bps`` and
``timeout`` are in seconds of the agent's clock (virtual seconds under time dilation); the
out-of-band file waits are wall-clock guards.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hosts.api import Access, Context, QpAttr, QpType, RetryAttr
from hosts.bulk import (
    DONE_IMM,
    Endpoint,
    Immediates,
    await_done,
    await_writeimms,
    connect_by_files,
    digest,
    pattern,
    publish_done,
    write_buffer,
    write_json,
)

IMMEDIATES = Immediates(last=DONE_IMM)


def _qp_attr(args: dict[str, Any]) -> QpAttr:
    return QpAttr(
        mpr=int(args.get("mpr", 8)), mpr_dest=int(args.get("mpr", 8)),
        timeout=int(args.get("ack_timeout", 17)),
        path_mtu=int(args.get("mtu", 4096)),
        retry=RetryAttr(linear_cnt=int(args.get("linear_cnt", 7)),
                        exp_cnt=int(args.get("exp_cnt", 25))),
    )


def _endpoint(ctx: Context, args: dict[str, Any], buf: bytearray, receives: int) -> Endpoint:
    return Endpoint(ctx, buf, qp_type=QpType(str(args.get("qp_type", "MRC"))),
                    attr=_qp_attr(args), cqe=int(args.get("cqe", 65536)),
                    access=Access.LOCAL_WRITE | Access.REMOTE_WRITE, receives=receives)


@dataclass(frozen=True)
class _Role:
    """What both apps read from their arguments."""

    size: int
    timeout: float
    oob: Path
    name: str
    peer: str
    result: Path

    @staticmethod
    def of(args: dict[str, Any]) -> _Role:
        return _Role(int(args["size"]), float(args.get("timeout", 120)),
                     Path(str(args["oob_dir"])), str(args["name"]), str(args["peer"]),
                     Path(str(args["result"])))


def sink(ctx: Context, args: dict[str, Any]) -> int:
    """Receive ``size`` bytes; done when the writer's WriteImm completes a posted receive."""
    me = _Role.of(args)
    size, timeout = me.size, me.timeout
    buf = bytearray(size)
    ep = _endpoint(ctx, args, buf, receives=1)
    try:
        connect_by_files(ep, me.oob, me.name, me.peer, sink=True, attr=_qp_attr(args),
                         timeout=timeout)
        clock = ctx.agent.clock  # the run's clock: seconds below are virtual under dilation
        cpu0 = time.process_time()
        got = await_writeimms(ep.cq, IMMEDIATES.expected(1), clock=clock, timeout=timeout)
        cpu = time.process_time() - cpu0
        write_json(me.result, {"bytes": size if got.ok else 0,
                            "sha256": digest(buf) if got.ok else "", "seconds": got.seconds,
                            "imm": got.completions[0].imm if got.completions else None,
                            "errors": got.errors, "cpu_seconds": cpu})
        # the agent exits when its apps return: stay until the writer has its acknowledgements
        await_done(me.oob, me.peer, timeout)
    finally:
        ep.release()
    return 0 if got.ok else 1


def writer(ctx: Context, args: dict[str, Any]) -> int:
    """Write ``size`` bytes of pattern(size, seed) to the peer's buffer, ``depth`` WRs deep."""
    me = _Role.of(args)
    size, timeout = me.size, me.timeout
    data = pattern(size, int(args.get("seed", 1)))
    ep = _endpoint(ctx, args, data, receives=0)
    try:
        try:
            info = connect_by_files(ep, me.oob, me.name, me.peer, sink=False,
                                    attr=_qp_attr(args), timeout=timeout, need=size)
        except ValueError as exc:
            write_json(me.result, {"bytes": 0, "errors": [str(exc)]})
            return 1
        cpu0 = time.process_time()
        out = write_buffer(ep.qp, ep.cq, ep.mr, info, size, chunk=int(args.get("chunk", 1 << 20)),
                           depth=int(args.get("depth", 8)), imm=IMMEDIATES,
                           clock=ctx.agent.clock, timeout=timeout)
        cpu = time.process_time() - cpu0
    finally:
        publish_done(me.oob, me.name)
        ep.release()
    write_json(me.result, {"bytes": size if out.ok else 0, "seconds": out.seconds,
                        "goodput_bps": size * 8 / out.seconds if out.ok and out.seconds > 0
                        else 0.0,
                        "errors": out.errors, "completed_wrs": len(out.completions),
                        "cpu_seconds": cpu})
    return 0 if out.ok else 1


__all__ = ["DONE_IMM", "pattern", "sink", "writer"]
