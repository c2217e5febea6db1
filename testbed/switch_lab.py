"""Run switch nodes of any kind (switch/targets/) on veths, and send/capture frames in
namespaces.

Used by the switch emulation tests and ``mrcnet bench switch``. Everything is created
through a ``common.netns.NetKit`` (run-prefixed names, removed on close). Senders and
sniffers are short Python programs started inside namespaces; they are bounded in count and
time. A sniffer stops when it has seen ``count`` frames, when it sees a frame containing the
``STOP_MARK`` bytes (so a test proves "nothing else arrived" by sending a marker frame last,
instead of waiting), or at its deadline.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common.netns import IFNAMSIZ, NetKit, Process, run, wait_until
from switch.targets import DEFAULT_KIND, ProcessSwitch, SwitchTarget, kinds, target_class

STOP_MARK = b"MRCNET-STOP-MARK"
SWITCH_KINDS = tuple(kinds())  # every kind of switch node the tests run

_SNIFFER = r"""
import json, os, select, socket, sys, time
out, count, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
mark, marks_needed = bytes.fromhex(sys.argv[4]), int(sys.argv[5])
socks = {}
for name in sys.argv[6:]:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    s.bind((name, 0))
    s.setblocking(False)
    socks[s.fileno()] = (name, s)
print("ready", flush=True)
frames, marks = [], 0

def drain(fd):
    global marks
    name, s = socks[fd]
    while True:
        try:
            data = s.recv(65535)
        except BlockingIOError:
            return
        if mark and mark in data:
            marks += 1
        else:
            frames.append({"if": name, "t": time.monotonic(), "data": data.hex()})

deadline = time.monotonic() + timeout
while len(frames) < count and not (marks_needed and marks >= marks_needed):
    left = deadline - time.monotonic()
    if left <= 0:
        break
    readable, _, _ = select.select(list(socks), [], [], left)
    for fd in readable:
        drain(fd)
for fd in socks:  # frames already delivered to other interfaces
    drain(fd)
with open(out + ".tmp", "w") as f:
    json.dump({"frames": frames, "marks": marks}, f)
os.replace(out + ".tmp", out)
"""

_SENDER = r"""
import socket, sys, time
name, path, gap = sys.argv[1], sys.argv[2], float(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
s.bind((name, 0))
with open(path) as f:
    frames = [bytes.fromhex(line) for line in f if line.strip()]
for i, frame in enumerate(frames):
    s.send(frame)
    if gap and i + 1 < len(frames):
        time.sleep(gap)
"""


@dataclass
class Capture:
    """Frames one sniffer saw: (interface, monotonic time, bytes) in arrival order."""

    frames: list[tuple[str, float, bytes]]
    marks: int  # stop-mark frames seen


@dataclass
class Sniffer:
    process: Process
    out: Path
    log: Path

    def result(self, timeout: float = 30.0) -> Capture:
        """Wait for the sniffer to finish (bounded by its own deadline) and load its frames."""
        self.process.popen.wait(timeout)
        if not self.out.exists():
            raise RuntimeError(f"sniffer produced no result; see {self.log}")
        raw = json.loads(self.out.read_text())
        frames = [(f["if"], f["t"], bytes.fromhex(f["data"])) for f in raw["frames"]]
        return Capture(frames, raw["marks"])




@dataclass
class SwitchProcess:
    name: str
    address: str
    device_id: int
    ports: dict[int, str]
    log: Path
    process: Process
    kind: str = DEFAULT_KIND  # switch/targets/ kind
    thrift_port: int | None = None  # BMv2's Thrift runtime (queues, registers)
    target: SwitchTarget | None = None  # the node (its class answers what the kind can do)

    def alive(self) -> bool:
        return self.process.alive()


@dataclass
class Lab:
    """Namespaces, veths, switch processes, senders and sniffers of one test or benchmark."""

    kit: NetKit
    workdir: Path
    python: str = sys.executable
    _seq: int = field(default=0)

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def namespace(self, suffix: str) -> str:
        return self.kit.add_namespace(suffix)

    def wire(self, a: str, b: str, ns_a: str | None, ns_b: str | None, mtu: int = 9000) -> None:
        """A veth pair PREFIX+a <-> PREFIX+b (None = root namespace, where switch processes
        run). Like NetKit.add_veth, but IPv6 is switched off on every end *before* it comes
        up, so the kernel never emits router solicitations or MLD reports into a test."""
        kit = self.kit
        name_a, name_b = kit.name(a), kit.name(b)
        for name in (name_a, name_b):
            if len(name) > IFNAMSIZ:
                raise ValueError(f"interface name {name!r} longer than {IFNAMSIZ}")
        run(["ip", "link", "add", name_a, "type", "veth", "peer", "name", name_b])
        if ns_a is None or ns_b is None:
            kit.root_links.append(name_a if ns_a is None else name_b)
        for end, ns in ((name_a, ns_a), (name_b, ns_b)):
            if ns is not None:
                run(["ip", "link", "set", end, "netns", ns])
            run(["sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1"], netns=ns, check=False)
            run(["ip", "link", "set", end, "mtu", str(mtu)], netns=ns)
            run(["ethtool", "-K", end, "tx", "off", "rx", "off"], netns=ns, check=False)
            run(["ip", "link", "set", end, "up"], netns=ns)

    def ifname(self, suffix: str) -> str:
        return self.kit.name(suffix)

    def start_switch(
        self,
        name: str,
        ports: dict[int, str],
        device_id: int = 1,
        links: dict[int, str] | None = None,
        extra: Sequence[str] = (),
        timeout: float = 20.0,
        kind: str = DEFAULT_KIND,
    ) -> SwitchProcess:
        """Start a switch node of ``kind`` (switch/targets/) on root-namespace interfaces
        (full names) and wait until it is ready; SwitchStartError names the log. ``links``:
        egress link specs per port; ``extra``: process flags for kinds that take them (the
        embedded switch's ``switch.main`` arguments)."""
        cls = target_class(kind)
        if not cls.available():
            raise RuntimeError(cls.unavailable_reason())
        params: dict[str, object] = {"links": links or {}, "log_dir": self.workdir,
                                     "start_timeout": timeout, "launcher": self._launch}
        if cls.takes_run_flags:
            params["extra_args"] = tuple(extra)
        target = cls(name, device_id, dict(ports), **params)  # type: ignore[arg-type]
        target.start()
        assert isinstance(target, ProcessSwitch) and target.proc is not None
        return SwitchProcess(name, target.grpc_address, device_id, dict(ports),
                             target.log_path or target.launch_log(), target.proc, kind,
                             getattr(target, "thrift_port", None), target)

    def _launch(self, label: str, argv: Sequence[str], log_path: Path) -> Process:
        return self.kit.spawn(label, argv, log_path=log_path)

    def sniff(
        self,
        netns: str | None,
        ifnames: Sequence[str],
        count: int = 1 << 30,
        timeout: float = 10.0,
        marks: int = 1,
    ) -> Sniffer:
        """Start a sniffer on interfaces inside ``netns``; returns once it is capturing. It
        stops after ``count`` frames, after ``marks`` stop-mark frames (0: ignore marks) or
        at ``timeout``; then it collects what is already queued on every interface."""
        n = self._next()
        out = self.workdir / f"sniff{n}.json"
        log = self.workdir / f"sniff{n}.log"
        cmd = [self.python, "-c", _SNIFFER, str(out), str(count), str(timeout)]
        cmd += [STOP_MARK.hex(), str(marks), *ifnames]
        proc = self.kit.spawn(f"sniff{n}", cmd, netns=netns, log_path=log)
        wait_until(
            lambda: "ready" in log.read_text() or not proc.alive(),
            10.0,
            f"sniffer readiness ({log})",
        )
        if not proc.alive() and "ready" not in log.read_text():
            raise RuntimeError(f"sniffer failed to start; see {log}")
        return Sniffer(proc, out, log)

    def send(
        self, netns: str | None, ifname: str, frames: Iterable[bytes], gap: float = 0.0
    ) -> None:
        """Send frames in order from ``ifname`` (inside ``netns``); returns when all are sent."""
        n = self._next()
        path = self.workdir / f"send{n}.hex"
        path.write_text("".join(f.hex() + "\n" for f in frames))
        run([self.python, "-c", _SENDER, ifname, str(path), str(gap)], netns=netns)
