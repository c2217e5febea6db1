"""Mininet node classes: readiness, port mapping, failure message, idempotent clean stop."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

pytestmark = pytest.mark.emulation

mininet_net = pytest.importorskip("mininet.net")


def _interfaces() -> set[str]:
    return {name for _, name in socket.if_nameindex()}


def _net(prefix: str, **switch_params: object) -> tuple[object, object]:
    from mininet.node import Host

    from switch.mininet_nodes import EmbeddedP4Switch

    net = mininet_net.Mininet(topo=None, build=False, controller=None)
    h1 = net.addHost(f"{prefix}h1", cls=Host)
    h2 = net.addHost(f"{prefix}h2", cls=Host)
    sw = net.addSwitch(f"{prefix}s1", cls=EmbeddedP4Switch, dpid="7", **switch_params)
    net.addLink(h1, sw)
    net.addLink(h2, sw)
    return net, sw


def test_embedded_switch_node_starts_serves_and_stops_cleanly(run_prefix: str) -> None:
    from common.netns import tcp_listening
    from switch.stats import fetch

    net, sw = _net(run_prefix, links={1: "rate=1e8,delay=1e-4"})
    try:
        net.build()
        net.start()
        assert sw.proc is not None and sw.proc.poll() is None
        assert tcp_listening("127.0.0.1", sw.grpc_port)
        resp = fetch(sw.grpc_address)
        assert resp.name == sw.name and resp.device_id == 7
        got = {p.port: p.ifname for p in resp.ports}
        assert got == {1: f"{run_prefix}s1-eth1", 2: f"{run_prefix}s1-eth2"}
        rates = {p.port: p.egress_link.rate_bps for p in resp.ports}
        assert rates == {1: 1e8, 2: 0.0}
        assert all(p.carrier_up for p in resp.ports)
        log_dir = sw.log_dir
        assert log_dir is not None and "ready" in (log_dir / f"{sw.name}.log").read_text()
        proc = sw.proc
    finally:
        net.stop()
    assert proc.poll() is not None  # stopped by pid
    assert not log_dir.exists()  # the temporary log directory is gone
    assert not {n for n in _interfaces() if n.startswith(run_prefix)}
    sw.stop()  # idempotent


def test_start_failure_names_the_log_and_leaves_nothing(run_prefix: str, tmp_path: Path) -> None:
    from switch.mininet_nodes import SwitchStartError

    net, sw = _net(run_prefix, log_dir=str(tmp_path), extra_args=("--queues", "99"))
    try:
        net.build()
        with pytest.raises(SwitchStartError, match=str(tmp_path / f"{sw.name}.log")):
            net.start()
        assert sw.proc is None
        assert "--queues must be" in (tmp_path / f"{sw.name}.log").read_text()
    finally:
        net.stop()
    assert not {n for n in _interfaces() if n.startswith(run_prefix)}


def test_bmv2_node_reports_missing_binary(
    run_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switch.mininet_nodes import Bmv2Switch, SwitchStartError

    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without simple_switch_grpc
    assert not Bmv2Switch.available()
    with pytest.raises(SwitchStartError, match="simple_switch_grpc is not on PATH"):
        Bmv2Switch(f"{run_prefix}b1", dpid="1")
