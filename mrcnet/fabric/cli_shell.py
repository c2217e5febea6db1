"""The interactive CLI: Mininet's CLI (``h0 ip link``, ``nodes``, ``net``, ``dump``, ``sh``,
``py``...) extended with fabric commands:

- ``link A B down|up``: a link between two nodes, through the controller (switch admin
  service at each switch end, so switches report it and routes converge after the delay);
- ``port HOST N down|up``: NIC port N of a host (carrier: the agent sends Port Status Updates,
  the switch port goes down);
- ``plane P down|up``: every link of plane P (its switches fail together; hosts keep carrier);
- ``stats``: the latest throughput per plane, drops, trims, ECN marks, EV state counts;
- ``ev HOST``: EV states reported by the host's QPs (only EVs that changed are listed);
- ``evs``: the run's EV profile (value@port);
- ``run WORKLOAD [RC|MRC] [SIZE]``: a verified workload (all-to-all, permutation, pair:A:B);
- ``deny EV@PORT ...`` / ``allow EV@PORT ...``: controller DENIED / GOOD for every QP;
- ``ctl COMMAND ...``: any ``mrcnet ctl`` command against this fabric's controller (the same
  commands, controller/commands.py; ``evs``, ``deny``, ``allow`` and ``link`` run through
  them too);
- ``live [on|off]``: the live view's status line (the terminal's last row; without a
  terminal, lines while a workload runs; mrcnet/fabric/livedisplay.py);
- ``pingall`` (every host pings every other host's GID on every plane), ``iperf [A B]``
  (iperf3 -6, TCP, through the fabric) and ``pcap SWITCH PORT [stop]`` (capture a port).

Host names after a node's command stand for the host's plane-0 GID (its kernel address on
NIC port 0), so ``h0 ping -c 3 h3`` and ``h0 iperf3 -6 -c h3`` work as in Mininet.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from contextlib import nullcontext
from typing import Any

from mininet.cli import CLI

from common.netns import wait_until
from controller.commands import CommandParseExit, command_parser, execute
from mrcnet.fabric.captures import CaptureError
from mrcnet.fabric.ctlclient import EV_PROFILE
from mrcnet.fabric.failures import find_link
from mrcnet.fabric.livedisplay import LiveDisplay
from mrcnet.fabric.orchestrator import Fabric


def _error(exc: BaseException) -> str:
    """A controller refusal as 'CODE: message' (gRPC), anything else as its text."""
    code = getattr(exc, "code", None)
    details = getattr(exc, "details", None)
    if callable(code) and callable(details):
        return f"{code().name}: {details()}"
    return str(exc)


def parse_evs(words: list[str]) -> list[tuple[int, int]]:
    """['0x8001@1', ...] -> [(0x8001, 1), ...] (value@1-based port)."""
    out = []
    for w in words:
        value, sep, port = w.partition("@")
        if not sep:
            raise ValueError(f"{w!r}: expected EV@PORT, e.g. 0x80000100@1")
        out.append((int(value, 0), int(port)))
    if not out:
        raise ValueError("give at least one EV@PORT")
    return out


class FabricCLI(CLI):  # type: ignore[misc]
    prompt = "mrcnet> "

    def __init__(self, fab: Fabric, size: int = 2 << 20, qp_type: str = "MRC",
                 **kwargs: Any) -> None:
        from mininet.log import setLogLevel

        setLogLevel("output")
        self.fab = fab
        self.size = size
        self.qp_type = qp_type
        assert fab.mn is not None
        print("fabric CLI: 'help' lists commands; link/port/plane/stats/ev/evs/run/deny/allow/pcap/"
              "live and pingall/iperf (IPv6) are mrcnet's, the rest are Mininet's. 'exit' tears the "
              "fabric down.", flush=True)
        super().__init__(fab.mn.net, **kwargs)

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def do_link(self, line: str) -> None:
        """link A B down|up: take a link down or up through the controller."""
        args = line.split()
        if len(args) != 3 or args[2] not in ("up", "down"):
            self._say("usage: link A B down|up")
            return
        try:
            link = find_link(self.fab.topo, f"{args[0]}-{args[1]}")  # type: ignore[arg-type]
            view = self.fab.set_link(str(link.a), f"{link.a.node}-{link.b.node}",
                                     args[2] == "up")
            self._say(f"link {view.a} -- {view.b} {'up' if view.up else 'down'}")
        except Exception as exc:  # FailureSpecError, controller refusals
            self._say(f"link: {_error(exc)}")

    def do_port(self, line: str) -> None:
        """port HOST N down|up: NIC port N of HOST (carrier change seen by agent and switch)."""
        args = line.split()
        if len(args) != 3 or args[2] not in ("up", "down") or not args[1].isdecimal():
            self._say("usage: port HOST N down|up")
            return
        try:
            self.fab.set_host_port(args[0], int(args[1]), args[2] == "up")
            self._say(f"{args[0]} port {args[1]} {args[2]}")
        except (StopIteration, KeyError, ValueError) as exc:
            self._say(f"port: no such host port ({exc})")

    def do_plane(self, line: str) -> None:
        """plane P down|up: every link of plane P down or up through the controller."""
        args = line.split()
        if len(args) != 2 or args[1] not in ("up", "down") or not args[0].isdecimal():
            self._say("usage: plane P down|up")
            return
        try:
            self.fab.set_plane(int(args[0]), args[1] == "up")
            self._say(f"plane {args[0]} {args[1]}")
        except Exception as exc:  # FailureSpecError, controller refusals
            self._say(f"plane: {_error(exc)}")

    def do_stats(self, _line: str) -> None:
        """stats: throughput per plane, drops, trims, ECN marks, EV state counts."""
        sampler = self.fab.sampler
        s = sampler.sample() if sampler is not None else None
        if s is None and sampler is not None:  # a rate needs two readings: measure one interval
            time.sleep(self.fab.clock.to_wall(sampler.interval))
            s = sampler.sample()
        if s is None:
            self._say("no sample yet")
            return
        planes = "  ".join(f"plane {i}: {v / 1e6:.1f} Mb/s" for i, v in enumerate(s.plane_bps))
        self._say(f"{planes}\ndrops {s.drops}  trims {s.trims}  ECN marks {s.ecn}\n"
                  f"EV reports (latest per QP and EV): {self.fab.tracker.counts()}")

    def do_ev(self, line: str) -> None:
        """ev HOST: EV states reported by HOST's QPs."""
        host = line.strip()
        rows = self.fab.tracker.for_host(host)
        if not rows:
            self._say(f"{host or '?'}: no EV state changes reported (all EVs GOOD)")
            return
        for qpn, ev, port, state in rows:
            self._say(f"  qp {qpn:6d}  ev {ev:#010x}@{port}  {state}")

    def do_ctl(self, line: str) -> None:
        """ctl COMMAND ...: a ``mrcnet ctl`` command against this fabric's controller
        (``ctl --help`` lists them; ``ctl ev 1 --array``, ``ctl topo``, ``ctl cc 1`` ...)."""
        self._ctl(shlex.split(line), "ctl")

    def _ctl(self, argv: list[str], what: str) -> bool:
        """Run one controller command (controller/commands.py) with the fabric's client;
        its output and any refusal go to the CLI. True when it succeeded."""
        assert self.fab.ctl is not None
        parser = command_parser("ctl", self.stdout)
        try:
            args = parser.parse_args(argv)
        except CommandParseExit:
            return False
        if not getattr(args, "ctl_cmd", None):
            parser.print_usage(self.stdout)
            return False
        try:
            execute(args, self.fab.ctl, self.stdout)
            return True
        except Exception as exc:  # UsageError, controller refusals
            self._say(f"{what}: {_error(exc)}")
            return False

    def do_evs(self, _line: str) -> None:
        """evs: the run's EV profile (its EV array; same as ``ctl ev 1 --array``)."""
        self._ctl(["ev", str(EV_PROFILE), "--array"], "evs")

    def _ev_state(self, line: str, option: str, word: str) -> None:
        try:
            evs = parse_evs(line.split())
        except ValueError as exc:
            self._say(f"{word}: {exc}")
            return
        argv = ["ev", str(EV_PROFILE)]
        for v, p in evs:
            argv += [option, f"{v:#x}@{p}"]
        if self._ctl(argv, word):
            self._say(f"{word}: {', '.join(f'{v:#x}@{p}' for v, p in evs)}")

    def do_deny(self, line: str) -> None:
        """deny EV@PORT ...: the controller sets DENIED on every QP of the profile
        (``ctl ev 1 --deny EV@PORT ...``)."""
        self._ev_state(line, "--deny", "denied")

    def do_allow(self, line: str) -> None:
        """allow EV@PORT ...: lift a denial (GOOD; ``ctl ev 1 --allow EV@PORT ...``)."""
        self._ev_state(line, "--allow", "allowed")

    def do_run(self, line: str) -> None:
        """run WORKLOAD [MRC|RC] [SIZE]: run a verified workload and print its summary."""
        from common.units import parse_size
        from mrcnet.fabric.results import summary_table

        args = line.split()
        if not args:
            self._say("usage: run all-to-all|permutation|pair:A:B [MRC|RC] [SIZE]")
            return
        qp = next((a.upper() for a in args[1:] if a.upper() in ("MRC", "RC")), self.qp_type)
        size = self.size
        try:
            for a in args[1:]:
                if a.upper() not in ("MRC", "RC"):
                    size = parse_size(a)
            runner = self.fab.runner
            assert runner is not None
            wl = runner.submit(args[0], size, qp)
            live = self._live()
            with live.workload() if live is not None else nullcontext():
                runner.wait(wl, 150, self.fab.check_alive)
        except Exception as exc:
            self._say(f"run: {exc}")
            return
        summary = wl.summary()
        self.fab.cli_workloads.append(summary)
        self._say(summary_table([summary], self.fab.clock.dilated))

    def _live(self) -> LiveDisplay | None:
        display = getattr(self.fab.sampler, "display", None)
        return display if isinstance(display, LiveDisplay) else None

    def do_live(self, line: str) -> None:
        """live [on|off]: the live view's status line (the terminal's last row; from a pipe,
        lines while a workload runs)."""
        live = self._live()
        arg = line.strip()
        if live is None or arg not in ("", "on", "off"):
            self._say("usage: live [on|off]" if live is not None else
                      "live: this fabric has no live view")
            return
        if arg:
            live.set_on(arg == "on")
        where = "status row" if live.row is not None else "lines while a workload runs"
        self._say(f"live view {'on' if live.on else 'off'} ({where})")

    # -- Mininet habits over the hosts' kernel IPv6 stack (mrcnet/fabric/hostnet.py) --------
    def _address(self, name: str, plane: int = 0) -> str | None:
        assert self.fab.plan is not None
        for h in self.fab.plan.hosts:
            if h.name == name:
                return next((p.gid for p in h.ports if p.port == plane), None)
        return None

    def default(self, line: str) -> None:
        """``NODE CMD ARGS``: run CMD in NODE, host names in ARGS replaced by their GID."""
        first, args, line = self.parseline(line)
        if first in self.mn and args:
            words = [self._address(w) or w for w in args.split(" ")]
            line = f"{first} {' '.join(words)}"
        super().default(line)

    def do_pingall(self, line: str) -> None:
        """pingall [TIMEOUT]: every host pings every other host's GID on every plane."""
        assert self.fab.plan is not None
        timeout = line.strip() or "1"
        if not timeout.replace(".", "", 1).isdigit():
            self._say("usage: pingall [TIMEOUT]")
            return
        hosts = self.fab.plan.hosts
        sent = received = 0
        for plane in range(self.fab.plan.topo.fabric.planes):
            self._say(f"*** Ping: testing reachability over plane {plane}")
            for src in hosts:
                row = []
                for dst in hosts:
                    if dst is src:
                        continue
                    addr = self._address(dst.name, plane)
                    out = self.mn[src.name].cmd(f"ping -6 -c1 -W{timeout} {addr} >/dev/null "
                                                "2>&1 && echo reached")
                    sent += 1
                    ok = "reached" in out
                    received += ok
                    row.append(dst.name if ok else "X")
                self._say(f"{src.name} -> {' '.join(row)}")
        lost = 100 * (sent - received) // max(1, sent)
        self._say(f"*** Results: {lost}% dropped ({received}/{sent} received)")

    def do_iperf(self, line: str) -> None:
        """iperf [A B] [SECONDS]: iperf3 -6 (TCP) from host A to host B (default: the first
        and the last host) through the fabric; prints what B received."""
        assert self.fab.plan is not None
        args = line.split()
        secs = args.pop() if args and args[-1].replace(".", "", 1).isdigit() else "2"
        names = [h.name for h in self.fab.plan.hosts]
        if not args:
            args = [names[0], names[-1]]
        if len(args) != 2 or not all(a in names for a in args) or args[0] == args[1]:
            self._say("usage: iperf [SRC DST] [SECONDS] (two different hosts)")
            return
        src, dst = (self.mn[a] for a in args)
        pidfile = self.fab.run_dir / f"iperf3-{args[1]}.pid"
        dst.cmd(f"iperf3 -s -1 -D -I {pidfile}")
        try:
            wait_until(lambda: ":5201" in dst.cmd("ss -Hltn 'sport = :5201'"), 10,
                       f"iperf3 -s on {args[1]}", 0.05)
            out = src.cmd(f"iperf3 -6 -J -t {secs} -c {self._address(args[1])}")
            result = json.loads(out[out.index("{"):])
        except (RuntimeError, TimeoutError, ValueError) as exc:
            self._say(f"iperf: {exc}")
            return
        finally:
            if pidfile.exists():
                dst.cmd(f"kill $(cat {pidfile}) 2>/dev/null")
        if "error" in result:
            self._say(f"iperf: {result['error']}")
            return
        end = result["end"]
        sent = end["sum_sent"]["bits_per_second"] / 1e6
        got = end["sum_received"]["bits_per_second"] / 1e6
        self._say(f"*** Iperf: testing TCP bandwidth between {args[0]} and {args[1]}")
        self._say(f"*** Results: ['{sent:.2f} Mbits/sec', '{got:.2f} Mbits/sec']")

    def do_pcap(self, line: str) -> None:
        """pcap SWITCH PORT [stop]: capture a switch port (both directions) into the run's
        pcap/ folder, or stop that capture and print its packet count."""
        args = line.split()
        if len(args) not in (2, 3) or not args[1].isdigit() or args[2:] not in ([], ["stop"]):
            self._say("usage: pcap SWITCH PORT [stop]")
            return
        caps = self.fab.captures
        assert caps is not None
        try:
            if args[2:]:
                path, packets = caps.stop(args[0], int(args[1]))
                self._say(f"pcap: {packets} packets in {path}")
            else:
                self._say(f"pcap: capturing {args[0]} port {args[1]} into "
                          f"{caps.start(args[0], int(args[1]))}")
        except CaptureError as exc:
            self._say(f"pcap: {exc}")

    def waitForNode(self, node: Any) -> None:
        """A node's command runs to its end. From a terminal, keys go to the command (as in
        Mininet); from a pipe or file, the following lines are CLI commands, never input."""
        if self.isatty():
            super().waitForNode(node)
            return
        from mininet.log import output

        while node.waiting:
            output(node.monitor())

    def do_EOF(self, line: str) -> bool:
        sys.stdout.write("\n")
        return True
