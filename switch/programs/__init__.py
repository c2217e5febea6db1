"""The BMv2 JSON of the project's own P4 programs, as the embedded target runs them.

``p4/mrc_switch.p4`` is compiled with ``MRC_EMBEDDED_TARGET`` defined (the target fills
``meta.enq_qdepth_bytes`` with the real byte depth, see docs/switch.md), ``p4/ocs.p4`` as is.
The JSON files are committed beside this module so that no P4 compiler is needed to run the
switch; ``python -m switch.programs`` rebuilds them with p4c-bm2-ss (``--check`` only
compares) and tests/unit/test_switch_programs.py checks they are current where p4c exists.
A controller that pushes the built-in P4Info with an empty device config gets these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@dataclass(frozen=True)
class Builtin:
    name: str
    source: str  # relative to the repository root (p4c records it in source_info)
    defines: tuple[str, ...] = ()

    @property
    def json_path(self) -> Path:
        return HERE / f"{self.name}.json"


BUILTIN = {
    "mrc_switch": Builtin("mrc_switch", "p4/mrc_switch.p4", ("MRC_EMBEDDED_TARGET",)),
    "ocs": Builtin("ocs", "p4/ocs.p4"),
}


def builtin_json(name: str) -> bytes:
    """The committed BMv2 JSON of built-in program ``name``."""
    return BUILTIN[name].json_path.read_bytes()
