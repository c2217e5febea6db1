"""ocs program: cross-connect forwarding of opaque frames and dark periods on reconfiguration."""

from __future__ import annotations

from switch.pipeline import Pipeline
from switch.pipeline.control import INSERT, MODIFY, register_write, table_write
from switch.pipeline.state import ActionCall, Entry
from tests.unit.pipeline_helpers import OCS, empty_queues


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def connect(port: int) -> ActionCall:
    return ActionCall(OCS.id("OcsIngress.connect"), (port,))


def test_cross_connect_forwards_any_frame_and_goes_dark_while_reconfiguring() -> None:
    clock = FakeClock()
    pipe = Pipeline(clock=clock)
    state = pipe.commit(OCS)
    xc = state.table("OcsIngress.cross_connect")
    garbage = b"\x01\x02\x03"
    # no delay configured yet: the circuit is usable at once
    table_write(state, INSERT, xc, Entry(key=(1,), action=connect(2)))
    out = pipe.process(garbage, 1, clock(), empty_queues)
    assert [(p.port, p.data) for p in out] == [(2, garbage)]
    assert pipe.process(garbage, 3, clock(), empty_queues) == []  # no circuit on port 3
    # 5 ms reconfiguration: ports 1, 2 (old) and 3 (new) dark for exactly 5 ms
    register_write(state, OCS.id("OcsIngress.reconfig_delay_us"), 0, 5000)
    table_write(state, MODIFY, xc, Entry(key=(1,), action=connect(3)))
    table_write(state, INSERT, xc, Entry(key=(4,), action=connect(5)))  # others: dark too
    dark = state.counter("OcsIngress.dark_drops")
    assert pipe.process(garbage, 1, clock() + 0.004999, empty_queues) == []
    assert dark.packets[1] == 1
    out = pipe.process(garbage, 1, clock() + 0.005, empty_queues)
    assert [p.port for p in out] == [3]
    assert state.counter("OcsEgress.tx_port").packets[3] == 1
    assert state.register("OcsIngress.dark_until").read(2) == int(100.0 * 1e6) + 5000
    assert state.register("OcsIngress.dark_until").read(6) == 0
