"""The engine: a BMv2 JSON program compiled to Python, run with simple_switch's v1model flow.

``Engine(json_text)`` loads and checks the program (``Unsupported`` / ``ConfigError`` at once,
never later), generates its per-packet code (``switch.p4json.codegen``), compiles it, and
creates the run-time state (tables, profiles, counters, registers, meters, clone sessions,
multicast groups). ``process(frame, port, now, qdepth)`` runs one received packet through
the architecture the way simple_switch.cpp does:

parser -> checksum verification -> ingress -> [ingress clone (the packet re-parsed, metadata
reset, field list kept) -> digest -> resubmit | multicast replication | unicast | drop] ->
egress per copy (enq_qdepth from ``qdepth`` at that moment) -> [egress clone] -> checksum
update -> deparser -> [recirculate] -> output.

Egress runs when a copy is handed to the traffic manager (the embedded target queues after
egress, docs/switch.md), so ``deq_qdepth`` equals ``enq_qdepth`` and ``deq_timedelta`` is 0.
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from switch.p4json import codegen as cg
from switch.p4json import hashes, ops
from switch.p4json import program as pm
from switch.p4json.errors import ConfigError
from switch.p4json.runtime import (
    ActionProfile,
    CounterArray,
    MatchTable,
    Meter,
    MeterArray,
    RegisterArray,
    ValueSet,
    prefix_mask,
)

log = logging.getLogger(__name__)
QDepthFn = Callable[[int, int], tuple[int, int]]
MAX_PASSES = 16  # resubmit / recirculation passes per received packet
MAX_COPIES = 1024  # egress copies (clones, replicas) per received packet
DIGESTS_MAX = 4096


def _no_queues(port: int, priority: int) -> tuple[int, int]:
    return (0, 0)


class P4Abort(Exception):
    """An assert()/assume() failed: BMv2 aborts the switch; here the packet is dropped."""


@dataclass(slots=True)
class Output:
    """A packet leaving egress for ``port`` (queue ``priority``)."""

    port: int
    priority: int
    data: bytes
    instance_type: int = cg.NORMAL
    truncated: bool = False  # truncate() cut the packet


@dataclass
class MirrorSession:
    port: int | None = None
    mgid: int | None = None


@dataclass
class Stats:
    packets: int = 0
    outputs: int = 0
    dropped: int = 0  # received packets that produced no output
    aborted: int = 0  # assert/assume failures
    errors: int = 0  # internal errors (a bug: logged)
    loops: int = 0  # packets cut off after MAX_PASSES resubmits/recirculations


@dataclass
class McNode:
    rid: int
    ports: list[int] = field(default_factory=list)


def _generated(prog: pm.Program) -> tuple[cg.Generator, str]:
    """The program's per-packet Python (its generator and source), generated once per loaded
    program and shared by the engines built from it (each binds its own state to it)."""
    hit = prog.derived.get("python")
    if hit is None:
        gen = cg.Generator(prog)
        hit = prog.derived["python"] = (gen, gen.source())
    return hit


class Engine:
    """One loaded program and its state. Not thread-safe: callers serialise (a lock)."""

    def __init__(
        self,
        source: str | bytes | pm.Json | pm.Program,
        *,
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
        name: str = "program",
        origin: float | None = None,
        backend: str = "python",
    ) -> None:
        """``origin``: the clock reading timestamps count from (default: now, as BMv2 counts
        from its start); the embedded switch passes 0 (microseconds of its own clock).
        ``backend``: "python", or "c" / "auto" to run the common path (``fast``) compiled to
        C when the program allows it (switch.p4json.cbackend; "c" raises ConfigError when it
        cannot, "auto" falls back to Python). ``backend_reason`` says why Python runs."""
        self.prog = source if isinstance(source, pm.Program) else pm.load_program(source)
        self.name = name
        self.clock = clock
        self.origin = clock() if origin is None else origin
        self.rng = random.Random(seed)
        try:
            gen, self.source = _generated(self.prog)
        except ConfigError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise ConfigError(f"malformed BMv2 JSON: {type(exc).__name__}: {exc}") from None
        self.generator = gen
        self.stats = Stats()
        self.digests: deque[tuple[str, tuple[int, ...]]] = deque(maxlen=DIGESTS_MAX)
        self.mirror: dict[int, MirrorSession] = {}
        self.mc_groups: dict[int, list[int]] = {}  # mgid -> node handles
        self.mc_nodes: dict[int, McNode] = {}
        self._next_node = 0
        self.tables: dict[str, MatchTable] = {}
        for t in self.prog.all_tables():
            self.tables[t.name] = MatchTable(t, self.prog.actions)
        self.profiles = {p.name: ActionProfile(p) for p in self.prog.all_profiles()}
        self.counters = {
            c.name: CounterArray(c.name, c.size)
            for c in self.prog.counters.values() if c.direct_table is None
        }
        self.direct_counters = {
            c.name: c.direct_table for c in self.prog.counters.values() if c.direct_table
        }
        self.registers = {
            r.name: RegisterArray(r.name, r.size, r.width) for r in self.prog.registers.values()
        }
        self.meters = {
            m.name: MeterArray(m) for m in self.prog.meters.values() if m.direct_table is None
        }
        self.direct_meters = {
            m.name: m.direct_table for m in self.prog.meters.values() if m.direct_table
        }
        self.vsets = {v.name: ValueSet(v) for v in self.prog.vsets.values()}
        try:
            self._ingress, self._egress, self.fast = self._compile(gen)
        except (SyntaxError, RecursionError, MemoryError) as exc:
            raise ConfigError(f"program too large or malformed to compile: {exc}") from None
        self.backend = "python"
        self.backend_reason = "python backend requested"
        if backend not in ("python", "c", "auto"):
            raise ValueError(f"unknown backend {backend!r}")
        if backend != "python":
            from switch.p4json import cbackend

            cfast, why = cbackend.load(self)
            if cfast is not None:
                self.py_fast, self.fast = self.fast, cfast
                self.backend, self.backend_reason = "c", ""
            elif backend == "c":
                raise ConfigError(f"program {name}: {why}")
            else:
                self.backend_reason = why
                level = logging.WARNING if why.startswith("C backend unavailable") else logging.INFO
                log.log(level, "program %s runs in Python: %s", name, why)
        state = list(gen.g.consts["_STATE"])  # type: ignore[call-overload]
        prio = gen.sm("priority")
        self._prio_index = state.index(prio) if prio in state else -1

    # -- compilation ---------------------------------------------------------------------------
    def _compile(self, gen: cg.Generator) -> tuple[Any, Any, Any]:
        ns: dict[str, Any] = {"__builtins__": __builtins__, "_NOACT": (None, ())}
        ns.update(ops.HELPERS)
        ns.update(gen.g.consts)
        ns["_peek"] = peek_bits
        ns["_log"] = self._log_msg
        ns["_rand"] = self.rng.randint
        ns["_Abort"] = P4Abort
        for gname, tname in gen.g.tables.items():
            table = self.tables[tname]
            ns[gname] = table
            ns[gname + "X"] = table.exact
        for gname, pname in gen.g.profiles.items():
            ns[gname] = self.profiles[pname]
        for spec in self.prog.counters.values():
            if spec.direct_table is None:
                arr = self.counters[spec.name]
                ns[f"C{spec.id}P"], ns[f"C{spec.id}B"] = arr.packets, arr.bytes
        for rspec in self.prog.registers.values():
            reg = self.registers[rspec.name]
            ns[f"R{rspec.id}"], ns[f"R{rspec.id}C"] = reg, reg.cells
        for mspec in self.prog.meters.values():
            if mspec.direct_table is None:
                ns[f"M{mspec.id}"] = self.meters[mspec.name]
        for gname, algo in gen.g.hashes.items():
            ns[gname] = hashes.algorithm(algo)
        for gname, vname in gen.g.vsets.items():
            ns[gname] = self.vsets[vname].values
        for gname in gen.g.tables:
            table = self.tables[gen.g.tables[gname]]
            ns[gname + "B"], ns[gname + "L"] = table.by_len, table.lens
        for width in gen.g.lpm_widths:
            ns[f"_PM{width}"] = tuple(prefix_mask(width, n) for n in range(width + 1))
        key = f"code {self.name}"
        code = self.prog.derived.get(key)
        if code is None:
            code = self.prog.derived[key] = compile(self.source, f"<p4json {self.name}>", "exec")
        exec(code, ns)
        return ns["ingress"], ns["egress"], ns["fast"]

    def _log_msg(self, fmt: str, values: tuple[int, ...]) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        out, i = fmt, 0
        while "{}" in out and i < len(values):
            out = out.replace("{}", str(values[i]), 1)
            i += 1
        log.info("log_msg: %s", out.replace("\\{", "{").replace("\\}", "}"))

    # -- control-plane helpers that are not tables -------------------------------------------
    def now_us(self, now: float | None = None) -> int:
        return int(((self.clock() if now is None else now) - self.origin) * 1e6)

    def mirroring_add(self, session: int, port: int) -> None:
        self.mirror[session] = MirrorSession(port=port)

    def mirroring_add_mc(self, session: int, mgid: int) -> None:
        self.mirror[session] = MirrorSession(mgid=mgid)

    def mirroring_delete(self, session: int) -> None:
        self.mirror.pop(session, None)

    def mc_group_create(self, mgid: int) -> None:
        self.mc_groups.setdefault(mgid, [])

    def mc_node_create(self, rid: int, ports: list[int]) -> int:
        handle = self._next_node
        self._next_node += 1
        self.mc_nodes[handle] = McNode(rid, sorted(set(ports)))
        return handle

    def mc_node_update(self, handle: int, ports: list[int]) -> None:
        self.mc_nodes[handle].ports = sorted(set(ports))

    def mc_node_associate(self, mgid: int, handle: int) -> None:
        if handle not in self.mc_nodes:
            raise KeyError(f"no multicast node {handle}")
        nodes = self.mc_groups.setdefault(mgid, [])
        if handle not in nodes:
            nodes.append(handle)

    def replicas(self, mgid: int) -> list[tuple[int, int]]:
        """(port, rid) of every copy of multicast group ``mgid``."""
        out: list[tuple[int, int]] = []
        for handle in self.mc_groups.get(mgid, ()):
            node = self.mc_nodes.get(handle)
            if node is not None:
                out.extend((port, node.rid) for port in node.ports)
        return out

    def set_port_status(self, port: int, up: bool) -> None:
        for profile in self.profiles.values():
            profile.set_port_status(port, up)

    def new_direct_meter(self) -> Meter:
        return Meter()

    # -- the data path ---------------------------------------------------------------------
    def process(
        self, frame: bytes, port: int, now: float | None = None, qdepth: QDepthFn | None = None
    ) -> list[Output]:
        """Every packet ``frame`` (received on ``port``) produces; [] when dropped."""
        r = self.run(frame, port, now, qdepth)
        if r is None:
            return []
        if isinstance(r, tuple):
            return [Output(r[0], r[1], r[2], cg.NORMAL, r[3])]
        return r

    def run(
        self, frame: bytes, port: int, now: float | None = None, qdepth: QDepthFn | None = None
    ) -> tuple[int, int, bytes, bool] | list[Output] | None:
        """``process`` without building Output objects for the common case: None when the
        packet is dropped, ``(port, priority, data, truncated)`` for one unicast copy of
        instance type NORMAL, else the list of outputs."""
        now_us = int(((self.clock() if now is None else now) - self.origin) * 1e6)
        q = qdepth or _no_queues
        try:
            kind, r = self.fast(frame, port, now_us, len(frame), q)
        except Exception as exc:
            self.stats.packets += 1
            self.failed(exc)
            return None
        return self.settle(kind, r, frame, port, now_us, q)

    def settle(self, kind: int, r: Any, frame: bytes, port: int, now_us: int,
               qdepth: QDepthFn) -> tuple[int, int, bytes, bool] | list[Output] | None:
        """Count a packet ``fast`` ran and finish it where ``fast`` stopped; ``run``'s
        result. (A batch caller may count the common case itself: kind 0 with a result is
        one packet and one output.)"""
        stats = self.stats
        stats.packets += 1
        if kind == 0:
            if r is not None:
                stats.outputs += 1
                return r  # type: ignore[no-any-return]
            stats.dropped += 1
            return None
        outs: list[Output] = []
        try:
            self.finish(kind, r, frame, port, now_us, qdepth, outs)
        except Exception as exc:
            self.failed(exc)
            return None
        if outs:
            stats.outputs += len(outs)
            return outs
        stats.dropped += 1
        return None

    def failed(self, exc: Exception) -> None:
        """A packet that raised is dropped and counted: an assert()/assume() (P4Abort), or
        a bug, which must cost one packet, never the switch."""
        stats = self.stats
        if isinstance(exc, P4Abort):
            stats.aborted += 1
            log.debug("packet dropped: %s", exc)
        else:
            stats.errors += 1
            if stats.errors <= 10:
                log.error("internal error processing a packet (dropped)", exc_info=exc)
        stats.dropped += 1

    def finish(self, kind: int, r: Any, frame: bytes, port: int, now_us: int, qdepth: QDepthFn,
               outs: list[Output]) -> None:
        """Go on where ``fast`` stopped: after ingress (kind 1: its INGRESS_OUT) or after the
        egress of the unicast copy (kind 2: its EGRESS_OUT, a clone or recirculation follows)."""
        work: deque[tuple[bytes, int, int, Any, int]] = deque()
        budget = [MAX_COPIES]
        if kind == 1:
            self._after_ingress(r, frame, port, now_us, len(frame), qdepth, outs, work, budget)
        else:
            result, eport, plen, pay, trunc = r
            self._after_egress(result, frame, cg.NORMAL, eport, now_us, len(frame), plen, pay,
                               trunc, qdepth, outs, work, budget)
        self._run(work, qdepth, outs, budget)

    def _run(self, work: deque[tuple[bytes, int, int, Any, int]], qdepth: QDepthFn,
             outs: list[Output], budget: list[int]) -> None:
        passes = 1
        while work:
            passes += 1
            if passes > MAX_PASSES:
                self.stats.loops += 1
                return
            data, in_port, itype, pres, ts = work.popleft()
            ilen = len(data)
            r = self._ingress(data, in_port, itype, pres, ts, ilen, False)
            self._after_ingress(r, data, in_port, ts, ilen, qdepth, outs, work, budget, itype)

    def _after_ingress(self, r: Any, data: bytes, in_port: int, ts: int, ilen: int,
                       qdepth: QDepthFn, outs: list[Output], work: deque[Any],
                       budget: list[int], itype: int = cg.NORMAL) -> None:
        """The v1model steps between ingress and egress (simple_switch ingress_thread)."""
        (phv, espec, mgid, cl_sid, cl_fl, cl_vals, rs_fl, rs_vals, lf_id, lf_vals,
         plen, pay, trunc, _perr) = r
        if cl_sid:
            session = self.mirror.get(cl_sid & 0x7FFF)
            if session is not None:
                cphv, cpay, _cplen = self._ingress(data, in_port, cg.INGRESS_CLONE, None, ts,
                                                  ilen, True)
                cpres = (cl_fl, cl_vals) if cl_vals is not None else None
                for tport, rid in self._targets(session):
                    self._egress_copy(data, cphv, cpres, cg.INGRESS_CLONE, tport, rid, ts,
                                      ilen, ilen, cpay, -1, qdepth, outs, work, budget)
        if lf_id and lf_vals is not None:
            self.digests.append((self.prog.learn_lists[lf_id][0], lf_vals))
        if rs_fl:
            work.append((data, 0, cg.RESUBMIT, (rs_fl, rs_vals) if rs_vals is not None else None, 0))
            return
        if mgid:
            for tport, rid in self.replicas(mgid):
                self._egress_copy(data, phv, None, cg.REPLICATION, tport, rid, ts, ilen, plen,
                                  pay, trunc, qdepth, outs, work, budget)
            return
        if espec == self.prog.drop_port:
            return
        self._egress_copy(data, phv, None, cg.NORMAL, espec, -1, ts, ilen, plen, pay, trunc,
                          qdepth, outs, work, budget)

    def _targets(self, session: MirrorSession) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        if session.mgid is not None:
            out += self.replicas(session.mgid)
        if session.port is not None:
            out.append((session.port, -1))
        return out

    def _egress_copy(self, frame: bytes, phv: tuple[Any, ...], pres: Any, itype: int, port: int,
                     rid: int, ts: int, ilen: int, plen: int, pay: int, trunc: int,
                     qdepth: QDepthFn, outs: list[Output], work: deque[Any],
                     budget: list[int]) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            return
        prio = phv[self._prio_index] if self._prio_index >= 0 else 0
        enq, enq_bytes = qdepth(port, prio)
        r = self._egress(frame, phv, pres, itype, port, rid, enq, enq_bytes, ts, ilen, plen, pay,
                         trunc)
        self._after_egress(r, frame, itype, port, ts, ilen, plen, pay, trunc, qdepth, outs, work,
                           budget)

    def _after_egress(self, r: Any, frame: bytes, itype: int, port: int, ts: int, ilen: int,
                      plen: int, pay: int, trunc: int, qdepth: QDepthFn, outs: list[Output],
                      work: deque[Any], budget: list[int]) -> None:
        """Egress clone, drop, recirculation or output of one copy (egress_thread)."""
        (data, out_prio, cut, cl_sid, cl_fl, cl_phv, cl_vals, rc_fl, rc_vals) = r
        if cl_sid:
            session = self.mirror.get(cl_sid & 0x7FFF)
            if session is not None and cl_phv is not None:
                cpres = (cl_fl, cl_vals) if cl_vals is not None else None
                for tport, trid in self._targets(session):
                    self._egress_copy(frame, cl_phv, cpres, cg.EGRESS_CLONE, tport, trid, ts, ilen,
                                      plen, pay, trunc, qdepth, outs, work, budget)
        if data is None:
            return
        if rc_fl:
            work.append((data, 0, cg.RECIRC, (rc_fl, rc_vals) if rc_vals is not None else None, 0))
            return
        outs.append(Output(port, out_prio, data, itype, cut))


def peek_bits(frame: bytes, bit: int, width: int) -> int:
    """``width`` bits of ``frame`` from bit offset ``bit`` (bits past the end read as 0)."""
    first, last = bit // 8, (bit + width + 7) // 8
    chunk = frame[first:last]
    if len(chunk) < last - first:
        chunk = chunk + bytes(last - first - len(chunk))
    value = int.from_bytes(chunk, "big")
    return (value >> (last * 8 - bit - width)) & ((1 << width) - 1)
