"""The Mininet node of any switch kind: readiness, port mapping, failure message,
idempotent clean stop."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

pytestmark = pytest.mark.emulation

mininet_net = pytest.importorskip("mininet.net")


def _interfaces() -> set[str]:
    return {name for _, name in socket.if_nameindex()}


def _net(prefix: str, **target_params: object) -> tuple[object, object]:
    from mininet.node import Host

    from switch.targets import EmbeddedSwitch
    from switch.targets.mininet_node import P4Switch

    name = f"{prefix}s1"
    target = EmbeddedSwitch(name, 7, {1: f"{name}-eth1", 2: f"{name}-eth2"},
                            **target_params)  # type: ignore[arg-type]
    net = mininet_net.Mininet(topo=None, build=False, controller=None)
    h1 = net.addHost(f"{prefix}h1", cls=Host)
    h2 = net.addHost(f"{prefix}h2", cls=Host)
    node = net.addSwitch(name, cls=P4Switch, target=target, dpid="7")
    net.addLink(h1, node)
    net.addLink(h2, node)
    return net, target


def test_embedded_switch_node_starts_serves_and_stops_cleanly(run_prefix: str) -> None:
    from common.netns import tcp_listening
    from switch.stats import fetch

    net, sw = _net(run_prefix, links={1: "rate=1e8,delay=1e-4"})
    try:
        net.build()
        net.start()
        assert sw.alive() and sw.connected()
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
    assert proc is not None and not proc.alive()  # stopped by pid
    assert not log_dir.exists()  # the temporary log directory is gone
    assert not {n for n in _interfaces() if n.startswith(run_prefix)}
    sw.stop()  # idempotent


def test_start_failure_names_the_log_and_leaves_nothing(run_prefix: str, tmp_path: Path) -> None:
    from switch.targets import SwitchStartError

    net, sw = _net(run_prefix, log_dir=tmp_path, extra_args=("--queues", "99"))
    try:
        net.build()
        with pytest.raises(SwitchStartError, match=str(tmp_path / f"{sw.name}.out")):
            net.start()
        assert sw.proc is None
        assert "--queues must be" in (tmp_path / f"{sw.name}.out").read_text()
    finally:
        net.stop()
    assert not {n for n in _interfaces() if n.startswith(run_prefix)}


def test_bmv2_node_reports_missing_binary(
    run_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switch.targets import Bmv2Switch, SwitchStartError

    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without simple_switch_grpc
    monkeypatch.delenv("P4_BIN_DIR", raising=False)
    assert not Bmv2Switch.available()
    assert "simple_switch_grpc is not on PATH" in Bmv2Switch.unavailable_reason()
    target = Bmv2Switch(f"{run_prefix}b1", 1, {1: f"{run_prefix}b1-eth1"}, log_dir=tmp_path)
    with pytest.raises(SwitchStartError, match="simple_switch_grpc is not on PATH"):
        target.start()
    assert not target.alive()
