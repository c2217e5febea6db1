"""One P4Runtime script, run against a switch, written down as a transcript.

``transcript(address, device_id)`` drives a freshly started switch with p4runtime-shell (the
pipeline push with p4c's P4Info and BMv2 JSON, table entries inserted, modified, read back,
deleted, action profile members and groups, counters, default entries, errors the shell
reports) and with raw gRPC stubs for what the shell cannot send (malformed updates, batches,
arbitration, other device ids, registers, Get response types). Every step becomes one
``(probe, answer)`` pair: answers are the read-back entities serialized deterministically,
or the gRPC code with its details, or the per-update (canonical code, message) pairs of a
failed Write. Two targets conform where their transcripts are equal.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import p4runtime_sh.shell as sh
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from p4runtime_sh.p4runtime import P4RuntimeException, P4RuntimeWriteException

from common.p4schema import PROGRAMS, compiled

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


def _shell_error(exc: Exception) -> Answer:
    if isinstance(exc, P4RuntimeWriteException):
        return ("write-error", tuple((code_pb2.Code.Name(e.canonical_code), e.message)
                                     for _, e in exc.errors))
    if isinstance(exc, P4RuntimeException) and isinstance(exc.grpc_error, grpc.RpcError):
        return _rpc_error(exc.grpc_error)
    if isinstance(exc, grpc.RpcError):
        return _rpc_error(exc)
    return ("error", type(exc).__name__)


class Probes:
    def __init__(self, address: str, device_id: int) -> None:
        self.address = address
        self.device_id = device_id
        self.out: list[tuple[str, Answer]] = []
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)

    def record(self, probe: str, step: Callable[[], Answer | None]) -> None:
        try:
            answer = step()
        except (P4RuntimeException, P4RuntimeWriteException, grpc.RpcError) as exc:
            answer = _shell_error(exc)
        self.out.append((probe, answer if answer is not None else ("ok",)))

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


def _stream(address: str, device: int, election: int
            ) -> tuple[grpc.Channel, queue.Queue[Any], Iterator[Any]]:
    ch = grpc.insecure_channel(address)
    out: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()

    def gen() -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        while (item := out.get()) is not None:
            yield item

    responses = p4runtime_pb2_grpc.P4RuntimeStub(ch).StreamChannel(gen())
    req = p4runtime_pb2.StreamMessageRequest()
    req.arbitration.device_id = device
    req.arbitration.election_id.low = election
    out.put(req)
    return ch, out, responses


def _arbitration(address: str, device: int, election: int) -> Answer:
    """The first answer a new stream with ``election`` gets (then the stream is closed)."""
    ch, out, responses = _stream(address, device, election)
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
    p = Probes(address, device_id)
    try:
        _before_pipeline(p)
        sh.setup(device_id=device_id, grpc_addr=address, election_id=(0, ELECTION),
                 config=sh.FwdPipeConfig(str(compiled.p4info_path("mrc_switch")),
                                         str(compiled.json_path("mrc_switch"))),
                 verbose=False)
        try:
            _shell_script(p)
            _raw_errors(p)
            _arbitration_probes(p)
        finally:
            sh.teardown()
    finally:
        p.close()
    return p.out


def _before_pipeline(p: Probes) -> None:
    p.record("read before a pipeline", lambda: p.read(entity(table_entry=route(NET_A, 48))))
    p.record("write before a pipeline", lambda: p.write([upd(Update.INSERT,
                                                            table_entry=route(NET_A, 48))]))
    p.record("capabilities", lambda: ("ok", p.stub.Capabilities(
        p4runtime_pb2.CapabilitiesRequest(), timeout=5).p4runtime_api_version))


def _shell_route(prefix: str, port: int) -> Any:
    te = sh.TableEntry(ROUTE)(action=NEXTHOP)
    te.match["hdr.ipv6.dst_addr"] = prefix
    te.action["port"] = str(port)
    te.action["smac"] = "02:00:00:00:00:99"
    te.action["dmac"] = f"02:00:00:00:00:{port:02x}"
    return te


def _shell_read(table: str) -> Answer:
    return _canon([e.msg() for e in sh.TableEntry(table).read()])


def _shell_script(p: Probes) -> None:
    p.record("get p4info", lambda: ("ok", sh.client.get_p4info() == MRC.to_p4info()))
    p.record("insert route", lambda: _shell_route("2001:db8:2::/48", 3).insert())
    p.record("read route", lambda: _shell_read(ROUTE))
    p.record("modify route", lambda: _shell_route("2001:db8:2::/48", 4).modify())
    p.record("read modified route", lambda: _shell_read(ROUTE))
    p.record("insert duplicate", lambda: _shell_route("2001:db8:2::/48", 5).insert())
    p.record("modify missing", lambda: _shell_route("2001:db8:9::/48", 4).modify())
    p.record("delete route", lambda: _shell_route("2001:db8:2::/48", 4).delete())
    p.record("delete again", lambda: _shell_route("2001:db8:2::/48", 4).delete())
    p.record("read empty table", lambda: _shell_read(ROUTE))

    def wide_dscp() -> None:
        te = sh.TableEntry("MrcIngress.dscp_class")(action="MrcIngress.set_class")
        te.match["meta.dscp"] = "64"
        te.action["class_id"] = "1"
        te.action["priority"] = "1"
        te.action["trimmable"] = "0"
        te.insert()

    p.record("match value too wide", wide_dscp)

    def dscp_entry() -> Answer:
        te = sh.TableEntry("MrcIngress.dscp_class")(action="MrcIngress.set_class")
        te.match["meta.dscp"] = "10"
        te.action["class_id"] = "2"
        te.action["priority"] = "5"
        te.action["trimmable"] = "1"
        te.insert()
        return _shell_read("MrcIngress.dscp_class")

    p.record("exact entry read back", dscp_entry)

    def default_entry() -> Answer:
        te = sh.TableEntry(ROUTE)(action=NEXTHOP, is_default=True)
        te.action["port"] = "7"
        te.action["smac"] = "02:00:00:00:00:07"
        te.action["dmac"] = "02:00:00:00:00:08"
        te.modify()
        return _canon([e.msg() for e in sh.TableEntry(ROUTE)(is_default=True).read()])

    p.record("default entry set and read", default_entry)

    def profile() -> Answer:
        for mid, port in ((101, 1), (102, 2)):
            m = sh.ActionProfileMember("MrcIngress.ecmp_selector")(member_id=mid, action=NEXTHOP)
            m.action["port"] = str(port)
            m.action["smac"] = "02:00:00:00:00:99"
            m.action["dmac"] = f"02:00:00:00:00:0{port}"
            m.insert()
        g = sh.ActionProfileGroup("MrcIngress.ecmp_selector")(group_id=9)
        g.add(101).add(102)
        g.insert()
        te = sh.TableEntry("MrcIngress.ecmp")
        te.match["meta.next_group"] = "9"
        te.group_id = 9
        te.insert()
        members = [e.msg() for e in sh.ActionProfileMember("MrcIngress.ecmp_selector").read()]
        groups = [e.msg() for e in sh.ActionProfileGroup("MrcIngress.ecmp_selector").read()]
        return _canon([*members, *groups, *[e.msg() for e in sh.TableEntry("MrcIngress.ecmp")
                                            .read()]])

    p.record("action profile members, group, indirect entry", profile)

    def member_in_use() -> None:
        sh.ActionProfileMember("MrcIngress.ecmp_selector")(member_id=101).delete()

    p.record("delete a member a group uses", member_in_use)
    p.record("counter cell", lambda: _canon(
        [e.msg() for e in sh.CounterEntry("MrcIngress.drop_reason")(index=5).read()]))


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
