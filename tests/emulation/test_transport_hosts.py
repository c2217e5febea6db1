"""Host to host over a veth (no switch): agents as processes and in this process (library use).

The data is checked byte for byte: the sink hashes its whole buffer, the test hashes the
writer's pattern independently.
"""

from __future__ import annotations

import hashlib
import random
import threading
from pathlib import Path

import pytest

from common.netns import NetKit, wait_until
from hosts.agent.agent import Agent
from hosts.agent.config import parse_config
from hosts.agent.qlog import read_qlog
from hosts.api import (
    EXP_CNT_INFINITE,
    Access,
    QpAttr,
    QpInitAttr,
    QpState,
    QpType,
    RecvWR,
    RemoteQp,
    RetryAttr,
    SendWR,
    WcOpcode,
    WcStatus,
    WrOpcode,
    connect_qp,
    init_qp,
    open_device,
)
from hosts.apps import DONE_IMM, pattern
from testbed.host_lab import direct_pair, run_transfer

pytestmark = pytest.mark.emulation

MiB = 1 << 20


@pytest.mark.parametrize("qp_type", ["MRC", "RC"])
def test_64mib_write_host_to_host_is_byte_exact(run_prefix: str, tmp_path: Path,
                                               qp_type: str) -> None:
    size = 64 * MiB
    with NetKit(run_prefix) as kit:
        h1, h2 = direct_pair(kit)
        res = run_transfer(kit, h1, h2, tmp_path, size, qp_type=qp_type, seed=7, timeout=90)
    assert res.writer.get("errors") == [], res.writer
    assert res.writer["bytes"] == size
    assert res.sink["imm"] == DONE_IMM
    assert res.sink["sha256"] == hashlib.sha256(pattern(size, 7)).hexdigest()
    # qlog: the agents sampled their counters; the sink saw at least size bytes on its port.
    assert res.qlog_dir is not None
    _, events = read_qlog(res.qlog_dir / "h2-agent.sqlog")
    samples = [e["data"] for e in events if e["name"] == "mrc:metrics_sampled"]
    assert samples and samples[-1]["ports"][0]["rx_bytes"] >= size


def _library_agents(kit: NetKit, tmp: Path) -> tuple[Agent, Agent]:
    h1, h2 = direct_pair(kit)
    agents = []
    for h in (h1, h2):
        cfg = parse_config(h.config(netns=h.netns, qlog_dir=str(tmp / "qlog"),
                                    metrics_interval=0.2))
        agents.append(Agent(cfg))
    for a in agents:
        a.start()
    return agents[0], agents[1]


def test_library_use_write_imm_survives_link_flap(run_prefix: str, tmp_path: Path) -> None:
    """Both agents run in this process (sockets opened inside the host namespaces). The veth
    goes down for a while in the middle of the transfer; the transfer still completes exactly,
    and both agents saw the port go down and come back (port status to the core + qlog)."""
    size = 16 * MiB
    with NetKit(run_prefix) as kit:
        a, b = _library_agents(kit, tmp_path)
        try:
            ca, cb = open_device(a), open_device(b)
            cq_a, cq_b = ca.create_cq(1024), cb.create_cq(16)
            qa = ca.create_qp(QpInitAttr(send_cq=cq_a, recv_cq=cq_a, qp_type=QpType.MRC))
            qb = cb.create_qp(QpInitAttr(send_cq=cq_b, recv_cq=cq_b, qp_type=QpType.MRC))
            src = bytearray(random.Random(3).randbytes(size))
            dst = bytearray(size)
            mr_a = ca.reg_mr(src, Access.LOCAL_WRITE)
            mr_b = cb.reg_mr(dst, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
            init_qp(qb)
            qb.post_recv(RecvWR(wr_id=42))
            # Retry budget: 7 linear then unbounded exponential retries, so the outage (which
            # lasts as long as the agents need to notice it) cannot exhaust it.
            attr = QpAttr(retry=RetryAttr(linear_cnt=7, exp_cnt=EXP_CNT_INFINITE))
            connect_qp(qa, RemoteQp(qb.qpn, (cb.query_port(0).gid,)), attr)
            connect_qp(qb, RemoteQp(qa.qpn, (ca.query_port(0).gid,)), attr)
            assert qa.query().qp_state == QpState.RTS
            chunk = MiB
            wrs = [SendWR(i, WrOpcode.WRITE_WITH_IMM if i == size // chunk - 1 else WrOpcode.WRITE,
                          mr_a.addr + i * chunk, chunk, mr_a.lkey, mr_b.addr + i * chunk,
                          mr_b.rkey, imm=0x1234) for i in range(size // chunk)]
            qa.post_send(wrs[:4])
            done: list[int] = []
            flapped = threading.Event()

            def flap() -> None:
                # Once some data has moved, take the link down until both agents noticed.
                wait_until(lambda: len(done) >= 2, 30, "first completions")
                kit.set_link(a.config.ports[0].ifname, False, netns=a.config.netns)
                wait_until(lambda: not a.port_up[0] and not b.port_up[0], 10,
                           "both agents to see the link down")
                kit.set_link(a.config.ports[0].ifname, True, netns=a.config.netns)
                flapped.set()

            t = threading.Thread(target=flap, daemon=True)
            t.start()
            posted = 4
            while len(done) < len(wrs):
                got = cq_a.wait(1, 60)
                assert got, f"no completion after {len(done)} of {len(wrs)}"
                for wc in got + cq_a.poll(16):
                    assert wc.status == WcStatus.SUCCESS, wc
                    done.append(wc.wr_id)
                while posted < len(wrs) and posted - len(done) < 4:
                    qa.post_send(wrs[posted])
                    posted += 1
            t.join(30)
            assert flapped.is_set()
            assert done == list(range(len(wrs)))  # send completions in posting order
            wcs = cq_b.wait(1, 30)
            assert [(w.wr_id, w.opcode, w.imm) for w in wcs] == [
                (42, WcOpcode.RECV_RDMA_WITH_IMM, 0x1234)]
            assert dst == src
        finally:
            a.stop()
            b.stop()
    assert a.loop_error is None and b.loop_error is None
    _, events = read_qlog(tmp_path / "qlog" / "h1-agent.sqlog")
    states = [e["data"]["up"] for e in events if e["name"] == "mrc:port_status"]
    assert states == [False, True]


def test_agent_process_without_apps_runs_until_sigterm(run_prefix: str, tmp_path: Path) -> None:
    from testbed.host_lab import spawn_agent

    with NetKit(run_prefix) as kit:
        h1, _h2 = direct_pair(kit)
        proc = spawn_agent(kit, h1, tmp_path, h1.config(qlog_dir=str(tmp_path / "q")))
        assert proc.alive()
        proc.stop(timeout=10)  # SIGTERM to the process group
        assert proc.popen.returncode == 0
    _, events = read_qlog(tmp_path / "q" / "h1-agent.sqlog")
    assert events[-1]["name"] == "mrc:metrics_sampled"  # the final sample on a clean stop


@pytest.mark.parametrize("ev_mode", ["structured", "srv6"])
def test_path_modes_host_to_host(run_prefix: str, tmp_path: Path, ev_mode: str) -> None:
    """The EV travels in the flow label (structured) or an SRv6 uSID container is the outer
    destination (srv6); the receiving agent reads the inner header either way."""
    from testbed.host_lab import host_gid

    size = 4 * MiB
    tmpl = {"block": "0xfc000000", "slots": [{"base": 0x100, "ev_shift": 0, "ev_width": 4}]}
    extra: dict[str, object] = {"ev_mode": ev_mode}
    if ev_mode == "srv6":
        extra["srv6_templates"] = {host_gid(1, 0): tmpl, host_gid(2, 0): tmpl}
    with NetKit(run_prefix) as kit:
        h1, h2 = direct_pair(kit)
        res = run_transfer(kit, h1, h2, tmp_path, size, seed=3, timeout=60, agent_extra=extra)
    assert res.writer.get("errors") == [], res.writer
    assert res.sink["sha256"] == hashlib.sha256(pattern(size, 3)).hexdigest()
    assert res.qlog_dir is not None
    for host in ("h1", "h2"):
        _, events = read_qlog(res.qlog_dir / f"{host}-agent.sqlog")
        last = [e["data"] for e in events if e["name"] == "mrc:metrics_sampled"][-1]
        assert last["rx_drops"] == {"malformed": 0, "not_for_us": 0, "not_mrc": 0}
