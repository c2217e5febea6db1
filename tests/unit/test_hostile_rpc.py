"""Hostile requests against running gRPC servers, every RPC: hypothesis-generated P4Runtime
requests to the embedded switch's P4Runtime server, and controller requests to every RPC of
its three services. Each answer is OK or a clear error (never an unhandled exception:
gRPC UNKNOWN without P4Runtime details, or INTERNAL), the server keeps serving, and a request
that was refused changed nothing (the state read before and after is the same).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.p4runtime_client import P4RuntimeClient
from common.p4schema import PROGRAMS
from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from common.proto.p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from controller.server import ControllerServer, ServerConfig, start
from switch.p4runtime import P4RuntimeServer, start_server
from switch.pipeline import Pipeline
from tests.proto_strategies import messages

MRC = PROGRAMS["mrc_switch"]
DEVICE = 5
PRIMARY = 10
FUZZ = settings(max_examples=int(os.environ.get("MRCNET_FUZZ_EXAMPLES", "25")), deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
REFUSALS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.FAILED_PRECONDITION,
            grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.RESOURCE_EXHAUSTED,
            grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED,
            grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED}


# ---------------------------------------------------------------------------- P4Runtime
P4_HINTS: dict[str, list[Any]] = {
    "device_id": [DEVICE],
    "low": [PRIMARY, PRIMARY, 0, 1],
    "high": [0],
    "table_id": [MRC.id(t.name) for t in MRC.tables],
    "action_id": [MRC.id(a.name) for a in MRC.actions],
    "counter_id": [MRC.id(c.name) for c in MRC.counters],
    "register_id": [MRC.id(r.name) for r in MRC.registers],
    "action_profile_id": [MRC.id(p.name) for p in MRC.action_profiles],
    "field_id": [1, 2, 3],
    "param_id": [1, 2, 3],
    "member_id": [1, 2],
    "group_id": [1, 2],
    "prefix_len": [0, 64, 128, 129],
}


@pytest.fixture
def p4server() -> Iterator[tuple[P4RuntimeServer, str, P4RuntimeClient]]:
    server = start_server(Pipeline(), "127.0.0.1:0", DEVICE)
    addr = f"127.0.0.1:{server.port}"
    primary = P4RuntimeClient(addr, DEVICE, election_id=PRIMARY)
    try:
        assert primary.connect()
        primary.push_pipeline()
        for i in range(3):  # some state a refused request must leave alone
            primary.insert("MrcIngress.ipv6_route",
                           {"hdr.ipv6.dst_addr": ((0xFD00 << 112) | i, 128)},
                           "MrcIngress.set_nexthop", {"port": i + 1, "smac": 1, "dmac": 2})
        yield server, addr, primary
    finally:
        primary.close()
        server.stop()


def _p4_state(stub: p4runtime_pb2_grpc.P4RuntimeStub) -> list[bytes]:
    """Every table entry, action profile member and group, and register cell (sorted)."""
    req = p4runtime_pb2.ReadRequest(device_id=DEVICE)
    req.entities.add().table_entry.SetInParent()
    req.entities.add().action_profile_member.SetInParent()
    req.entities.add().action_profile_group.SetInParent()
    for reg in MRC.registers:
        req.entities.add().register_entry.register_id = MRC.id(reg.name)
    out = []
    for resp in stub.Read(req, timeout=10):
        out += [e.SerializeToString(deterministic=True) for e in resp.entities]
    return sorted(out)


def _write_outcome(err: grpc.RpcError) -> list[int]:
    """Per-update codes of a refused Write (P4Runtime: UNKNOWN + p4.v1.Error details)."""
    if err.code() != grpc.StatusCode.UNKNOWN:
        assert err.code() in REFUSALS, (err.code(), err.details())
        return []
    md = dict(err.trailing_metadata() or ())
    raw = md.get("grpc-status-details-bin")
    assert raw, f"UNKNOWN without P4Runtime details: {err.details()}"  # an unhandled error
    status = status_pb2.Status.FromString(raw)
    codes = []
    for any_msg in status.details:
        e = p4runtime_pb2.Error()
        assert any_msg.Unpack(e)
        assert e.canonical_code != code_pb2.INTERNAL, e.message
        codes.append(e.canonical_code)
    return codes


def test_fuzzed_p4runtime_writes_are_refused_cleanly_and_change_nothing(
        p4server: tuple[P4RuntimeServer, str, P4RuntimeClient]) -> None:
    _server, addr, _primary = p4server
    channel = grpc.insecure_channel(addr)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    state = [_p4_state(stub)]

    @FUZZ
    @given(req=messages(p4runtime_pb2.WriteRequest, depth=6, hints=P4_HINTS))
    def fuzz(req: p4runtime_pb2.WriteRequest) -> None:
        try:
            stub.Write(req, timeout=10)
            state[0] = _p4_state(stub)  # accepted: the new state is the baseline
        except grpc.RpcError as err:
            codes = _write_outcome(err)
            after = _p4_state(stub)
            if any(c == code_pb2.OK for c in codes):  # CONTINUE_ON_ERROR: some applied
                state[0] = after
            else:
                assert after == state[0], "a refused Write changed the switch's state"

    try:
        fuzz()
    finally:
        channel.close()


def test_fuzzed_p4runtime_reads_config_capabilities_and_streams(
        p4server: tuple[P4RuntimeServer, str, P4RuntimeClient]) -> None:
    _server, addr, primary = p4server
    channel = grpc.insecure_channel(addr)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    before = _p4_state(stub)

    def call(fn: Any, req: Any) -> None:
        try:
            out = fn(req, timeout=10)
            if hasattr(out, "__iter__") and not hasattr(out, "DESCRIPTOR"):
                list(out)
        except grpc.RpcError as err:
            assert err.code() in REFUSALS, (err.code(), err.details())

    @FUZZ
    @given(read=messages(p4runtime_pb2.ReadRequest, depth=6, hints=P4_HINTS),
           get=messages(p4runtime_pb2.GetForwardingPipelineConfigRequest, hints=P4_HINTS),
           caps=messages(p4runtime_pb2.CapabilitiesRequest),
           stream=st.lists(messages(p4runtime_pb2.StreamMessageRequest, depth=5, hints={
               **P4_HINTS, "low": [1, 2, 3, 5]}), max_size=4))
    def fuzz(read: Any, get: Any, caps: Any, stream: list[Any]) -> None:
        call(stub.Read, read)
        call(stub.GetForwardingPipelineConfig, get)
        call(stub.Capabilities, caps)
        # a stream of random messages from a second client: answered or refused, closed
        answers = stub.StreamChannel(iter(stream), timeout=5)
        try:
            for _ in answers:
                pass
        except grpc.RpcError as err:
            assert err.code() in REFUSALS | {grpc.StatusCode.CANCELLED}, (err.code(),
                                                                           err.details())

    try:
        fuzz()
        # SetForwardingPipelineConfig with random configs from a client that is not primary
        # (the pipeline must not change) and from the primary's election id
        @FUZZ
        @given(req=messages(p4runtime_pb2.SetForwardingPipelineConfigRequest, depth=3,
                            hints={**P4_HINTS, "low": [1, 3]}))
        def fuzz_config(req: Any) -> None:
            call(stub.SetForwardingPipelineConfig, req)

        fuzz_config()
        assert _p4_state(stub) == before
        # the primary still is, and still programs the switch
        assert primary.is_primary
        primary.insert("MrcIngress.ipv6_route", {"hdr.ipv6.dst_addr": ((0xFD01 << 112), 128)},
                       "MrcIngress.set_nexthop", {"port": 9, "smac": 1, "dmac": 2})
        assert len(_p4_state(stub)) == len(before) + 1
    finally:
        channel.close()


# ---------------------------------------------------------------------------- controller
GIDS = ["fd00:6d72:6300::1", "fd00:6d72:6300:1::1", "fd00:6d72:6300::2", "fd00::dead"]
CTL_HINTS: dict[str, list[Any]] = {
    "profile_id": [1, 2, 3, 17, 65], "id": [1, 2], "fmt_profile_id": [1, 2],
    "host": ["h0", "h1", "h9", ""], "port": [1, 2, 3], "agent_id": ["", "a1", "x"],
    "sgid": GIDS, "dgid": GIDS, "gid": GIDS, "link": ["0", "3", "p0-leaf0:3", "99", "x"],
    "src": ["h0:0", "h1:1", "g0:0"], "dst": ["h1:0", "g1:1"], "session": ["s", ""],
    "rsp_timeout_ns": [1, 1_000_000, 0, 61 * 10**9], "barrier_timeout_s": [0.5, 1.0],
    "value": [0x100, 0x80000100, 0], "ev_count": [2, 0, 5000], "req_id": [1, 2, 70000],
    "queue_depth": [1, 2, 0],
}


@pytest.fixture
def ctlserver(tmp_path: Path) -> Iterator[ControllerServer]:
    srv = start(ServerConfig(unix=str(tmp_path / "ctl.sock"), topology="clos-2p",
                             max_workers=16))
    yield srv
    srv.stop()


def _ctl_state(srv: ControllerServer) -> tuple[Any, ...]:
    c = srv.controller
    with c.lock:
        store = c.store
        fmt = sorted((k, v.SerializeToString(deterministic=True)) for k, v in store._fmt.items())
        cc = sorted((k, v.SerializeToString(deterministic=True)) for k, v in store._cc.items())
        ev = sorted((k, repr(vars(v))) for k, v in store._ev.items())
        links = c.fabric.view(set()).SerializeToString(deterministic=True) if c.fabric else b""
        circuits = c.circuits().SerializeToString(deterministic=True) if c.fabric else b""
        return (store.generation, fmt, cc, ev, links, circuits, len(c.agents.all()),
                dict(c._admin))


SERVICES = [(pb_grpc.MrcCtlStub, pb.DESCRIPTOR.services_by_name["MrcCtl"]),
            (pb_grpc.MrcAgentStub, pb.DESCRIPTOR.services_by_name["MrcAgent"]),
            (pb_grpc.MrcFabricStub, pb.DESCRIPTOR.services_by_name["MrcFabric"])]
RPCS = [(stub, m.name, m.input_type._concrete_class, m.client_streaming, m.server_streaming)
        for stub, svc in SERVICES for m in svc.methods]


@pytest.mark.parametrize(("stub_cls", "name", "req_cls", "cstream", "sstream"), RPCS,
                         ids=[r[1] for r in RPCS])
def test_fuzzed_controller_requests_are_refused_cleanly_and_change_nothing(
        ctlserver: ControllerServer, stub_cls: Any, name: str, req_cls: Any, cstream: bool,
        sstream: bool) -> None:
    channel = grpc.insecure_channel(ctlserver.address)
    stub = stub_cls(channel)
    fn = getattr(stub, name)
    state = [_ctl_state(ctlserver)]

    @FUZZ
    @given(reqs=st.lists(messages(req_cls, depth=4, hints=CTL_HINTS), min_size=1,
                         max_size=3 if cstream else 1))
    def fuzz(reqs: list[Any]) -> None:
        try:
            wait = 0.3 if sstream else 2.0  # an open stream ends at the deadline
            out = fn(iter(reqs), timeout=wait) if cstream else fn(reqs[0], timeout=wait)
            if sstream or cstream:
                for _ in itertools.islice(out, 5):
                    pass
                out.cancel()
            state[0] = _ctl_state(ctlserver)  # accepted: the new baseline
        except grpc.RpcError as err:
            code = err.code()
            assert code in REFUSALS | {grpc.StatusCode.CANCELLED}, (name, code, err.details())
            if code not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
                assert _ctl_state(ctlserver) == state[0], f"a refused {name} changed state"
            else:
                state[0] = _ctl_state(ctlserver)

    try:
        fuzz()
    finally:
        channel.close()
    # still serving
    ver = pb_grpc.MrcCtlStub(grpc.insecure_channel(ctlserver.address)).QueryVersion(
        pb.QueryVersionRequest(), timeout=5)
    assert ver.current_version
