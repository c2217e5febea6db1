"""A small typed P4Runtime client: arbitration, pipeline push, writes and reads by name.

Names, ids and widths come from common.p4schema (the same definition the switch target and
the P4 sources use), so callers write ``client.insert("MrcIngress.ipv6_route", {...},
"MrcIngress.set_nexthop", {...})`` and never handle ids or byte strings. Used by the
controller's southbound and by the switch tests.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import grpc
from google.protobuf import struct_pb2
from google.rpc import code_pb2, status_pb2

from common.p4schema import PROGRAMS
from common.p4schema.bytestrings import decode, encode
from common.p4schema.compiled import load_device_config
from common.p4schema.model import Program
from common.proto.p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

CONTROLLER_ELECTION_ID = 1 << 96
"""The election id the mrcnet controller arbitrates with: high word 2**32, low word 0. It is
above p4runtime-shell's default (high 1, low 0) and any small id typed by hand, so a shell
attached with its defaults is a backup (reads work, writes are refused) and the controller
stays primary; a client that means to take over gives a higher id on purpose (p4runtime-shell
``--election-id 4294967296,1``)."""

Match = Mapping[str, int | tuple[int, int]]  # exact value, or (value, prefix_len) for LPM
Params = Mapping[str, int]
SetReq = p4runtime_pb2.SetForwardingPipelineConfigRequest


class P4RuntimeError(Exception):
    """An RPC failed; ``code`` is the gRPC status code."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class UpdateError:
    index: int
    code: int  # google.rpc code
    message: str


class P4RuntimeWriteError(Exception):
    """A Write failed; ``errors`` lists the failed updates (index, google.rpc code, message)."""

    def __init__(self, errors: list[UpdateError]) -> None:
        text = "; ".join(f"#{e.index}: {code_pb2.Code.Name(e.code)} {e.message}" for e in errors)
        super().__init__(f"Write failed: {text}")
        self.errors = errors


@dataclass(frozen=True)
class PortEvent:
    port: int
    up: bool


class EntityWriter:
    """P4Runtime messages built by name (tables, actions, groups, registers) and the writes
    made of them; ``write`` is the one transport-specific step: a gRPC Write in
    ``P4RuntimeClient``, a direct call into a pipeline in the simulator's in-process client."""

    program: Program

    def write(
        self,
        updates: Sequence[p4runtime_pb2.Update],
        atomicity: int = p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR,
    ) -> None:
        raise NotImplementedError

    # ---- building messages by name -----------------------------------------------------------
    # Unknown table, action, parameter or match-field names raise ValueError naming near names
    # (common.p4schema.model.Program).
    def action(self, name: str, params: Params | None = None) -> p4runtime_pb2.Action:
        schema = self.program.action(name)
        params = params or {}
        _known(name, "parameter", params, [p.name for p in schema.params])
        missing = [p.name for p in schema.params if p.name not in params]
        if missing:
            raise ValueError(f"{name}: missing parameter(s) {missing}")
        msg = p4runtime_pb2.Action(action_id=self.program.id(name))
        for i, p in enumerate(schema.params, start=1):
            msg.params.add(param_id=i, value=encode(params[p.name]))
        return msg

    def table_entry(
        self,
        table: str,
        match: Match | None = None,
        action: str | None = None,
        params: Params | None = None,
        *,
        group_id: int | None = None,
        member_id: int | None = None,
        default: bool = False,
    ) -> p4runtime_pb2.TableEntry:
        schema = self.program.table(table)
        te = p4runtime_pb2.TableEntry(table_id=self.program.id(table), is_default_action=default)
        match = match or {}
        _known(table, "match field", match, [mf.name for mf in schema.match_fields])
        for i, mf in enumerate(schema.match_fields, start=1):
            if mf.name not in match:
                continue
            value = match[mf.name]
            if mf.kind not in ("exact", "lpm"):
                raise ValueError(f"{mf.name}: {mf.kind} matches are not supported by this client")
            fm = te.match.add(field_id=i)
            if mf.kind == "lpm":
                if not isinstance(value, tuple):
                    raise ValueError(f"{mf.name} is LPM: give (value, prefix_len)")
                fm.lpm.value = encode(value[0])
                fm.lpm.prefix_len = value[1]
            elif mf.kind == "exact":
                if not isinstance(value, int):
                    raise ValueError(f"{mf.name} is exact: give an int")
                fm.exact.value = encode(value)
        if action is not None:
            te.action.action.CopyFrom(self.action(action, params))
        elif group_id is not None:
            te.action.action_profile_group_id = group_id
        elif member_id is not None:
            te.action.action_profile_member_id = member_id
        return te

    @staticmethod
    def update(kind: int, **entity: object) -> p4runtime_pb2.Update:
        upd = p4runtime_pb2.Update(type=kind)  # type: ignore[arg-type]
        for field, value in entity.items():
            getattr(upd.entity, field).CopyFrom(value)
        return upd

    def insert(self, table: str, match: Match, action: str, params: Params | None = None) -> None:
        te = self.table_entry(table, match, action, params)
        self.write([self.update(p4runtime_pb2.Update.INSERT, table_entry=te)])

    def modify(self, table: str, match: Match, action: str, params: Params | None = None) -> None:
        te = self.table_entry(table, match, action, params)
        self.write([self.update(p4runtime_pb2.Update.MODIFY, table_entry=te)])

    def delete(self, table: str, match: Match) -> None:
        te = self.table_entry(table, match)
        self.write([self.update(p4runtime_pb2.Update.DELETE, table_entry=te)])

    def set_default(self, table: str, action: str, params: Params | None = None) -> None:
        te = self.table_entry(table, None, action, params, default=True)
        self.write([self.update(p4runtime_pb2.Update.MODIFY, table_entry=te)])

    def insert_group(
        self,
        profile: str,
        group_id: int,
        members: Sequence[tuple[int, str, Params]],
        watch_ports: Sequence[int | None] | None = None,
    ) -> None:
        """Insert members (member_id, action, params) and a group of them in one Write."""
        pid = self.program.id(profile)
        updates = []
        for mid, action, params in members:
            m = p4runtime_pb2.ActionProfileMember(action_profile_id=pid, member_id=mid)
            m.action.CopyFrom(self.action(action, params))
            updates.append(self.update(p4runtime_pb2.Update.INSERT, action_profile_member=m))
        g = p4runtime_pb2.ActionProfileGroup(action_profile_id=pid, group_id=group_id)
        for i, (mid, _, _) in enumerate(members):
            gm = g.members.add(member_id=mid, weight=1)
            if watch_ports and watch_ports[i] is not None:
                gm.watch_port = encode(watch_ports[i])  # type: ignore[arg-type]
        updates.append(self.update(p4runtime_pb2.Update.INSERT, action_profile_group=g))
        self.write(updates)

    def write_register(self, name: str, index: int, value: int) -> None:
        r = p4runtime_pb2.RegisterEntry(register_id=self.program.id(name))
        r.index.index = index
        r.data.bitstring = encode(value)
        self.write([self.update(p4runtime_pb2.Update.MODIFY, register_entry=r)])

    # ---- reads -------------------------------------------------------------------------------

class P4RuntimeClient(EntityWriter):
    """One controller session to one switch (device)."""

    def __init__(
        self,
        address: str,
        device_id: int,
        program: str = "mrc_switch",
        election_id: int = 1,
        timeout: float = 5.0,
    ) -> None:
        self.address = address
        self.device_id = device_id
        self.program: Program = PROGRAMS[program]
        self.election_id = election_id
        self.timeout = timeout
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._out: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        self.arbitration: queue.Queue[p4runtime_pb2.MasterArbitrationUpdate | None] = queue.Queue()
        self.port_events: queue.Queue[PortEvent] = queue.Queue()
        self.is_primary = False
        self.stream_error: grpc.RpcError | None = None
        self._stream: grpc.Future | None = None  # type: ignore[type-arg]
        self._thread: threading.Thread | None = None

    # ---- session ---------------------------------------------------------------------------
    def connect(self) -> bool:
        """Open the stream and arbitrate; returns True when this client is primary."""
        grpc.channel_ready_future(self.channel).result(timeout=self.timeout)

        def requests() -> Iterator[p4runtime_pb2.StreamMessageRequest]:
            while True:
                item = self._out.get()
                if item is None:
                    return
                yield item

        self._stream = self.stub.StreamChannel(requests())
        self._thread = threading.Thread(target=self._receive, daemon=True, name="p4rt-client")
        self._thread.start()
        return self.arbitrate(self.election_id)

    def arbitrate(self, election_id: int) -> bool:
        self.election_id = election_id
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = election_id >> 64
        req.arbitration.election_id.low = election_id & ((1 << 64) - 1)
        self._out.put(req)
        try:
            update = self.arbitration.get(timeout=self.timeout)
        except queue.Empty:
            raise P4RuntimeError(
                grpc.StatusCode.DEADLINE_EXCEEDED, "no arbitration answer"
            ) from None
        if update is None:
            err = self.stream_error
            if err is not None:
                raise P4RuntimeError(err.code(), str(err.details()))
            raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE, "stream closed by the switch")
        self.is_primary = update.status.code == code_pb2.OK
        return self.is_primary

    def _receive(self) -> None:
        assert self._stream is not None
        try:
            for msg in self._stream:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    own = (msg.arbitration.election_id.high << 64) | msg.arbitration.election_id.low
                    self.is_primary = (
                        msg.arbitration.status.code == code_pb2.OK and own == self.election_id
                    )
                    self.arbitration.put(msg.arbitration)
                elif kind == "other" and msg.other.Is(struct_pb2.Struct.DESCRIPTOR):
                    body = struct_pb2.Struct()
                    msg.other.Unpack(body)
                    if body.fields["type"].string_value == "port_status":
                        self.port_events.put(
                            PortEvent(
                                int(body.fields["port"].number_value),
                                body.fields["oper_status"].string_value == "UP",
                            )
                        )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.stream_error = exc
        finally:
            self.arbitration.put(None)

    def close(self) -> None:
        self._out.put(None)
        if self._stream is not None:
            self._stream.cancel()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout)
        self.channel.close()

    def __enter__(self) -> P4RuntimeClient:
        if self._stream is None:  # ``with`` on a client that already connected keeps its stream
            self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- pipeline --------------------------------------------------------------------------
    def _election(self, msg: object) -> None:
        eid = msg.election_id  # type: ignore[attr-defined]
        eid.high = self.election_id >> 64
        eid.low = self.election_id & ((1 << 64) - 1)

    def push_pipeline(
        self,
        action: SetReq.Action = SetReq.VERIFY_AND_COMMIT,
        cookie: int = 0,
        device_config: bytes = b"",
    ) -> None:
        """SetForwardingPipelineConfig with p4c's P4Info and ``device_config`` as
        ``p4_device_config``: empty for the embedded target (it runs its own build of the
        program), the program's BMv2 JSON for simple_switch_grpc (``bmv2_device_config``)."""
        req = SetReq(device_id=self.device_id, action=action)
        self._election(req)
        req.config.p4info.CopyFrom(self.program.to_p4info())
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        self._call(self.stub.SetForwardingPipelineConfig, req)

    def bmv2_device_config(self) -> bytes:
        """p4c's BMv2 JSON of this client's program (``p4/<program>.json``), what BMv2 loads."""
        return load_device_config(self.program.name)

    def get_pipeline(self) -> p4runtime_pb2.ForwardingPipelineConfig:
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=self.device_id)
        return self._call(self.stub.GetForwardingPipelineConfig, req).config

    def _call(self, method: object, req: object) -> p4runtime_pb2.ReadResponse:
        try:
            return method(req, timeout=self.timeout)  # type: ignore[operator, no-any-return]
        except grpc.RpcError as exc:
            raise P4RuntimeError(exc.code(), str(exc.details())) from None

    # ---- writes ------------------------------------------------------------------------------
    def write(
        self,
        updates: Sequence[p4runtime_pb2.Update],
        atomicity: int = p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR,
    ) -> None:
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id, atomicity=atomicity)  # type: ignore[arg-type]
        self._election(req)
        req.updates.extend(updates)
        try:
            self.stub.Write(req, timeout=self.timeout)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNKNOWN:
                raise P4RuntimeError(exc.code(), str(exc.details())) from None
            raise P4RuntimeWriteError(_update_errors(exc)) from None

    def read(self, entities: Sequence[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        try:
            return [e for resp in self.stub.Read(req, timeout=self.timeout) for e in resp.entities]
        except grpc.RpcError as exc:
            raise P4RuntimeError(exc.code(), str(exc.details())) from None

    def read_table(self, table: str) -> list[p4runtime_pb2.TableEntry]:
        te = p4runtime_pb2.TableEntry(table_id=self.program.id(table))
        return [e.table_entry for e in self.read([p4runtime_pb2.Entity(table_entry=te)])]

    def read_counter(self, name: str, index: int | None = None) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes); all cells when ``index`` is None."""
        c = p4runtime_pb2.CounterEntry(counter_id=self.program.id(name))
        if index is not None:
            c.index.index = index
        found = self.read([p4runtime_pb2.Entity(counter_entry=c)])
        return {
            e.counter_entry.index.index: (
                e.counter_entry.data.packet_count,
                e.counter_entry.data.byte_count,
            )
            for e in found
        }

    def read_register(self, name: str, index: int) -> int:
        r = p4runtime_pb2.RegisterEntry(register_id=self.program.id(name))
        r.index.index = index
        found = self.read([p4runtime_pb2.Entity(register_entry=r)])
        return decode(found[0].register_entry.data.bitstring)


def _known(owner: str, kind: str, given: Mapping[str, object], declared: list[str]) -> None:
    """ValueError naming the given names ``owner`` does not declare, and the ones it does."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise ValueError(f"{owner} has no {kind}(s) {unknown}; its {kind}s are {declared}")


def _update_errors(exc: grpc.RpcError) -> list[UpdateError]:
    errors: list[UpdateError] = []
    for key, value in exc.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status()
        status.ParseFromString(value)
        for i, detail in enumerate(status.details):
            err = p4runtime_pb2.Error()
            detail.Unpack(err)
            if err.canonical_code != code_pb2.OK:
                errors.append(UpdateError(i, err.canonical_code, err.message))
    if not errors:
        errors.append(UpdateError(-1, code_pb2.UNKNOWN, str(exc.details())))
    return errors
