"""The P4 programs' control-plane shape (names, ids, widths) as Python data.

The P4Info in use is the one p4c writes (p4/<program>.p4info.txtpb, ``make p4``); this schema
is checked against it byte for byte in canonical order (tests/unit/test_p4schema.py) and
against the P4 sources (tests/unit/test_p4schema_source.py). The embedded switch target and
the controller take names, ids and widths from it.
"""

from common.p4schema import mrc_switch, ocs
from common.p4schema.model import Program

PROGRAMS: dict[str, Program] = {
    mrc_switch.PROGRAM.name: mrc_switch.PROGRAM,
    ocs.PROGRAM.name: ocs.PROGRAM,
}

__all__ = ["PROGRAMS", "Program", "mrc_switch", "ocs"]
