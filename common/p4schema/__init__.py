"""The single definition of the P4 programs' control-plane shape (names, ids, widths).

The P4Info files under p4/ are generated from it (``python -m common.p4schema.generate``);
the embedded switch target and the controller read it; p4/*.p4 use the same names.
"""

from common.p4schema import mrc_switch, ocs
from common.p4schema.model import Program

PROGRAMS: dict[str, Program] = {
    mrc_switch.PROGRAM.name: mrc_switch.PROGRAM,
    ocs.PROGRAM.name: ocs.PROGRAM,
}

__all__ = ["PROGRAMS", "Program", "mrc_switch", "ocs"]
