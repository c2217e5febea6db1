"""Wire constants as plain ints for the per-packet paths.

IntEnum members are slow to hash and to look up as class attributes; the hot paths compare
and store these ints instead (the codec accepts either, and an int equals its enum member).
"""

from __future__ import annotations

from dataclasses import fields

from common.classes import TrafficClass
from hosts.wire import Opcode

OP_WRITE_FIRST = int(Opcode.WRITE_FIRST)
OP_WRITE_MIDDLE = int(Opcode.WRITE_MIDDLE)
OP_WRITE_LAST = int(Opcode.WRITE_LAST)
OP_WRITE_LAST_IMM = int(Opcode.WRITE_LAST_IMM)
OP_WRITE_ONLY = int(Opcode.WRITE_ONLY)
OP_WRITE_ONLY_IMM = int(Opcode.WRITE_ONLY_IMM)
OP_ACK = int(Opcode.ACK)
OP_SACK = int(Opcode.SACK)
OP_NACK = int(Opcode.NACK)
OP_PROBE = int(Opcode.PROBE)

DATA_OPS = frozenset(
    {
        OP_WRITE_FIRST,
        OP_WRITE_MIDDLE,
        OP_WRITE_LAST,
        OP_WRITE_LAST_IMM,
        OP_WRITE_ONLY,
        OP_WRITE_ONLY_IMM,
    }
)
IMM_LAST_OPS = frozenset({OP_WRITE_LAST_IMM, OP_WRITE_ONLY_IMM})

TC_DATA = TrafficClass.TRIMMABLE
TC_RETX = TrafficClass.TRIMMABLE_RETX
TC_CONTROL = TrafficClass.CONTROL


def require_fields(cls: type, names: str, user: str) -> None:
    """Guard for slot-store construction (``object.__new__`` + one store per field) on the
    per-packet paths: fail at import if ``cls`` gains, loses or renames a field, which would
    otherwise surface as an AttributeError much later."""
    have = tuple(f.name for f in fields(cls))
    if have != tuple(names.split()):
        raise ImportError(f"{cls.__name__} fields changed: {have}; update {user}")
