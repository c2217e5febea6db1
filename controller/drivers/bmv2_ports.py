"""Port state of BMv2 switches, kept by the controller.

The embedded target turns a port change into its ``port_down`` register and a port-status
message on the P4Runtime stream by itself. BMv2 does neither: simple_switch_grpc sends no
port status over P4Runtime and its P4Runtime server (PI) writes no registers. For BMv2 the
controller does it:

- administrative state: ``set_admin(switch, port, up)``, called by the southbound for
  ``SetLinkState`` (``link A B down``, ``--fail``). The interface itself is left up: when one
  of its interfaces goes down, BMv2 1.15 (libpcap 1.10) stops receiving on *every* port until
  a frame arrives on the downed one.
- carrier: an rtnetlink subscription (``common.netlink``) on the switches' interfaces, which
  live in the controller's (root) namespace. ``port HOST N down`` takes the host's NIC down;
  the switch's end of the veth loses carrier and the watcher sees it.

A port is operationally up when it is administratively up and has carrier. On every change
of that state, ``MrcIngress.port_down[port]`` is written over Thrift (simple_switch_CLI
``register_write``; the data plane drops frames routed to the port as PORT_DOWN and the
Structured-EV fallback applies, as on the embedded target) and a ``PortEvent(port, up)`` is
queued on the switch's P4RuntimeClient ``port_events``, where controller.convergence reads
the embedded target's port-status messages.
"""

from __future__ import annotations

import errno
import logging
import queue
import select
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.bmv2_cli import run_cli
from common.netlink import IFF_RUNNING, IFF_UP, RTMGRP_LINK, parse_link_messages
from common.p4runtime_client import PortEvent

log = logging.getLogger("controller.bmv2_ports")

CliRunner = Callable[[int, Sequence[str]], object]
"""run_cli(thrift_port, commands): applies Thrift commands (tests pass a recorder)."""


@dataclass(frozen=True)
class Bmv2Ports:
    """One BMv2 switch as the port-state keeper sees it."""

    thrift_port: int
    ifnames: Mapping[int, str]  # P4 port -> interface (root namespace)
    events: queue.Queue[PortEvent]  # the switch's P4RuntimeClient.port_events


def has_carrier(ifname: str) -> bool:
    """Carrier and admin state of an interface now (sysfs operstate)."""
    try:
        return Path(f"/sys/class/net/{ifname}/operstate").read_text().strip() in ("up", "unknown")
    except OSError:
        return False


def port_down_command(port: int, down: bool) -> str:
    """The Thrift write of mrc_switch.p4's ``port_down`` cell (PI cannot write registers)."""
    return f"register_write MrcIngress.port_down {port} {int(down)}"


class Bmv2PortState:
    """Administrative and carrier state of every BMv2 port; writes and reports changes."""

    def __init__(self, switches: Mapping[str, Bmv2Ports], cli: CliRunner = run_cli) -> None:
        self.switches = dict(switches)
        self.cli = cli
        self.errors: list[str] = []
        self._admin: dict[tuple[str, int], bool] = {}
        self._carrier: dict[tuple[str, int], bool] = {}
        self._oper: dict[tuple[str, int], bool] = {}
        self._by_name = {ifname: (sw, port) for sw, p in self.switches.items()
                         for port, ifname in p.ifnames.items()}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Subscribe to link changes, then take every port's carrier as it is now (a change in
        between is seen twice, never lost)."""
        if self._by_name:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
            sock.bind((0, RTMGRP_LINK))
            self._sock = sock
        for ifname, key in self._by_name.items():
            self._admin.setdefault(key, True)
            self._oper[key] = True  # the pipeline was just pushed: port_down is all zero
            self._carrier_changed(key, has_carrier(ifname))
        if self._sock is not None:
            self._thread = threading.Thread(target=self._watch, name="bmv2-ports", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def set_admin(self, switch: str, port: int, up: bool) -> None:
        """Administrative state of one port; raises Bmv2CliError (state unchanged) when the
        switch refuses the register write, KeyError for an unknown switch or port."""
        key = (switch, port)
        if switch not in self.switches or port not in self.switches[switch].ifnames:
            raise KeyError(f"{switch} has no BMv2 port {port}")
        with self._lock:
            before = self._admin.get(key, True)
            self._admin[key] = up
            try:
                self._apply(key)
            except Exception:
                self._admin[key] = before
                raise

    def oper_up(self, switch: str, port: int) -> bool:
        with self._lock:
            return self._oper.get((switch, port), True)

    # -- internals ---------------------------------------------------------------------------
    def _apply(self, key: tuple[str, int]) -> None:
        """Write and report the port's operational state if it changed (lock held)."""
        up = self._admin.get(key, True) and self._carrier.get(key, True)
        if self._oper.get(key) == up:
            return
        sw, port = key
        self.cli(self.switches[sw].thrift_port, [port_down_command(port, not up)])
        self._oper[key] = up
        self.switches[sw].events.put(PortEvent(port, up))
        log.info("%s port %d %s", sw, port, "up" if up else "down")

    def _carrier_changed(self, key: tuple[str, int], carrier: bool) -> None:
        with self._lock:
            self._carrier[key] = carrier
            try:
                self._apply(key)
            except Exception as exc:  # keep watching: the next change retries the write
                self.errors.append(f"{key[0]} port {key[1]}: {exc}")
                log.warning("%s port %d: port_down write failed: %s", key[0], key[1], exc)

    def _watch(self) -> None:
        assert self._sock is not None
        both = IFF_UP | IFF_RUNNING
        while not self._stop.is_set():
            readable, _, _ = select.select([self._sock], [], [], 0.2)
            if not readable:
                continue
            try:
                data = self._sock.recv(65536)
            except OSError as exc:
                if exc.errno != errno.ENOBUFS:
                    return
                # messages were lost: read every port's carrier again
                for ifname, key in self._by_name.items():
                    self._carrier_changed(key, has_carrier(ifname))
                continue
            for msg in parse_link_messages(data):
                found = self._by_name.get(msg.name or "")
                if found is not None:
                    self._carrier_changed(found, not msg.deleted and msg.flags & both == both)
