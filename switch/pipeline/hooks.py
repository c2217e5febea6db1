"""What the embedded target does beyond executing the program, bound by the names the
program declares (docs/switch.md, "Target conventions"): a 1-bit register named
``port_down`` (in any control) is written 1 / 0 when a port goes down / up, and action
selector members watching the port leave / rejoin their groups. A program without such a
register gets only the latter.
"""

from __future__ import annotations

from switch.p4json.engine import Engine
from switch.p4json.runtime import RegisterArray


def named(objects: dict[str, RegisterArray], name: str) -> RegisterArray | None:
    for full, obj in objects.items():
        if full == name or full.endswith("." + name):
            return obj
    return None


class TargetHooks:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        reg = named(engine.registers, "port_down")
        self.port_down = reg if reg is not None and reg.width == 1 else None

    def port_status_changed(self, port: int, up: bool) -> None:
        if self.port_down is not None:
            self.port_down.write(port, 0 if up else 1)
        self.engine.set_port_status(port, up)
