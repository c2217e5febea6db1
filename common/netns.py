"""OS primitives for emulation: network namespaces, veth pairs and processes inside them.

Everything created is recorded in a `NetKit` and removed by `NetKit.close()` (idempotent, also
called on a failed start and by the context manager), so a test or a run never leaves
namespaces, interfaces or processes behind and never touches anything it did not create.
Names must carry the caller's run prefix; interface names are checked against IFNAMSIZ.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

IFNAMSIZ = 15  # usable characters of a Linux interface name


class NetError(RuntimeError):
    """An OS-level network operation failed; the message holds the command and its stderr."""


def run(cmd: Sequence[str], netns: str | None = None, check: bool = True) -> str:
    """Run a command (inside `netns` if given) and return stdout; raise NetError on failure."""
    full = ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)
    proc = subprocess.run(full, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise NetError(f"{' '.join(full)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def _check_ifname(name: str) -> None:
    if not name or len(name) > IFNAMSIZ or "/" in name or " " in name:
        raise NetError(f"invalid interface name {name!r} (1..{IFNAMSIZ} chars, no '/' or spaces)")


def stop_process_group(popen: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGTERM the process group led by ``popen`` (started with start_new_session, so its
    children go too), SIGKILL after ``timeout``. Idempotent; never signals by name."""
    stop_process_groups([popen], timeout)


def _signal_group(popen: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(popen.pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:  # not a group leader we may signal: the process alone
        popen.send_signal(sig)


def stop_process_groups(popens: list[subprocess.Popen[bytes]], timeout: float = 5.0) -> None:
    """``stop_process_group`` for many at once: every group gets SIGTERM first, then all
    share one ``timeout`` before the rest get SIGKILL, so stopping N slow processes takes
    one timeout, not N (a busy machine made a sequential stop outlast a 60 s Ctrl-C)."""
    running = [p for p in popens if p.poll() is None]
    for popen in running:
        _signal_group(popen, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for popen in running:
        try:
            popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for popen in running:
        if popen.poll() is None:
            _signal_group(popen, signal.SIGKILL)
            popen.wait(timeout)


@dataclass
class Process:
    """A process started by a NetKit; stopped by pid, never by name."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path | None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        stop_process_group(self.popen, timeout)


@dataclass
class NetKit:
    """Creates namespaces, veths and processes, and removes exactly those on close()."""

    prefix: str
    namespaces: list[str] = field(default_factory=list)
    root_links: list[str] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)

    def __enter__(self) -> NetKit:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def name(self, suffix: str) -> str:
        return f"{self.prefix}{suffix}"

    def add_namespace(self, suffix: str, disable_ipv6: bool = True) -> str:
        """Create namespace PREFIX+suffix with loopback up. IPv6 off by default: MRC endpoints
        speak IPv6 through raw sockets, and a kernel stack would answer UDP 4791 with ICMP."""
        ns = self.name(suffix)
        run(["ip", "netns", "add", ns])
        self.namespaces.append(ns)
        run(["ip", "link", "set", "lo", "up"], netns=ns)
        if disable_ipv6:
            run(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"], netns=ns)
            run(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"], netns=ns)
        return ns

    def add_veth(
        self,
        name_a: str,
        name_b: str,
        ns_a: str | None,
        ns_b: str | None,
        mtu: int = 9000,
        mac_a: str | None = None,
        mac_b: str | None = None,
    ) -> None:
        """Create a veth pair with end a in ns_a and end b in ns_b (None = root namespace).
        Both ends are brought up with tx checksum offload off (see docs: veth pitfalls)."""
        _check_ifname(name_a)
        _check_ifname(name_b)
        run(["ip", "link", "add", name_a, "type", "veth", "peer", "name", name_b])
        if ns_a is None or ns_b is None:
            self.root_links.append(name_a if ns_a is None else name_b)
        for end, ns, mac in ((name_a, ns_a, mac_a), (name_b, ns_b, mac_b)):
            if ns is not None:
                run(["ip", "link", "set", end, "netns", ns])
            if mac:
                run(["ip", "link", "set", end, "address", mac], netns=ns)
            run(["ip", "link", "set", end, "mtu", str(mtu)], netns=ns)
            if ns is not None:
                run(["sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1"], netns=ns, check=False)
            run(["ethtool", "-K", end, "tx", "off", "rx", "off"], netns=ns, check=False)
            run(["ip", "link", "set", end, "up"], netns=ns)

    def set_link(self, name: str, up: bool, netns: str | None = None) -> None:
        run(["ip", "link", "set", name, "up" if up else "down"], netns=netns)

    def spawn(
        self,
        label: str,
        cmd: Sequence[str],
        netns: str | None = None,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Process:
        """Start a process (inside netns if given) in its own session; output goes to log_path."""
        full = ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)
        out = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            popen = subprocess.Popen(
                full,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        finally:
            if log_path:
                out.close()  # type: ignore[union-attr]
        proc = Process(label, popen, log_path)
        self.processes.append(proc)
        return proc

    def close(self) -> None:
        """Stop processes (newest first), delete root-side links and namespaces. Idempotent."""
        while self.processes:
            self.processes.pop().stop()
        while self.root_links:
            link = self.root_links.pop()
            run(["ip", "link", "del", link], check=False)
        while self.namespaces:
            ns = self.namespaces.pop()
            run(["ip", "netns", "del", ns], check=False)


def wait_until(
    predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.02
) -> None:
    """Poll `predicate()` until true; raise TimeoutError naming `what` (e.g. a log path)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")


def tcp_listening(host: str, port: int) -> bool:
    """True if something accepts TCP connections on host:port (readiness probe)."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
SERVER_PORTS = (16384, 32768)  # where servers' ports are drawn from (below the usual range)
HANDED_OUT_KEPT = 4096  # ports this process handed out recently, never handed out again
_handed_out: collections.deque[int] = collections.deque(maxlen=HANDED_OUT_KEPT)
_handed_out_lock = threading.Lock()


def free_tcp_port() -> int:
    """A TCP port free on every address, for a server started next to listen on.

    Drawn outside the kernel's ephemeral range when it can be: every outgoing connection
    takes its local port from that range, so a port found free there can be taken before the
    server binds it (seen: a BMv2 Thrift port lost to one while the suite ran). And never
    one this process handed out recently: a fabric's switches pick their ports before any
    of them binds, so two of them could draw the same free port (seen: 20 BMv2 switches of
    fattree-3t, one lost its Thrift port to another, about a 5% chance per fabric).
    """
    import random
    import socket

    try:
        low, high = (int(x) for x in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    outside = [p for p in range(*SERVER_PORTS) if not low <= p <= high]
    with _handed_out_lock:
        recent = set(_handed_out)
        for port in random.sample(outside, min(256, len(outside))):
            if port in recent:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("0.0.0.0", port))
                except OSError:
                    continue
            _handed_out.append(port)
            return port
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        _handed_out.append(port)
        return port
