"""P4Runtime conformance of the embedded target, driven by p4runtime-shell and raw gRPC stubs.

Expected codes and messages are those of simple_switch_grpc's P4Runtime server (p4lang/PI,
proto/frontend/src/device_mgr.cpp and proto/server/pi_server.cpp); these tests run the
embedded target only.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2, status_pb2

from common.p4runtime_client import P4RuntimeClient, P4RuntimeError, P4RuntimeWriteError
from common.p4schema import PROGRAMS, compiled
from common.p4schema.bytestrings import encode
from common.proto.p4.config.v1 import p4info_pb2
from common.proto.p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from switch.p4runtime import P4RuntimeServer, start_server
from switch.pipeline import Pipeline
from tests.p4shell import P4Shell, P4ShellError
from tests.unit.pipeline_helpers import empty_queues, frame, ip6

MRC = PROGRAMS["mrc_switch"]
DEVICE = 3
ROUTE = "MrcIngress.ipv6_route"
NEXTHOP = "MrcIngress.set_nexthop"
Update = p4runtime_pb2.Update


@pytest.fixture
def switch() -> Iterator[tuple[Pipeline, P4RuntimeServer, str]]:
    pipe = Pipeline()
    server = start_server(pipe, "127.0.0.1:0", DEVICE)
    try:
        yield pipe, server, f"127.0.0.1:{server.port}"
    finally:
        server.stop()


@pytest.fixture
def p4sh() -> Iterator[P4Shell]:
    shell = P4Shell()
    try:
        yield shell
    finally:
        shell.close()


@pytest.fixture
def shell(switch: tuple[Pipeline, P4RuntimeServer, str], p4sh: P4Shell) -> Pipeline:
    """p4runtime-shell connected as primary (election id 10) with the pipeline pushed."""
    pipe, _, addr = switch
    p4sh.setup(addr, DEVICE, election_id=(0, 10),
               p4info=str(compiled.p4info_path("mrc_switch")))
    return pipe


def read_routes(p4sh: P4Shell) -> list[p4runtime_pb2.TableEntry]:
    """The route table as p4runtime-shell reads it."""
    return [p4runtime_pb2.TableEntry.FromString(bytes.fromhex(h))
            for h in p4sh.run(f"result = read_hex({ROUTE!r})")]


def route(p4sh: P4Shell, op: str, prefix: str, plen: int, port: int) -> None:
    """insert / modify / delete a route through p4runtime-shell."""
    p4sh.run(f"route_entry({prefix!r}, {plen}, {port}).{op}()")


def raw_route(port: bytes = b"\x01", table_id: int | None = None) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=table_id or MRC.id(ROUTE))
    fm = te.match.add(field_id=1)
    fm.lpm.value = ip6("2001:db8:7::").to_bytes(16, "big")
    fm.lpm.prefix_len = 48
    te.action.action.action_id = MRC.id(NEXTHOP)
    te.action.action.params.add(param_id=1, value=port)
    te.action.action.params.add(param_id=2, value=b"\x02\x00\x00\x00\x00\x99")
    te.action.action.params.add(param_id=3, value=b"\x02\x00\x00\x00\x00\x01")
    return te


def raw_write(addr: str, updates: list[p4runtime_pb2.Update], election: int = 10,
              atomicity: int = 0) -> grpc.RpcError | None:
    with grpc.insecure_channel(addr) as ch:
        req = p4runtime_pb2.WriteRequest(device_id=DEVICE, atomicity=atomicity)  # type: ignore[arg-type]
        req.election_id.low = election
        req.updates.extend(updates)
        try:
            p4runtime_pb2_grpc.P4RuntimeStub(ch).Write(req, timeout=5)
        except grpc.RpcError as exc:
            return exc
    return None


def update_codes(exc: grpc.RpcError) -> list[tuple[int, str]]:
    """(canonical_code, message) of every p4.v1.Error in grpc-status-details-bin."""
    assert exc.code() == grpc.StatusCode.UNKNOWN
    md = dict(exc.trailing_metadata())  # type: ignore[attr-defined]
    status = status_pb2.Status.FromString(md["grpc-status-details-bin"])
    out = []
    for detail in status.details:
        err = p4runtime_pb2.Error()
        assert detail.Unpack(err)
        out.append((err.canonical_code, err.message))
    return out


def ins(te: p4runtime_pb2.TableEntry, kind: int = Update.INSERT) -> p4runtime_pb2.Update:
    upd = p4runtime_pb2.Update(type=kind)  # type: ignore[arg-type]
    upd.entity.table_entry.CopyFrom(te)
    return upd


# ---- pipeline config ----------------------------------------------------------------------


def test_pipeline_push_with_p4runtime_shell_commits_the_program(
    shell: Pipeline, p4sh: P4Shell
) -> None:
    assert shell.program is MRC
    got = p4info_pb2.P4Info.FromString(
        bytes.fromhex(p4sh.run("result = msg_hex(sh.client.get_p4info())")))
    assert got == MRC.to_p4info()
    assert p4sh.run("result = sh.client.api_version()") == "1.4.1"


def test_p4info_that_does_not_match_a_builtin_program_is_rejected(
    switch: tuple[Pipeline, P4RuntimeServer, str],
) -> None:
    pipe, _, addr = switch
    with P4RuntimeClient(addr, DEVICE, election_id=5) as client:
        bad = MRC.to_p4info()
        bad.tables[0].match_fields[0].bitwidth += 1
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=DEVICE, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        )
        req.election_id.low = 5
        req.config.p4info.CopyFrom(bad)
        with pytest.raises(grpc.RpcError) as info:
            client.stub.SetForwardingPipelineConfig(req, timeout=5)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "does not match any program built into this target" in info.value.details()
        assert bad.tables[0].preamble.name in info.value.details()
        assert pipe.program is None
        # before any pipeline: Write, Read and Get answer FAILED_PRECONDITION (as PI)
        for call in (lambda: client.insert(ROUTE, {"hdr.ipv6.dst_addr": (ip6("2001::"), 16)},
                                           NEXTHOP, {"port": 1, "smac": 1, "dmac": 2}),
                     lambda: client.read_table(ROUTE), client.get_pipeline):
            with pytest.raises(P4RuntimeError) as err:
                call()
            assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert err.value.message == "No forwarding pipeline config set for this device"


def test_verify_save_commit_and_reconcile_keep_or_reset_state(
    switch: tuple[Pipeline, P4RuntimeServer, str],
) -> None:
    pipe, _, addr = switch
    Req = p4runtime_pb2.SetForwardingPipelineConfigRequest
    with P4RuntimeClient(addr, DEVICE, election_id=5) as client:
        client.push_pipeline(Req.VERIFY)
        assert pipe.program is None
        client.push_pipeline(Req.VERIFY_AND_SAVE)
        assert pipe.program is None
        client.push_pipeline(Req.COMMIT)
        assert pipe.program is MRC
        match = {"hdr.ipv6.dst_addr": (ip6("2001:db8:2::"), 48)}
        client.insert(ROUTE, match, NEXTHOP, {"port": 2, "smac": 1, "dmac": 2})
        client.push_pipeline(Req.RECONCILE_AND_COMMIT, cookie=77)
        assert len(client.read_table(ROUTE)) == 1
        assert client.get_pipeline().cookie.cookie == 77
        client.push_pipeline(Req.VERIFY_AND_COMMIT)
        assert client.read_table(ROUTE) == []
        with P4RuntimeClient(addr, DEVICE, program="ocs", election_id=6) as ocs:
            ocs.push_pipeline()
        assert pipe.program is PROGRAMS["ocs"]


def _reordered(info: p4info_pb2.P4Info) -> p4info_pb2.P4Info:
    """The same program written another way: every object list and every table's fields in
    reverse order, documentation added, an empty type_info, more pkg_info."""
    out = p4info_pb2.P4Info()
    out.CopyFrom(info)
    for kind in ("tables", "actions", "action_profiles", "counters", "registers"):
        objs = [type(o)() for o in getattr(out, kind)]
        for dst, src in zip(objs, getattr(out, kind)):
            dst.CopyFrom(src)
        out.ClearField(kind)
        getattr(out, kind).extend(reversed(objs))
    for table in out.tables:
        refs = list(table.action_refs)[::-1]
        copies = [p4info_pb2.ActionRef() for _ in refs]
        for dst, src in zip(copies, refs):
            dst.CopyFrom(src)
        table.ClearField("action_refs")
        table.action_refs.extend(copies)
        table.preamble.doc.brief = "documentation only"
    out.actions[0].preamble.annotations.append('@name("x")')
    out.pkg_info.name = "another build"
    out.type_info.SetInParent()
    return out


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_a_p4info_of_the_same_program_in_another_order_is_accepted(
    switch: tuple[Pipeline, P4RuntimeServer, str], program: str
) -> None:
    pipe, _, addr = switch
    pushed = _reordered(PROGRAMS[program].to_p4info())
    assert pushed != PROGRAMS[program].to_p4info()
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
        device_id=DEVICE, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
    )
    req.election_id.low = 5
    req.config.p4info.CopyFrom(pushed)
    with P4RuntimeClient(addr, DEVICE, program=program, election_id=5) as client:
        # the schema's rendering: objects in id order (p4c's file: declaration order, which
        # differs for mrc_switch)
        rendered = PROGRAMS[program].render_p4info()
        assert program == "ocs" or rendered != PROGRAMS[program].to_p4info()
        req.config.p4info.CopyFrom(rendered)
        client.stub.SetForwardingPipelineConfig(req, timeout=5)
        assert pipe.program is PROGRAMS[program]
        req.config.p4info.CopyFrom(pushed)
        client.stub.SetForwardingPipelineConfig(req, timeout=5)
        assert pipe.program is PROGRAMS[program]
        assert client.get_pipeline().p4info == pushed  # returned as pushed
        # content still counts: the same reordered P4Info with one width changed is refused
        for change in ("table size", "param width"):
            bad = _reordered(PROGRAMS[program].to_p4info())
            if change == "table size":
                bad.tables[-1].size += 1
                what = f"table '{bad.tables[-1].preamble.name}' differs"
            else:
                action = next(a for a in bad.actions if a.params)
                action.params[-1].bitwidth += 1
                what = f"action '{action.preamble.name}' differs"
            req.config.p4info.CopyFrom(bad)
            with pytest.raises(grpc.RpcError) as info:
                client.stub.SetForwardingPipelineConfig(req, timeout=5)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert what in info.value.details()
            assert pipe.program is PROGRAMS[program]  # the running program is kept


# ---- table entries ------------------------------------------------------------------------


def test_insert_read_modify_delete_with_p4runtime_shell(shell: Pipeline, p4sh: P4Shell) -> None:
    route(p4sh, "insert", "2001:db8:2::", 48, 3)
    read = read_routes(p4sh)
    assert len(read) == 1
    msg = read[0]
    assert msg.match[0].lpm.prefix_len == 48
    assert msg.match[0].lpm.value == ip6("2001:db8:2::").to_bytes(16, "big").lstrip(b"\x00")
    params = {p.param_id: p.value for p in msg.action.action.params}
    assert params == {1: b"\x03", 2: bytes.fromhex("020000000099"), 3: bytes.fromhex("020000000003")}
    assert shell.process(frame(dst="2001:db8:2::9"), 1, 0.0, empty_queues)[0].port == 3

    route(p4sh, "modify", "2001:db8:2::", 48, 4)
    (msg,) = read_routes(p4sh)
    assert msg.action.action.params[0].value == b"\x04"
    assert shell.process(frame(dst="2001:db8:2::9"), 1, 0.0, empty_queues)[0].port == 4

    with pytest.raises(P4ShellError) as dup:
        route(p4sh, "insert", "2001:db8:2::", 48, 5)
    assert dup.value.errors == [
        (code_pb2.ALREADY_EXISTS, "Match entry exists, use MODIFY if you wish to change action")
    ]

    route(p4sh, "delete", "2001:db8:2::", 48, 4)
    assert read_routes(p4sh) == []
    with pytest.raises(P4ShellError) as gone:
        route(p4sh, "delete", "2001:db8:2::", 48, 4)
    assert gone.value.errors == [(code_pb2.NOT_FOUND, "Cannot find match entry")]
    with pytest.raises(P4ShellError) as modify_missing:
        route(p4sh, "modify", "2001:db8:9::", 48, 4)
    assert modify_missing.value.errors[0][0] == code_pb2.NOT_FOUND


def test_wrong_match_width_and_unknown_table(
    shell: Pipeline, p4sh: P4Shell, switch: tuple[Pipeline, P4RuntimeServer, str]
) -> None:
    addr = switch[2]
    # through p4runtime-shell: the shell sends the too-wide value, the server refuses it
    with pytest.raises(P4ShellError) as shell_wide:
        p4sh.run("te = sh.TableEntry('MrcIngress.dscp_class')(action='MrcIngress.set_class')\n"
                 "te.match['meta.dscp'] = '64'\n"
                 "te.action['class_id'] = '1'\n"
                 "te.action['priority'] = '1'\n"
                 "te.action['trimmable'] = '0'\n"
                 "te.insert()")
    assert shell_wide.value.errors == [
        (code_pb2.INVALID_ARGUMENT, "Bytestring provided does not fit within 6 bits")
    ]
    # an unknown table name never leaves the shell (it has no id for it)
    with pytest.raises(P4ShellError, match="nosuch"):
        p4sh.run("sh.TableEntry('MrcIngress.nosuch')")
    # the server gives simple_switch_grpc's answers to raw requests
    wide = p4runtime_pb2.TableEntry(table_id=MRC.id("MrcIngress.dscp_class"))
    wide.match.add(field_id=1).exact.value = b"\x40"  # 64 does not fit 6 bits
    wide.action.action.action_id = MRC.id("MrcIngress.set_class")
    for i in (1, 2, 3):
        wide.action.action.params.add(param_id=i, value=b"\x01")
    exc = raw_write(addr, [ins(wide)])
    assert exc is not None
    assert update_codes(exc) == [(code_pb2.INVALID_ARGUMENT,
                                  "Bytestring provided does not fit within 6 bits")]
    exc = raw_write(addr, [ins(raw_route(port=b"\x02\x00"))])  # port 512 > 9 bits
    assert exc is not None and update_codes(exc)[0][0] == code_pb2.INVALID_ARGUMENT
    exc = raw_write(addr, [ins(raw_route(table_id=0x02FFFFFF))])
    assert exc is not None
    assert update_codes(exc) == [(code_pb2.INVALID_ARGUMENT, "Invalid P4 id")]
    assert read_routes(p4sh) == []


def test_padded_byte_strings_are_accepted_and_read_back_canonical(
    shell: Pipeline, p4sh: P4Shell, switch: tuple[Pipeline, P4RuntimeServer, str],
) -> None:
    assert raw_write(switch[2], [ins(raw_route(port=b"\x00\x07"))]) is None
    (msg,) = read_routes(p4sh)
    assert msg.action.action.params[0].value == b"\x07"


def test_other_validation_errors_match_pi(shell: Pipeline, switch: tuple[Pipeline, P4RuntimeServer, str]) -> None:
    addr = switch[2]
    lpm_bits = raw_route()
    lpm_bits.match[0].lpm.prefix_len = 16  # value has bits beyond /16
    lpm_zero = raw_route()
    lpm_zero.match[0].lpm.prefix_len = 0
    missing = raw_route()
    del missing.action.action.params[2]
    bad_action = raw_route()
    bad_action.action.action.action_id = MRC.id("MrcIngress.set_class")
    default_only = p4runtime_pb2.TableEntry(table_id=MRC.id("MrcIngress.dscp_class"))
    default_only.match.add(field_id=1).exact.value = b"\x01"
    default_only.action.action.action_id = MRC.id("NoAction")
    cases = [
        (lpm_bits, code_pb2.INVALID_ARGUMENT, "Invalid LPM value, incorrect number of trailing zeros"),
        (lpm_zero, code_pb2.INVALID_ARGUMENT, None),
        (missing, code_pb2.INVALID_ARGUMENT, None),
        (bad_action, code_pb2.INVALID_ARGUMENT, "Invalid action for table"),
        (default_only, code_pb2.PERMISSION_DENIED, "Cannot use DEFAULT_ONLY action in table entry"),
    ]
    for te, code, message in cases:
        exc = raw_write(addr, [ins(te)])
        assert exc is not None
        ((got_code, got_message),) = update_codes(exc)
        assert got_code == code, (te, got_message)
        if message:
            assert got_message == message


def test_default_action_modify_read_and_invalid_uses(shell: Pipeline, switch: tuple[Pipeline, P4RuntimeServer, str]) -> None:
    addr = switch[2]
    default = p4runtime_pb2.TableEntry(table_id=MRC.id(ROUTE), is_default_action=True)
    default.action.CopyFrom(raw_route().action)
    assert raw_write(addr, [ins(default, Update.MODIFY)]) is None
    assert shell.process(frame(dst="2001:ffff::1"), 1, 0.0, empty_queues)[0].port == 1
    with grpc.insecure_channel(addr) as ch:
        req = p4runtime_pb2.ReadRequest(device_id=DEVICE)
        req.entities.add().table_entry.CopyFrom(
            p4runtime_pb2.TableEntry(table_id=MRC.id(ROUTE), is_default_action=True))
        (resp,) = list(p4runtime_pb2_grpc.P4RuntimeStub(ch).Read(req, timeout=5))
        got = resp.entities[0].table_entry
        assert got.is_default_action and got.action.action.params[0].value == b"\x01"
    exc = raw_write(addr, [ins(default, Update.INSERT)])
    assert exc is not None
    assert update_codes(exc) == [(code_pb2.INVALID_ARGUMENT, "Cannot use INSERT for default entry")]
    reset = p4runtime_pb2.TableEntry(table_id=MRC.id(ROUTE), is_default_action=True)
    assert raw_write(addr, [ins(reset, Update.MODIFY)]) is None  # back to drop()
    assert shell.process(frame(dst="2001:ffff::1"), 1, 0.0, empty_queues) == []
    indirect = p4runtime_pb2.TableEntry(table_id=MRC.id("MrcIngress.ecmp"), is_default_action=True)
    exc = raw_write(addr, [ins(indirect, Update.MODIFY)])
    assert exc is not None and update_codes(exc)[0][0] == code_pb2.INVALID_ARGUMENT


def test_batch_atomicity_continue_and_rollback(shell: Pipeline, p4sh: P4Shell, switch: tuple[Pipeline, P4RuntimeServer, str]) -> None:
    addr = switch[2]
    a = raw_route()
    b = raw_route()
    b.match[0].lpm.value = ip6("2001:db8:8::").to_bytes(16, "big")
    c = raw_route()
    c.match[0].lpm.value = ip6("2001:db8:9::").to_bytes(16, "big")
    assert raw_write(addr, [ins(a)]) is None
    exc = raw_write(addr, [ins(b), ins(a), ins(c)],
                    atomicity=p4runtime_pb2.WriteRequest.ROLLBACK_ON_ERROR)
    assert exc is not None
    assert [code for code, _ in update_codes(exc)] == [
        code_pb2.ABORTED, code_pb2.ALREADY_EXISTS, code_pb2.ABORTED]
    assert len(read_routes(p4sh)) == 1
    exc = raw_write(addr, [ins(b), ins(a), ins(c)])  # CONTINUE_ON_ERROR
    assert exc is not None
    assert [code for code, _ in update_codes(exc)] == [
        code_pb2.OK, code_pb2.ALREADY_EXISTS, code_pb2.OK]
    assert len(read_routes(p4sh)) == 3


# ---- arbitration --------------------------------------------------------------------------


def stream(addr: str, election: int, device: int = DEVICE):
    ch = grpc.insecure_channel(addr)
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


def test_second_controller_with_lower_election_id_is_backup(
    shell: Pipeline, p4sh: P4Shell, switch: tuple[Pipeline, P4RuntimeServer, str],
) -> None:
    addr = switch[2]
    ch, out, responses = stream(addr, election=4)
    try:
        first = next(responses).arbitration
        assert first.status.code == code_pb2.ALREADY_EXISTS  # backup
        assert (first.election_id.high, first.election_id.low) == (0, 10)  # the primary's id
        exc = raw_write(addr, [ins(raw_route())], election=4)
        assert exc is not None and exc.code() == grpc.StatusCode.PERMISSION_DENIED
        assert read_routes(p4sh) == []
        # reads are open to backups
        route(p4sh, "insert", "2001:db8:2::", 48, 3)  # by the primary (the shell)
        with P4RuntimeClient(addr, DEVICE, election_id=3) as backup:
            assert not backup.is_primary
            assert len(backup.read_table(ROUTE)) == 1
    finally:
        out.put(None)
        ch.close()


def test_duplicate_election_id_is_rejected_and_higher_id_takes_over(
    shell: Pipeline, p4sh: P4Shell, switch: tuple[Pipeline, P4RuntimeServer, str],
) -> None:
    addr = switch[2]
    ch, out, responses = stream(addr, election=10)
    with pytest.raises(grpc.RpcError) as dup:
        next(responses)
    assert dup.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert dup.value.details() == "Election id already exists"
    out.put(None)
    ch.close()
    with P4RuntimeClient(addr, DEVICE, election_id=20) as client:
        assert client.is_primary
        got = p4sh.run("result = msg_hex(sh.client.get_stream_packet('arbitration', timeout=2))")
        update = p4runtime_pb2.StreamMessageResponse.FromString(bytes.fromhex(got))
        assert update.arbitration.status.code == code_pb2.ALREADY_EXISTS  # old primary demoted
        with pytest.raises(P4ShellError) as denied:
            route(p4sh, "insert", "2001:db8:2::", 48, 3)
        assert denied.value.code == "PERMISSION_DENIED"
        client.insert(ROUTE, {"hdr.ipv6.dst_addr": (ip6("2001:db8:2::"), 48)}, NEXTHOP,
                      {"port": 2, "smac": 1, "dmac": 2})


def test_port_status_notification_reaches_the_primary(
    switch: tuple[Pipeline, P4RuntimeServer, str],
) -> None:
    _, server, addr = switch
    with P4RuntimeClient(addr, DEVICE, election_id=2) as client:
        server.notify_port_status(7, False)
        server.notify_port_status(7, True)
        events = [client.port_events.get(timeout=5), client.port_events.get(timeout=5)]
        assert [(e.port, e.up) for e in events] == [(7, False), (7, True)]


# ---- profiles, counters, registers ------------------------------------------------------


def test_action_profile_groups_counters_and_registers(
    switch: tuple[Pipeline, P4RuntimeServer, str],
) -> None:
    pipe, _, addr = switch
    with P4RuntimeClient(addr, DEVICE, election_id=2) as client:
        client.push_pipeline()
        members = [(100 + p, NEXTHOP, {"port": p, "smac": 1, "dmac": p}) for p in (1, 2)]
        client.insert_group("MrcIngress.ecmp_selector", 9, members, watch_ports=[1, 2])
        ecmp = client.table_entry("MrcIngress.ecmp", {"meta.next_group": 9}, group_id=9)
        client.write([client.update(Update.INSERT, table_entry=ecmp)])
        client.insert(ROUTE, {"hdr.ipv6.dst_addr": (ip6("2001:db8:2::"), 48)},
                      "MrcIngress.route_ecmp", {"group": 9})
        ports = {pipe.process(frame(sport=s), 5, 0.0, empty_queues)[0].port for s in range(40)}
        assert ports == {1, 2}
        groups = client.read([p4runtime_pb2.Entity(
            action_profile_group=p4runtime_pb2.ActionProfileGroup())])
        g = groups[0].action_profile_group
        assert g.group_id == 9 and [m.member_id for m in g.members] == [101, 102]
        assert [m.watch_port for m in g.members] == [b"\x01", b"\x02"]
        # a member used by a group cannot go
        m = p4runtime_pb2.ActionProfileMember(
            action_profile_id=MRC.id("MrcIngress.ecmp_selector"), member_id=101)
        with pytest.raises(P4RuntimeWriteError) as used:
            client.write([client.update(Update.DELETE, action_profile_member=m)])
        assert used.value.errors[0].code == code_pb2.FAILED_PRECONDITION
        # counters: 40 packets from port 5, class 0
        rx = client.read_counter("MrcIngress.rx_port_class", 5 * 8)
        assert rx[5 * 8][0] == 40 and rx[5 * 8][1] == 40 * len(frame())
        everything = client.read_counter("MrcIngress.rx_port_class")
        assert len(everything) == 4096 and sum(p for p, _ in everything.values()) == 40
        reset = p4runtime_pb2.CounterEntry(counter_id=MRC.id("MrcIngress.rx_port_class"))
        reset.index.index = 5 * 8
        client.write([client.update(Update.MODIFY, counter_entry=reset)])
        assert client.read_counter("MrcIngress.rx_port_class", 5 * 8)[5 * 8] == (0, 0)
        # registers: marking port 1 down in port_down steers the data plane
        client.write_register("MrcIngress.port_down", 1, 1)
        assert client.read_register("MrcIngress.port_down", 1) == 1
        with pytest.raises(P4RuntimeWriteError) as wide:
            client.write_register("MrcIngress.port_down", 1, 2)
        assert wide.value.errors[0].code == code_pb2.INVALID_ARGUMENT
        outs = [pipe.process(frame(sport=s), 5, 0.0, empty_queues) for s in range(40)]
        assert {o[0].port for o in outs if o} == {2} and any(not o for o in outs)


def test_write_to_other_device_id_and_role_are_refused(
    shell: Pipeline, switch: tuple[Pipeline, P4RuntimeServer, str],
) -> None:
    addr = switch[2]
    with grpc.insecure_channel(addr) as ch:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
        req = p4runtime_pb2.WriteRequest(device_id=DEVICE + 1)
        req.election_id.low = 10
        with pytest.raises(grpc.RpcError) as other:
            stub.Write(req, timeout=5)
        assert other.value.code() == grpc.StatusCode.NOT_FOUND
        req = p4runtime_pb2.ReadRequest(device_id=DEVICE)
        req.entities.add().meter_entry.meter_id = 1
        with pytest.raises(grpc.RpcError) as meter:
            list(stub.Read(req, timeout=5))
        assert meter.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert encode(0) == b"\x00" and encode(0x1FF) == b"\x01\xff"
    assert Path(compiled.p4info_path("mrc_switch")).exists()


def test_wildcard_reads_and_get_response_types(
    switch: tuple[Pipeline, P4RuntimeServer, str],
) -> None:
    pipe, _, addr = switch
    Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
    with P4RuntimeClient(addr, DEVICE, election_id=2) as client:
        client.push_pipeline(cookie=42)
        client.insert(ROUTE, {"hdr.ipv6.dst_addr": (ip6("2001:db8:2::"), 48)}, NEXTHOP,
                      {"port": 2, "smac": 1, "dmac": 2})
        client.insert("MrcIngress.dscp_class", {"meta.dscp": 10}, "MrcIngress.set_class",
                      {"class_id": 1, "priority": 1, "trimmable": 1})
        everything = client.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())])
        assert sorted(e.table_entry.table_id for e in everything) == sorted(
            [MRC.id(ROUTE), MRC.id("MrcIngress.dscp_class")])
        defaults = client.read([p4runtime_pb2.Entity(
            table_entry=p4runtime_pb2.TableEntry(is_default_action=True))])
        direct_tables = [t for t in MRC.tables if t.implementation is None]
        assert len(defaults) == len(direct_tables)  # the indirect table has no default entry
        regs = client.read([p4runtime_pb2.Entity(register_entry=p4runtime_pb2.RegisterEntry())])
        assert len(regs) == sum(r.size for r in MRC.registers)
        assert all(e.register_entry.data.bitstring == b"\x00" for e in regs)  # canonical zero
        with grpc.insecure_channel(addr) as ch:
            stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
            cookie = stub.GetForwardingPipelineConfig(
                Get(device_id=DEVICE, response_type=Get.COOKIE_ONLY), timeout=5).config
            assert cookie.cookie.cookie == 42 and not cookie.HasField("p4info")
            full = stub.GetForwardingPipelineConfig(Get(device_id=DEVICE), timeout=5).config
            assert full.p4info == MRC.to_p4info()
            caps = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=5)
            assert caps.p4runtime_api_version == "1.4.1"
    assert pipe.program is MRC


def test_client_refuses_unknown_names_and_wrong_value_shapes_before_sending() -> None:
    # No server: every message is built locally, so nothing reaches a switch.
    client = P4RuntimeClient("127.0.0.1:9", DEVICE)
    try:
        nh = {"port": 2, "smac": 1, "dmac": 2}
        route = {"hdr.ipv6.dst_addr": (ip6("2001:db8::"), 32)}
        ok = client.table_entry(ROUTE, route, NEXTHOP, nh)
        assert ok.table_id == MRC.id(ROUTE) and ok.match[0].lpm.prefix_len == 32
        with pytest.raises(ValueError, match=r"did you mean MrcIngress\.ipv6_route"):
            client.table_entry("MrcIngress.ipv6_rout", route, NEXTHOP, nh)
        with pytest.raises(ValueError, match=r"did you mean MrcIngress\.set_nexthop"):
            client.table_entry(ROUTE, route, "MrcIngress.set_nexthp", nh)
        with pytest.raises(ValueError, match=r"no match field\(s\) \['hdr.ipv6.dst'\]"):
            client.table_entry(ROUTE, {"hdr.ipv6.dst": (1, 8)}, NEXTHOP, nh)
        with pytest.raises(ValueError, match=r"no parameter\(s\) \['prt'\]"):
            client.table_entry(ROUTE, route, NEXTHOP, {**nh, "prt": 1})
        with pytest.raises(ValueError, match=r"missing parameter\(s\) \['dmac'\]"):
            client.table_entry(ROUTE, route, NEXTHOP, {"port": 2, "smac": 1})
        with pytest.raises(ValueError, match="is LPM"):
            client.table_entry(ROUTE, {"hdr.ipv6.dst_addr": 5}, NEXTHOP, nh)
    finally:
        client.close()
