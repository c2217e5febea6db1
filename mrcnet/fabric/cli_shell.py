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
- ``deny EV@PORT ...`` / ``allow EV@PORT ...``: controller DENIED / GOOD for every QP.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from mininet.cli import CLI

from common.proto import mrc_ctl_pb2 as pb
from mrcnet.fabric.failures import find_link
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
        print("fabric CLI: 'help' lists commands; link/port/plane/stats/ev/evs/run/deny/allow are "
              "mrcnet's, the rest are Mininet's. 'exit' tears the fabric down.", flush=True)
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
            time.sleep(sampler.interval)
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

    def do_evs(self, _line: str) -> None:
        """evs: the run's EV profile (value@port)."""
        assert self.fab.ctl is not None
        self._say(" ".join(f"{v:#x}@{p}" for v, p in self.fab.ctl.ev_array()))

    def _ev_state(self, line: str, state: pb.EvState, word: str) -> None:
        try:
            evs = parse_evs(line.split())
            assert self.fab.ctl is not None
            self.fab.ctl.set_ev_state(evs, state)
            self._say(f"{word}: {', '.join(f'{v:#x}@{p}' for v, p in evs)}")
        except Exception as exc:  # bad EV syntax, controller refusals
            self._say(f"{word}: {_error(exc)}")

    def do_deny(self, line: str) -> None:
        """deny EV@PORT ...: the controller sets DENIED on every QP of the profile."""
        self._ev_state(line, pb.EV_DENIED, "denied")

    def do_allow(self, line: str) -> None:
        """allow EV@PORT ...: lift a denial (GOOD)."""
        self._ev_state(line, pb.EV_GOOD, "allowed")

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
            runner.wait(wl, 150, self.fab.check_alive)
        except Exception as exc:
            self._say(f"run: {exc}")
            return
        summary = wl.summary()
        self.fab.cli_workloads.append(summary)
        self._say(summary_table([summary]))

    def do_EOF(self, line: str) -> bool:
        sys.stdout.write("\n")
        return True
