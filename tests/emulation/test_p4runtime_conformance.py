"""P4Runtime conformance: one script (tests/emulation/p4runtime_probes.py: p4runtime-shell,
raw stubs for the error cases) against simple_switch_grpc and the embedded target.

Both transcripts must be equal probe by probe (responses, canonical read-backs, error codes
and messages), except for the probes in ``DEVIATIONS``, where each target must give exactly
the answer listed; docs/switch.md's deviation table has the same rows. Skipped with a reason
where BMv2 is not installed.
"""

from __future__ import annotations

import pytest

from common.p4schema import PROGRAMS
from common.proto.p4.v1 import p4runtime_pb2
from testbed.switch_lab import Lab
from tests.emulation.p4runtime_probes import Answer, transcript
from tests.emulation.switch_util import BMV2_MISSING, bmv2_available, lab

pytestmark = [
    pytest.mark.emulation,
    pytest.mark.skipif(not bmv2_available(), reason=BMV2_MISSING),
]
__all__ = ["lab"]

DEVICE = 3
DUPLICATE = ("write-error", (("ALREADY_EXISTS",
                              "Match entry exists, use MODIFY if you wish to change action"),))


def _register_cell() -> bytes:
    reg = p4runtime_pb2.RegisterEntry(register_id=PROGRAMS["mrc_switch"].id("MrcIngress.port_down"))
    reg.index.index = 1
    reg.data.bitstring = b"\x01"
    return p4runtime_pb2.Entity(register_entry=reg).SerializeToString(deterministic=True)


# probe -> (embedded target's answer, simple_switch_grpc's answer)
DEVIATIONS: dict[str, tuple[Answer, Answer]] = {
    "capabilities": (("ok", "1.4.1"), ("ok", "1.3.0")),
    "delete a member a group uses": (
        ("write-error", (("FAILED_PRECONDITION", "Member 101 is still referenced"),)),
        ("write-error", (("UNKNOWN", "Error when deleting member on target"),))),
    "missing action parameter": (
        ("write-error", (("INVALID_ARGUMENT",
                          "Missing param(s) [3] for action MrcIngress.set_nexthop"),)),
        ("write-error", (("INVALID_ARGUMENT", "Unexpected number of action parameters"),))),
    "batch, rollback on error": (
        ("write-error", (("ABORTED", "rolled back: another update of the batch failed"),
                         DUPLICATE[1][0])),
        ("rpc-error", "UNIMPLEMENTED",
         "Support for atomic write modes has not been implemented yet")),
    "write for another device id": (
        ("rpc-error", "NOT_FOUND", "Unknown device id 4 (this switch is device 3)"),
        ("rpc-error", "PERMISSION_DENIED", "Not primary")),
    "register write": (
        ("ok",),
        ("write-error", (("UNIMPLEMENTED", "Register writes are not supported yet"),))),
    "register read": (
        ("ok", (_register_cell(),)),
        ("rpc-error", "UNIMPLEMENTED", "Register reads are not supported yet")),
    "meter read": (
        ("rpc-error", "UNIMPLEMENTED", "meter_entry reads are not supported by this target"),
        ("rpc-error", "INVALID_ARGUMENT", "Invalid P4 id")),
    "stream for another device id": (
        ("rpc-error", "NOT_FOUND", "Unknown device id 4 (this switch is device 3)"),
        ("arbitration", "OK", 15)),
}


def test_the_same_script_gets_the_same_answers_from_both_targets(lab: Lab) -> None:
    ns = lab.namespace("h")
    lab.wire("e1", "x1", None, ns)
    lab.wire("b1", "y1", None, ns)
    embedded = lab.start_switch("e", {1: lab.ifname("e1")}, device_id=DEVICE)
    bmv2 = lab.start_switch("b", {1: lab.ifname("b1")}, device_id=DEVICE, kind="bmv2")
    got_e = transcript(embedded.address, DEVICE)
    got_b = transcript(bmv2.address, DEVICE)
    assert [n for n, _ in got_e] == [n for n, _ in got_b]
    answers = dict(zip([n for n, _ in got_e], zip([a for _, a in got_e], [a for _, a in got_b])))
    assert set(DEVIATIONS) <= set(answers)
    differing = {n for n, (e, b) in answers.items() if e != b}
    assert differing == set(DEVIATIONS), sorted(differing ^ set(DEVIATIONS))
    for probe, (want_e, want_b) in DEVIATIONS.items():
        assert answers[probe] == (want_e, want_b), probe
    # the common answers are real answers, not two failures alike
    e = {n: a for n, a in got_e}
    assert e["insert duplicate"] == DUPLICATE
    assert e["read route"][0] == "ok" and len(e["read route"][1]) == 1
    assert e["read modified route"] != e["read route"]
    assert e["read empty table"] == ("ok", ())
    assert e["get p4info"] == ("ok", True)
    assert e["get p4info and device config"] == ("ok", (True, True))
    assert len(e["members read back"][1]) == 2 and len(e["group read back"][1]) == 1
    assert len(e["indirect entry read back"][1]) == 1
    assert e["batch, continue on error"] == ("write-error", (("OK", ""), DUPLICATE[1][0],
                                                              ("OK", "")))
    assert e["second stream, same election id"] == (
        "rpc-error", "INVALID_ARGUMENT", "Election id already exists")
