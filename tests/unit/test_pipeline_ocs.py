"""ocs program: cross-connect forwarding of opaque frames, and the drop-then-connect
reconfiguration a controller drives (dark entries, then the new circuits)."""

from __future__ import annotations

import random

from switch.pipeline import Pipeline
from switch.pipeline.control import DELETE, INSERT, MODIFY, table_write
from switch.pipeline.state import ActionCall, Entry, ProgramState
from tests.unit.pipeline_helpers import OCS, empty_queues

CONNECT = OCS.id("OcsIngress.connect")
DARK = ActionCall(OCS.id("OcsIngress.dark"))


def connect(port: int) -> ActionCall:
    return ActionCall(CONNECT, (port,))


def forwarded(pipe: Pipeline, frame: bytes, port: int) -> list[tuple[int, bytes]]:
    return [(p.port, p.data) for p in pipe.process(frame, port, 0.0, empty_queues)]


def test_connect_forwards_any_frame_dark_counts_and_unconnected_drops() -> None:
    pipe = Pipeline()
    state = pipe.commit(OCS)
    xc = state.table("OcsIngress.cross_connect")
    garbage = b"\x01\x02\x03"
    table_write(state, INSERT, xc, Entry(key=(1,), action=connect(2)))
    table_write(state, INSERT, xc, Entry(key=(4,), action=DARK))
    assert forwarded(pipe, garbage, 1) == [(2, garbage)]
    assert forwarded(pipe, b"", 1) == [(2, b"")]  # even an empty frame: light is opaque
    assert forwarded(pipe, garbage, 4) == []  # dark: dropped and counted
    assert forwarded(pipe, garbage, 3) == []  # no entry: the default drop, not counted dark
    rx = state.counter("OcsIngress.rx_port")
    tx = state.counter("OcsEgress.tx_port")
    dark = state.counter("OcsIngress.dark_drops")
    assert (rx.packets[1], rx.bytes[1], rx.packets[3], rx.packets[4]) == (2, 3, 1, 1)
    assert (tx.packets[2], tx.bytes[2]) == (2, 3)
    assert (dark.packets[4], dark.bytes[4]) == (1, 3)
    assert sum(dark.packets) == 1 and sum(tx.packets) == 2
    # connect(511) is v1model's drop port: dropped, as BMv2 does at the end of ingress
    table_write(state, MODIFY, xc, Entry(key=(4,), action=connect(511)))
    assert forwarded(pipe, garbage, 4) == [] and tx.packets[511] == 0


def _reconfigure_dark(state: ProgramState, old: dict[int, int], new: dict[int, int]) -> set[int]:
    """Step 1 of the protocol in docs/switch.md: every changed input port goes dark."""
    xc = state.table("OcsIngress.cross_connect")
    changed = {p for p in old.keys() | new.keys() if old.get(p) != new.get(p)}
    for p in sorted(changed):
        table_write(state, MODIFY if p in old else INSERT, xc, Entry(key=(p,), action=DARK))
    return changed


def _reconfigure_connect(state: ProgramState, changed: set[int], new: dict[int, int]) -> None:
    """Step 3: the new circuits, and the entries of ports left unconnected deleted."""
    xc = state.table("OcsIngress.cross_connect")
    for p in sorted(changed):
        if p in new:
            table_write(state, MODIFY, xc, Entry(key=(p,), action=connect(new[p])))
        else:
            table_write(state, DELETE, xc, Entry(key=(p,)))


def test_drop_then_connect_reconfiguration_matches_an_independent_model() -> None:
    """Random circuit sets: during the transition exactly the changed input ports drop (as
    dark), the unchanged ones keep forwarding; afterwards the table is the new set."""
    rng = random.Random(5)
    pipe = Pipeline()
    state = pipe.commit(OCS)
    dark = state.counter("OcsIngress.dark_drops")
    ports = list(range(1, 17))
    current: dict[int, int] = {}
    for _step in range(30):
        outs = ports[:]
        rng.shuffle(outs)
        new = {p: o for p, o in zip(ports, outs) if rng.random() < 0.7}
        changed = _reconfigure_dark(state, current, new)
        for p in ports:
            before = dark.packets[p]
            got = forwarded(pipe, bytes([p]), p)
            if p in changed:
                assert got == [] and dark.packets[p] == before + 1
            elif p in current:
                assert got == [(current[p], bytes([p]))]  # untouched circuits carry on
            else:
                assert got == [] and dark.packets[p] == before
        _reconfigure_connect(state, changed, new)
        entries = state.table("OcsIngress.cross_connect").entries
        assert {k[0]: e.action.params[0] for k, e in entries.items() if e.action} == new
        for p in ports:
            expected = [(new[p], bytes([p]))] if p in new else []
            assert forwarded(pipe, bytes([p]), p) == expected
        current = new
