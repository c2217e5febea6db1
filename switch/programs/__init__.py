"""The BMv2 JSON of the project's own P4 programs, as the embedded target runs them.

``p4/ocs.p4`` runs as ``make p4`` compiled it (``p4/ocs.json``). ``p4/mrc_switch.p4`` runs in
its build with ``MRC_EMBEDDED_TARGET`` defined (the target fills ``meta.enq_qdepth_bytes`` with
the real byte depth, see docs/switch.md): that JSON is committed beside this module, so no P4
compiler is needed to run the switch; ``python -m switch.programs`` rebuilds it with
p4c-bm2-ss (``--check`` only compares) and tests/unit/test_switch_programs.py checks it is
current where p4c exists. A controller that pushes a built-in P4Info with an empty device
config gets these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.p4schema.compiled import json_path as make_p4_json

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@dataclass(frozen=True)
class Builtin:
    name: str
    source: str  # relative to the repository root (p4c records it in source_info)
    defines: tuple[str, ...] = ()

    @property
    def json_path(self) -> Path:
        """Own build when the embedded target needs defines, else ``make p4``'s."""
        return HERE / f"{self.name}.json" if self.defines else make_p4_json(self.name)


BUILTIN = {
    "mrc_switch": Builtin("mrc_switch", "p4/mrc_switch.p4", ("MRC_EMBEDDED_TARGET",)),
    "ocs": Builtin("ocs", "p4/ocs.p4"),
}
OWN_BUILDS = {n: b for n, b in BUILTIN.items() if b.defines}


def builtin_json(name: str) -> bytes:
    """The committed BMv2 JSON of built-in program ``name``."""
    return BUILTIN[name].json_path.read_bytes()
