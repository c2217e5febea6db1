"""The controller's endpoint operations and port commands acting on real hosts: a controller
process, hosts on one embedded switch with two planes, their agents in this process
registered with it (testbed/mechanism_lab.py). The switch's per-port counters show which
plane each host really uses."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from common.netns import NetKit, wait_until
from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from hosts.transport.lognames import PORT_ADMIN
from testbed.mechanism_lab import StarLab, Transfer, start_controller

pytestmark = pytest.mark.emulation

MiB = 1 << 20
SIZE = 48 * MiB


@pytest.fixture
def lab(run_prefix: str, tmp_path: Path) -> Iterator[tuple[StarLab, pb_grpc.MrcCtlStub]]:
    with NetKit(run_prefix) as kit:
        target = start_controller(kit, tmp_path, ports=2)
        # 50 Mb/s towards each host port: the transfers last long enough to watch the planes
        links = {port: "rate=50e6,qpkts=1024" for port in range(1, 5)}
        with StarLab(kit, tmp_path, planes=2, controller=target, links=links,
                     agent={"cc_window": 128 << 10}) as star, \
                grpc.insecure_channel(target) as channel:
            yield star, pb_grpc.MrcCtlStub(channel)


def _rx(lab: StarLab, host: str, plane: int) -> int:
    return lab.switch.port_stats()[lab.switch.ports[(host, plane)]]["rx_packets"]


def _start(t: Transfer) -> None:
    for i in range(SIZE // MiB):
        t.post(i, i * MiB, MiB, imm=1 if i == SIZE // MiB - 1 else None)


def _gid(lab: StarLab, host: int, plane: int) -> str:
    return str(ipaddress.IPv6Address(lab.host(host).spec.gids[plane]))


def _quiet_while_busy(lab: StarLab, host: str, quiet: int, busy: int, packets: int) -> int:
    """How many frames the switch got from ``host`` on plane ``quiet`` while ``packets``
    frames came in on plane ``busy``."""
    before_q, before_b = _rx(lab, host, quiet), _rx(lab, host, busy)
    wait_until(lambda: _rx(lab, host, busy) >= before_b + packets, 30,
               f"{packets} frames from {host} on plane {busy}")
    return _rx(lab, host, quiet) - before_q


def test_controller_port_status_update_makes_the_peer_avoid_the_plane(
        lab: tuple[StarLab, pb_grpc.MrcCtlStub]) -> None:
    """h2 writes to h1 over both planes. The controller has h1 announce (EpBatchSendWait, a
    Port Status Update from h1's plane-0 address with port_status 0b10: only port 2 usable):
    h2 stops sending on plane 0 at once, and takes it up again when a second update says
    both are usable. The transfer completes exactly, without a QP error."""
    star, ctl = lab
    wait_until(lambda: len(ctl.QueryDevice(pb.QueryDeviceRequest()).capabilities) > 0, 10, "ctl")
    t = star.connect(2, 1, SIZE)
    _start(t)
    wait_until(lambda: _rx(star, "h2", 0) > 500 and _rx(star, "h2", 1) > 500, 30,
               "h2 writing on both planes")

    def announce(mask: int) -> pb.EpBatchResponse:
        req = pb.EpBatchRequest(op_type=pb.EP_OP_PORT_STATUS_UPDATE, rsp_timeout_ns=5 * 10**9)
        req.requests.add(req_id=mask, sgid=_gid(star, 1, 0), dgid=_gid(star, 2, 0),
                         port_status=mask)
        return ctl.EpBatchSendWait(req, timeout=15)

    resp = announce(0b10)
    assert [r.req_id for r in resp.responses] == [0b10] and not resp.timed_out
    # the answer to the update itself leaves on the plane it came in on: at most its resends
    assert _quiet_while_busy(star, "h2", quiet=0, busy=1, packets=1000) <= 4
    resp = announce(0b11)
    assert not resp.timed_out
    wait_until(lambda: _quiet_while_busy(star, "h2", quiet=0, busy=1, packets=200) > 50, 30,
               "h2 back on plane 0")
    t.wait_sends(SIZE // MiB, timeout=120)
    assert t.exact()
    h1 = star.host(1).host_stats()
    assert h1["tx_psu"] == 2  # sent by h1's agent, as asked
    # endpoint requests are answered statelessly: an update h1 resent because its answer was
    # late (tx_ep_retry, only updates are retried) reaches h2 twice and is applied twice,
    # which is harmless as it carries the same mask
    rx_psu = star.host(2).host_stats()["rx_psu"]
    assert 2 <= rx_psu <= 2 + h1.get("tx_ep_retry", 0), (rx_psu, h1)
    assert star.host(2).qp_stats(t.qp.qpn)["peer_psu"] == rx_psu  # its one QP to h1


def test_modify_port_brings_a_nic_port_down_and_up(
        lab: tuple[StarLab, pb_grpc.MrcCtlStub]) -> None:
    """ModifyPort disables h1's port 1 (plane 0): h1's agent takes it out of use (no frame
    leaves it, the packets in flight on it are resent elsewhere), h2 is told by a Port
    Status Update, QueryPort shows DISABLED / DOWN; enabling it brings plane 0 back."""
    star, ctl = lab
    t = star.connect(1, 2, SIZE)
    _start(t)
    wait_until(lambda: _rx(star, "h1", 0) > 500 and _rx(star, "h1", 1) > 500, 30,
               "h1 writing on both planes")

    def port() -> pb.PortAttr:
        return ctl.QueryPort(pb.QueryPortRequest(host="h1", port=1), timeout=5)

    assert port().oper_state == pb.PORT_OPER_UP
    ctl.ModifyPort(pb.ModifyPortRequest(host="h1", port=1, admin_state=pb.PORT_ADMIN_DISABLED),
                   timeout=5)
    wait_until(lambda: port().oper_state == pb.PORT_OPER_DOWN, 10, "port 1 reported down")
    assert port().admin_state == pb.PORT_ADMIN_DISABLED
    assert _quiet_while_busy(star, "h1", quiet=0, busy=1, packets=1000) == 0
    wait_until(lambda: star.host(2).host_stats().get("rx_psu", 0) >= 1, 10, "h2 told")
    ctl.ModifyPort(pb.ModifyPortRequest(host="h1", port=1, admin_state=pb.PORT_ADMIN_ENABLED),
                   timeout=5)
    wait_until(lambda: port().oper_state == pb.PORT_OPER_UP, 10, "port 1 reported up")
    wait_until(lambda: _quiet_while_busy(star, "h1", quiet=0, busy=1, packets=200) > 50, 30,
               "h1 back on plane 0")
    t.wait_sends(SIZE // MiB, timeout=120)
    assert t.exact()
    st = star.host(1).qp_stats(t.qp.qpn)
    # in flight on plane 0 when it left: resent elsewhere (unless a SACK came first)
    assert 0 < st["rtx_plane_down"] <= st["loss_plane_down"]
    assert star.host(2).qp_stats(t.peer_qp.qpn)["peer_psu"] >= 2
    admin = [e["data"] for e in star.qlog(1) if e["name"] == PORT_ADMIN]
    assert admin == [{"port": 0, "enabled": False}, {"port": 0, "enabled": True}]
    # a port the host does not have: a clear error, nothing changed
    with pytest.raises(grpc.RpcError) as err:
        ctl.ModifyPort(pb.ModifyPortRequest(host="h1", port=3,
                                            admin_state=pb.PORT_ADMIN_DISABLED), timeout=5)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
