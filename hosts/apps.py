"""Applications the agent can start (``"apps"`` in its config): a bulk Write source and sink.

Both use only the public API (hosts.api). Connection setup is out of band, as in MRC: each
side writes ``OOB_DIR/NAME.json`` ({qpn, gids, addr, rkey, length}) atomically and waits for
its peer's file; once connected, the sink writes ``NAME-ready.json`` and the writer waits
for it before posting (data reaching a QP that is not yet RTR would be dropped). When the
writer is finished it writes ``NAME-done.json``; the sink, which has its data as soon as the
WriteImm completes, waits for that file before it returns (its agent exits with its apps,
and a lost final acknowledgement is only answered by a QP that still exists). The writer
moves ``size`` bytes generated from ``seed`` in WRs of ``chunk``
bytes with up to ``depth`` outstanding; the last WR is a WriteImm, whose receive completion
tells the sink the data is complete. Each side writes a JSON result file:

- writer: {"bytes", "seconds" (first post -> last completion), "goodput_bps", "errors",
  "cpu_seconds"}
- sink: {"bytes", "sha256" of the whole buffer, "seconds", "imm", "cpu_seconds"}

``cpu_seconds`` is the CPU time of the whole agent process (loop and app threads) over the
transfer: with the packet count it gives the per-packet cost independent of machine load.
``seconds``, ``goodput_bps`` and ``timeout`` are in seconds of the agent's clock (virtual
seconds under time dilation); the out-of-band file waits are wall-clock guards.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from pathlib import Path
from typing import Any

from hosts.api import (
    CQ,
    MR,
    QP,
    Access,
    Context,
    QpAttr,
    QpInitAttr,
    QpType,
    RecvWR,
    RemoteQp,
    RetryAttr,
    SendWR,
    WcStatus,
    WrOpcode,
    connect_qp,
    init_qp,
)

DONE_IMM = 0xD0E
PATTERN_CHUNK = 16 << 20


def pattern(size: int, seed: int) -> bytearray:
    """The writer's data: reproducible, so a test can check the sink's hash independently.

    Drawn in chunks: ``randbytes`` of 256 MiB or more overflows a C int inside ``random``."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += rng.randbytes(min(PATTERN_CHUNK, size - len(out)))
    return out


def _publish(oob: Path, name: str, info: dict[str, Any]) -> None:
    oob.mkdir(parents=True, exist_ok=True)
    tmp = oob / f".{name}.json.tmp"
    tmp.write_text(json.dumps(info))
    os.replace(tmp, oob / f"{name}.json")


def _await_peer(oob: Path, peer: str, timeout: float) -> dict[str, Any]:
    path = oob / f"{peer}.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            info: dict[str, Any] = json.loads(path.read_text())
            return info
        time.sleep(0.01)
    raise TimeoutError(f"peer {peer!r} did not publish {path} within {timeout} s")


def publish_done(oob: Path, name: str) -> None:
    """Writer ``name`` is finished (every Write completed, or it gave up): its sink may go."""
    _publish(oob, f"{name}-done", {})


def await_done(oob: Path, writer_name: str, timeout: float) -> bool:
    """Wait (wall clock, at most ``timeout``) for the writer's ``publish_done``. A sink that
    has its data keeps its QP until then: the writer is still waiting for the
    acknowledgement of its last Writes, and if that was lost it retransmits, which only a
    QP that still exists answers. False when the writer never said it was done."""
    path = oob / f"{writer_name}-done.json"
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _qp_attr(args: dict[str, Any]) -> QpAttr:
    return QpAttr(
        mpr=int(args.get("mpr", 8)), mpr_dest=int(args.get("mpr", 8)),
        timeout=int(args.get("ack_timeout", 17)),
        path_mtu=int(args.get("mtu", 4096)),
        retry=RetryAttr(linear_cnt=int(args.get("linear_cnt", 7)),
                        exp_cnt=int(args.get("exp_cnt", 25))),
    )


def _setup(ctx: Context, args: dict[str, Any], buf: bytearray) -> tuple[QP, CQ, MR, Path]:
    qp_type = QpType(str(args.get("qp_type", "MRC")))
    cq = ctx.create_cq(int(args.get("cqe", 65536)))
    qp = ctx.create_qp(QpInitAttr(send_cq=cq, recv_cq=cq, qp_type=qp_type))
    mr = ctx.reg_mr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    init_qp(qp, _qp_attr(args))
    if args.get("post_recv"):
        qp.post_recv(RecvWR(wr_id=1))  # before the peer can know us: no WriteImm without it
    gids = [ctx.query_port(i).gid.hex() for i in range(ctx.query_device().phys_port_cnt)]
    oob = Path(str(args["oob_dir"]))
    _publish(oob, str(args["name"]),
             {"qpn": qp.qpn, "gids": gids, "addr": mr.addr, "rkey": mr.rkey,
              "length": mr.length})
    return qp, cq, mr, oob


def _write_result(args: dict[str, Any], result: dict[str, Any]) -> None:
    path = Path(str(args["result"]))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)


def sink(ctx: Context, args: dict[str, Any]) -> int:
    """Receive ``size`` bytes; done when the writer's WriteImm completes a posted receive."""
    size = int(args["size"])
    timeout = float(args.get("timeout", 120))
    buf = bytearray(size)
    qp, cq, _mr, oob = _setup(ctx, {**args, "post_recv": True}, buf)
    peer = _await_peer(oob, str(args["peer"]), timeout)
    connect_qp(qp, RemoteQp(int(peer["qpn"]), tuple(bytes.fromhex(g) for g in peer["gids"])),
               _qp_attr(args))
    _publish(oob, f"{args['name']}-ready", {"qpn": qp.qpn})  # the writer may start now
    clock = ctx.agent.clock  # the run's clock: seconds below are virtual under dilation
    start = clock()
    cpu0 = time.process_time()
    wcs = cq.wait(1, timeout)
    elapsed = clock() - start
    cpu = time.process_time() - cpu0
    if not wcs or wcs[0].status != WcStatus.SUCCESS:
        _write_result(args, {"error": f"no WriteImm completion: {wcs!r}"})
        return 1
    _write_result(args, {"bytes": size, "sha256": hashlib.sha256(buf).hexdigest(),
                         "seconds": elapsed, "imm": wcs[0].imm, "cpu_seconds": cpu})
    # the agent exits when its apps return: stay until the writer has its acknowledgements
    await_done(oob, str(args["peer"]), timeout)
    return 0


def writer(ctx: Context, args: dict[str, Any]) -> int:
    """Write ``size`` bytes of pattern(size, seed) to the peer's buffer, ``depth`` WRs deep."""
    size = int(args["size"])
    chunk = int(args.get("chunk", 1 << 20))
    depth = int(args.get("depth", 8))
    timeout = float(args.get("timeout", 120))
    data = pattern(size, int(args.get("seed", 1)))
    qp, cq, mr, oob = _setup(ctx, args, data)
    peer = _await_peer(oob, str(args["peer"]), timeout)
    if int(peer["length"]) < size:
        _write_result(args, {"error": f"peer buffer {peer['length']} < {size}"})
        return 1
    connect_qp(qp, RemoteQp(int(peer["qpn"]), tuple(bytes.fromhex(g) for g in peer["gids"])),
               _qp_attr(args))
    # Data sent before the sink's QP is in RTR would be dropped (and cost a timeout).
    _await_peer(oob, f"{args['peer']}-ready", timeout)
    offsets = list(range(0, size, chunk))
    posted = done = 0
    errors: list[str] = []
    clock = ctx.agent.clock  # the run's clock: seconds below are virtual under dilation
    start = clock()
    cpu0 = time.process_time()
    deadline = start + timeout
    while done < len(offsets) and clock() < deadline:
        while posted < len(offsets) and posted - done < depth:
            off = offsets[posted]
            length = min(chunk, size - off)
            last = posted == len(offsets) - 1
            qp.post_send(SendWR(
                wr_id=posted, opcode=WrOpcode.WRITE_WITH_IMM if last else WrOpcode.WRITE,
                local_addr=mr.addr + off, length=length, lkey=mr.lkey,
                remote_addr=int(peer["addr"]) + off, rkey=int(peer["rkey"]),
                imm=DONE_IMM if last else 0))
            posted += 1
        wcs = cq.wait(1, max(0.0, deadline - clock())) + cq.poll(depth)
        for wc in wcs:
            done += 1
            if wc.status != WcStatus.SUCCESS:
                errors.append(f"wr {wc.wr_id}: {wc.status.value}")
        if errors:
            break
    elapsed = clock() - start
    cpu = time.process_time() - cpu0
    ok = done == len(offsets) and not errors
    publish_done(oob, str(args["name"]))
    _write_result(args, {"bytes": size if ok else 0, "seconds": elapsed,
                         "goodput_bps": size * 8 / elapsed if ok and elapsed > 0 else 0.0,
                         "errors": errors, "completed_wrs": done, "cpu_seconds": cpu})
    return 0 if ok else 1
