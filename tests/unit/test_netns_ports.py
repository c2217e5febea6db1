"""Ports for servers (common/netns.py free_tcp_port): free, and away from the ports the
kernel hands to outgoing connections (no root needed)."""

from __future__ import annotations

import collections
import socket

import pytest

from common import netns
from common.netns import EPHEMERAL_RANGE, SERVER_PORTS, free_tcp_port


def test_a_server_port_is_free_and_outside_the_ephemeral_range() -> None:
    low, high = (int(x) for x in EPHEMERAL_RANGE.read_text().split())
    ports = {free_tcp_port() for _ in range(20)}
    for port in ports:
        assert not low <= port <= high, (port, low, high)
        assert SERVER_PORTS[0] <= port < SERVER_PORTS[1]
        with socket.socket() as s:  # free on every address: a server can bind it
            s.bind(("0.0.0.0", port))
            s.listen()


def test_a_port_in_use_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    def free(p: int) -> bool:
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", p))
            except OSError:
                return False
            return True

    port = next(p for p in range(SERVER_PORTS[0], SERVER_PORTS[1] - 1)
                if free(p) and free(p + 1))
    monkeypatch.setattr(netns, "SERVER_PORTS", (port, port + 2))  # two candidates
    monkeypatch.setattr(netns, "_handed_out", collections.deque(maxlen=8))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        assert free_tcp_port() == port + 1
        # both candidates are taken now (one busy, one handed out): another free port
        again = free_tcp_port()
        assert again not in (port, port + 1)


def test_ports_handed_out_are_never_handed_out_again_soon() -> None:
    """A fabric's switches draw their ports before any of them binds: no two may share one."""
    import threading

    got: list[int] = []

    def draw() -> None:
        got.extend(free_tcp_port() for _ in range(50))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 200 and len(set(got)) == 200
