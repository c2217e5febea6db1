"""What the embedded target does beyond executing the program, bound by the names the
program declares (docs/switch.md, "Target conventions"):

- a 1-bit register named ``port_down`` is written 1 / 0 when a port goes down / up (and
  action selector members watching the port leave / rejoin their groups);
- traffic-manager tail drops are counted into a counter named ``drop_port_queue`` (index
  ``port * 8 + priority``) and one named ``drop_reason`` (index ``DropReason.TM_DROP``);
- a write to a table named ``cross_connect`` (an optical circuit switch) makes the ports it
  touches dark, until now + ``reconfig_delay_us[0]``, in the register ``dark_until``
  (microseconds of the switch clock) that the program compares with its timestamps.

A program that declares none of these names gets none of this behaviour.
"""

from __future__ import annotations

from collections.abc import Callable

from common.p4schema.mrc_switch import DropReason
from switch.p4json.engine import Engine
from switch.p4json.runtime import CounterArray, RegisterArray
from switch.pipeline.state import Entry, ProgramState, TableState


def _named(objects: dict[str, object], name: str) -> object | None:
    for full, obj in objects.items():
        if full == name or full.endswith("." + name):
            return obj
    return None


class TargetHooks:
    def __init__(self, state: ProgramState, engine: Engine, clock: Callable[[], float]) -> None:
        self.engine = engine
        self.clock = clock
        reg = _named(engine.registers, "port_down")  # type: ignore[arg-type]
        self.port_down = reg if isinstance(reg, RegisterArray) and reg.width == 1 else None
        queue = _named(engine.counters, "drop_port_queue")  # type: ignore[arg-type]
        reason = _named(engine.counters, "drop_reason")  # type: ignore[arg-type]
        self.tm_queue = queue if isinstance(queue, CounterArray) else None
        self.tm_reason = reason if isinstance(reason, CounterArray) else None
        self._ocs(state)

    def port_status_changed(self, port: int, up: bool) -> None:
        if self.port_down is not None:
            self.port_down.write(port, 0 if up else 1)
        self.engine.set_port_status(port, up)

    def count_tm_drop(self, port: int, priority: int, nbytes: int) -> None:
        if self.tm_queue is not None:
            self.tm_queue.count(port * 8 + priority, nbytes)
        if self.tm_reason is not None:
            self.tm_reason.count(DropReason.TM_DROP, nbytes)

    # -- optical circuit switch: dark ports while the mirrors move ---------------------------
    def _ocs(self, state: ProgramState) -> None:
        until = _named(self.engine.registers, "dark_until")  # type: ignore[arg-type]
        delay = _named(self.engine.registers, "reconfig_delay_us")  # type: ignore[arg-type]
        table = next((t for t in state.tables.values()
                      if t.schema.name.split(".")[-1] == "cross_connect"), None)
        connect = next((a for a in state.program.actions
                        if a.name.split(".")[-1] == "connect" and len(a.params) == 1), None)
        if not (isinstance(until, RegisterArray) and isinstance(delay, RegisterArray)
                and table is not None and connect is not None):
            return
        connect_id = state.program.id(connect.name)

        def on_write(t: TableState, old: Entry | None, new: Entry | None) -> None:
            if t is not table:
                return
            dark = int(self.clock() * 1e6) + delay.read(0)
            ports: set[int] = set()
            for e in (old, new):
                if e is None:
                    continue
                ports.add(int(e.key[0]))  # type: ignore[call-overload]
                if e.action is not None and e.action.action_id == connect_id:
                    ports.add(e.action.params[0])
            for port in ports:
                if dark > until.read(port):
                    until.write(port, dark)

        state.table_hooks.append(on_write)
