"""One P4Runtime script, run against a switch, written down as a transcript.

``transcript(address, device_id)`` drives a freshly started switch with p4runtime-shell (the
pipeline push with p4c's P4Info and BMv2 JSON, table entries inserted, modified, read back,
deleted, action profile members and groups, counters, default entries, errors the shell
reports; the shell runs in its own environment, tests/p4shell) and with raw gRPC stubs for
what the shell cannot send (malformed updates, batches, arbitration, other device ids,
registers, Get response types). Every step becomes one ``(probe, answer)`` pair: answers are
the read-back entities serialized deterministically, or the gRPC code with its details, or
the per-update (canonical code, message) pairs of a failed Write. Two targets conform where
their transcripts are equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from google.rpc import code_pb2, status_pb2

from common.p4schema import PROGRAMS, compiled
from common.proto.p4.config.v1 import p4info_pb2
from common.proto.p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from tests.p4shell import P4Shell, P4ShellError
from tests.unit.test_p4runtime import stream

MRC = PROGRAMS["mrc_switch"]
ROUTE = "MrcIngress.ipv6_route"
NEXTHOP = "MrcIngress.set_nexthop"
ELECTION = 10
Update = p4runtime_pb2.Update
Answer = tuple[Any, ...]


def _canon(msgs: Any) -> Answer:
    """Read-back entities, each serialized deterministically, in the order returned."""
    return ("ok", tuple(m.SerializeToString(deterministic=True) for m in msgs))


def _rpc_error(exc: grpc.RpcError) -> Answer:
    if exc.code() == grpc.StatusCode.UNKNOWN:
        md = dict(exc.trailing_metadata() or ())  # type: ignore[attr-defined]
        raw = md.get("grpc-status-details-bin")
        if raw is not None:
            status = status_pb2.Status.FromString(raw)
            errors = []
            for detail in status.details:
                err = p4runtime_pb2.Error()
                detail.Unpack(err)
                errors.append((code_pb2.Code.Name(err.canonical_code), err.message))
            return ("write-error", tuple(errors))
    return ("rpc-error", exc.code().name, exc.details())


def _shell_error(exc: P4ShellError) -> Answer:
    if exc.errors:
        return ("write-error", tuple((code_pb2.Code.Name(c), m) for c, m in exc.errors))
    if exc.code:
        return ("rpc-error", exc.code, str(exc).split(": ", 1)[1])
    return ("error", exc.kind)


def _entities(kind: type[Any], hexes: list[str]) -> Answer:
    """Messages the shell returned (hex), parsed with this side's bindings, canonical."""
    return _canon([kind.FromString(bytes.fromhex(h)) for h in hexes])


class Probes:
    def __init__(self, address: str, device_id: int, shell: P4Shell) -> None:
        self.address = address
        self.device_id = device_id
        self.shell = shell
        self.out: list[tuple[str, Answer]] = []
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)

    def record(self, probe: str, step: Callable[[], Answer | None]) -> None:
        try:
            answer = step()
        except P4ShellError as exc:
            answer = _shell_error(exc)
        self.out.append((probe, answer if answer is not None else ("ok",)))

    def sh(self, probe: str, code: str, kind: type[Any] | None = None) -> None:
        """A p4runtime-shell snippet; with ``kind``, ``result`` is a list of hex messages."""
        def step() -> Answer | None:
            result = self.shell.run(code)
            return None if kind is None else _entities(kind, result)
        self.record(probe, step)

    # ---- raw messages ------------------------------------------------------------------
    def write(self, updates: list[p4runtime_pb2.Update], election: int = ELECTION,
              atomicity: int = 0, device: int | None = None) -> Answer:
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id if device is None else device,
                                         atomicity=atomicity)  # type: ignore[arg-type]
        req.election_id.low = election
        req.updates.extend(updates)
        try:
            self.stub.Write(req, timeout=5)
        except grpc.RpcError as exc:
            return _rpc_error(exc)
        return ("ok",)

    def read(self, *entities: p4runtime_pb2.Entity, device: int | None = None) -> Answer:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id if device is None else device)
        req.entities.extend(entities)
        try:
            return _canon([e for r in self.stub.Read(req, timeout=5) for e in r.entities])
        except grpc.RpcError as exc:
            return _rpc_error(exc)

    def close(self) -> None:
        self.channel.close()


def route(prefix: int, plen: int, port: bytes = b"\x01") -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=MRC.id(ROUTE))
    fm = te.match.add(field_id=1)
    fm.lpm.value = prefix.to_bytes(16, "big")
    fm.lpm.prefix_len = plen
    te.action.action.action_id = MRC.id(NEXTHOP)
    te.action.action.params.add(param_id=1, value=port)
    te.action.action.params.add(param_id=2, value=b"\x02\x00\x00\x00\x00\x99")
    te.action.action.params.add(param_id=3, value=b"\x02\x00\x00\x00\x00\x01")
    return te


def upd(kind: int, **entity: Any) -> p4runtime_pb2.Update:
    u = p4runtime_pb2.Update(type=kind)  # type: ignore[arg-type]
    for name, value in entity.items():
        getattr(u.entity, name).CopyFrom(value)
    return u


def entity(**kw: Any) -> p4runtime_pb2.Entity:
    return p4runtime_pb2.Entity(**kw)


NET_A = 0x20010DB8000200000000000000000000  # 2001:db8:2::/48
NET_B = 0x20010DB8000800000000000000000000
NET_C = 0x20010DB8000900000000000000000000


def _arbitration(address: str, device: int, election: int) -> Answer:
    """The first answer a new stream with ``election`` gets (then the stream is closed)."""
    ch, out, responses = stream(address, election, device)
    try:
        arb = next(responses).arbitration
        return ("arbitration", code_pb2.Code.Name(arb.status.code), arb.election_id.low)
    except grpc.RpcError as exc:
        return _rpc_error(exc)
    finally:
        out.put(None)
        ch.close()


def transcript(address: str, device_id: int) -> list[tuple[str, Answer]]:
    """Run every probe against a switch that has no pipeline yet."""
    shell = P4Shell()
    p = Probes(address, device_id, shell)
    try:
        _before_pipeline(p)
        shell.run(f"sh.setup(device_id={device_id}, grpc_addr={address!r}, "
                  f"election_id=(0, {ELECTION}), verbose=False, config=sh.FwdPipeConfig("
                  f"{str(compiled.p4info_path('mrc_switch'))!r}, "
                  f"{str(compiled.json_path('mrc_switch'))!r}))")
        _shell_script(p)
        _raw_errors(p)
        _arbitration_probes(p)
    finally:
        shell.close()
        p.close()
    return p.out


def _before_pipeline(p: Probes) -> None:
    p.record("read before a pipeline", lambda: p.read(entity(table_entry=route(NET_A, 48))))
    p.record("write before a pipeline", lambda: p.write([upd(Update.INSERT,
                                                            table_entry=route(NET_A, 48))]))
    p.record("capabilities", lambda: ("ok", p.stub.Capabilities(
        p4runtime_pb2.CapabilitiesRequest(), timeout=5).p4runtime_api_version))


TE = p4runtime_pb2.TableEntry
ROUTE_AT = "route_entry('2001:db8:{net}::', 48, {port}).{op}()"
SELECTOR = "MrcIngress.ecmp_selector"


def _shell_script(p: Probes) -> None:
    def p4info() -> Answer:
        got = p4info_pb2.P4Info.FromString(bytes.fromhex(
            p.shell.run("result = msg_hex(sh.client.get_p4info())")))
        return ("ok", got == MRC.to_p4info())

    p.record("get p4info", p4info)
    p.sh("insert route", ROUTE_AT.format(net=2, port=3, op="insert"))
    p.sh("read route", f"result = read_hex({ROUTE!r})", TE)
    p.sh("modify route", ROUTE_AT.format(net=2, port=4, op="modify"))
    p.sh("read modified route", f"result = read_hex({ROUTE!r})", TE)
    p.sh("insert duplicate", ROUTE_AT.format(net=2, port=5, op="insert"))
    p.sh("modify missing", ROUTE_AT.format(net=9, port=4, op="modify"))
    p.sh("delete route", ROUTE_AT.format(net=2, port=4, op="delete"))
    p.sh("delete again", ROUTE_AT.format(net=2, port=4, op="delete"))
    p.sh("read empty table", f"result = read_hex({ROUTE!r})", TE)
    dscp = ("te = sh.TableEntry('MrcIngress.dscp_class')(action='MrcIngress.set_class')\n"
            "te.match['meta.dscp'] = '{dscp}'\nte.action['class_id'] = '2'\n"
            "te.action['priority'] = '5'\nte.action['trimmable'] = '1'\nte.insert()\n")
    p.sh("match value too wide", dscp.format(dscp=64))
    p.sh("exact entry read back",
         dscp.format(dscp=10) + "result = read_hex('MrcIngress.dscp_class')", TE)
    p.sh("default entry set and read", (
        f"te = sh.TableEntry({ROUTE!r})(action={NEXTHOP!r}, is_default=True)\n"
        "te.action['port'] = '7'\nte.action['smac'] = '02:00:00:00:00:07'\n"
        "te.action['dmac'] = '02:00:00:00:00:08'\nte.modify()\n"
        f"result = [msg_hex(e.msg()) for e in sh.TableEntry({ROUTE!r})(is_default=True).read()]"
    ), TE)
    p.sh("action profile members, group, indirect entry", (
        "for mid, port in ((101, 1), (102, 2)):\n"
        f"    m = sh.ActionProfileMember({SELECTOR!r})(member_id=mid, action={NEXTHOP!r})\n"
        "    m.action['port'] = str(port)\n    m.action['smac'] = '02:00:00:00:00:99'\n"
        "    m.action['dmac'] = f'02:00:00:00:00:0{port}'\n    m.insert()\n"
        f"g = sh.ActionProfileGroup({SELECTOR!r})(group_id=9)\n"
        "g.add(101).add(102)\ng.insert()\n"
        "te = sh.TableEntry('MrcIngress.ecmp')\nte.match['meta.next_group'] = '9'\n"
        "te.group_id = 9\nte.insert()\n"
    ))
    p.sh("members read back", "result = [msg_hex(e.msg()) for e in "
         f"sh.ActionProfileMember({SELECTOR!r}).read()]", p4runtime_pb2.ActionProfileMember)
    p.sh("group read back", "result = [msg_hex(e.msg()) for e in "
         f"sh.ActionProfileGroup({SELECTOR!r}).read()]", p4runtime_pb2.ActionProfileGroup)
    p.sh("indirect entry read back", "result = read_hex('MrcIngress.ecmp')", TE)
    p.sh("delete a member a group uses",
         f"sh.ActionProfileMember({SELECTOR!r})(member_id=101).delete()")
    p.sh("counter cell", "result = [msg_hex(e.msg()) for e in "
         "sh.CounterEntry('MrcIngress.drop_reason')(index=5).read()]",
         p4runtime_pb2.CounterEntry)


def _raw_errors(p: Probes) -> None:
    lpm_bits = route(NET_A, 16)
    missing = route(NET_B, 48)
    del missing.action.action.params[2]
    bad_action = route(NET_B, 48)
    bad_action.action.action.action_id = MRC.id("MrcIngress.set_class")
    default_only = p4runtime_pb2.TableEntry(table_id=MRC.id("MrcIngress.dscp_class"))
    default_only.match.add(field_id=1).exact.value = b"\x01"
    default_only.action.action.action_id = MRC.id("NoAction")
    unknown = route(NET_B, 48)
    unknown.table_id = 0x02FFFFFF
    insert_default = p4runtime_pb2.TableEntry(table_id=MRC.id(ROUTE), is_default_action=True)
    insert_default.action.CopyFrom(route(NET_B, 48).action)
    indirect_default = p4runtime_pb2.TableEntry(table_id=MRC.id("MrcIngress.ecmp"),
                                                is_default_action=True)
    wide_port = route(NET_B, 48, b"\x02\x00")  # 512 does not fit 9 bits
    for name, te, kind in (
        ("lpm value with bits past the prefix", lpm_bits, Update.INSERT),
        ("missing action parameter", missing, Update.INSERT),
        ("action not in the table", bad_action, Update.INSERT),
        ("default-only action in an entry", default_only, Update.INSERT),
        ("unknown table id", unknown, Update.INSERT),
        ("INSERT of a default entry", insert_default, Update.INSERT),
        ("default entry of an indirect table", indirect_default, Update.MODIFY),
        ("parameter too wide", wide_port, Update.INSERT),
    ):
        p.record(name, lambda te=te, kind=kind: p.write([upd(kind, table_entry=te)]))
    padded = route(NET_C, 48, b"\x00\x07")
    p.record("padded value accepted", lambda: p.write([upd(Update.INSERT, table_entry=padded)]))
    p.record("padded value read back canonical", lambda: p.read(entity(table_entry=route(NET_C, 48))))
    a, b, c = route(NET_A, 48), route(NET_B, 48), route(NET_C, 48)
    p.record("batch, continue on error", lambda: p.write(
        [upd(Update.INSERT, table_entry=a), upd(Update.INSERT, table_entry=c),
         upd(Update.INSERT, table_entry=b)]))
    d = route(NET_A | 1 << 80, 48)
    p.record("batch, rollback on error", lambda: p.write(
        [upd(Update.INSERT, table_entry=d), upd(Update.INSERT, table_entry=a)],
        atomicity=p4runtime_pb2.WriteRequest.ROLLBACK_ON_ERROR))
    p.record("read all tables", lambda: p.read(entity(table_entry=p4runtime_pb2.TableEntry())))
    p.record("write for another device id", lambda: p.write(
        [upd(Update.INSERT, table_entry=route(NET_A, 40))], device=p.device_id + 1))
    reg = p4runtime_pb2.RegisterEntry(register_id=MRC.id("MrcIngress.port_down"))
    reg.index.index = 1
    reg.data.bitstring = b"\x01"
    p.record("register write", lambda: p.write([upd(Update.MODIFY, register_entry=reg)]))
    p.record("register read", lambda: p.read(entity(register_entry=p4runtime_pb2.RegisterEntry(
        register_id=MRC.id("MrcIngress.port_down"), index=p4runtime_pb2.Index(index=1)))))
    meter = p4runtime_pb2.MeterEntry(meter_id=1)
    p.record("meter read", lambda: p.read(entity(meter_entry=meter)))
    Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
    p.record("get cookie only", lambda: ("ok", p.stub.GetForwardingPipelineConfig(
        Get(device_id=p.device_id, response_type=Get.COOKIE_ONLY), timeout=5)
        .config.SerializeToString(deterministic=True)))
    p.record("get p4info and device config", lambda: ("ok", _get_full(p)))


def _get_full(p: Probes) -> tuple[bool, bool]:
    Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
    config = p.stub.GetForwardingPipelineConfig(Get(device_id=p.device_id), timeout=5).config
    return (config.p4info == MRC.to_p4info(),
            config.p4_device_config == compiled.load_device_config("mrc_switch"))


def _arbitration_probes(p: Probes) -> None:
    p.record("second stream, lower election id", lambda: _arbitration(
        p.address, p.device_id, ELECTION - 6))
    p.record("write from a backup", lambda: p.write(
        [upd(Update.INSERT, table_entry=route(NET_A, 40))], election=ELECTION - 6))
    p.record("second stream, same election id", lambda: _arbitration(
        p.address, p.device_id, ELECTION))
    p.record("stream for another device id", lambda: _arbitration(
        p.address, p.device_id + 1, ELECTION + 5))
