"""Shared pieces of the code generator: the source writer, the globals the generated code
refers to, and the helpers every part of the generator uses (``GenBase``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from switch.p4json import exprs as ex
from switch.p4json import program as pm
from switch.p4json.errors import ConfigError, Unsupported

# v1model instance types (simple_switch.cpp PktInstanceType)
NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6
INGRESS_OUT = (
    "phv", "egress_spec", "mcast_grp", "clone_sid", "clone_fl", "clone_vals", "resub_fl",
    "resub_vals", "learn_id", "learn_vals", "plen", "pay", "trunc", "parser_error",
)
EGRESS_OUT = (
    "data", "priority", "truncated", "clone_sid", "clone_fl", "clone_phv", "clone_vals",
    "recirc_fl", "recirc_vals",
)
CLONE_VALID = 1 << 15  # BMv2 RegisterAccess::MIRROR_SESSION_ID_VALID_MASK
MAX_PARSER_STEPS = 4096  # parser states visited per packet before ParserTimeout
NODE_BUDGET = 40  # structured code may repeat a node at most this many times over


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def indent(self) -> Writer:
        self.level += 1
        return self

    def dedent(self) -> None:
        self.level -= 1

    def block(self, header: str, body: Callable[[], None]) -> None:
        self(header)
        self.level += 1
        before = len(self.lines)
        body()
        if len(self.lines) == before:
            self("pass")
        self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass
class Globals:
    """Objects the generated code refers to by name (filled by the engine from its state)."""

    tables: dict[str, str] = field(default_factory=dict)  # global name -> table name
    profiles: dict[str, str] = field(default_factory=dict)
    counters: dict[str, str] = field(default_factory=dict)
    registers: dict[str, str] = field(default_factory=dict)
    meters: dict[str, str] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)  # global -> algorithm name
    vsets: dict[str, str] = field(default_factory=dict)
    consts: dict[str, object] = field(default_factory=dict)
    lpm_widths: set[int] = field(default_factory=set)  # _PM<w>: prefix masks by length


class GenBase:
    """Program, variable names and generated-code globals; helpers for the other parts."""

    def __init__(self, prog: pm.Program) -> None:
        self.prog = prog
        self.names = ex.Names(prog)
        self.names.touched = ex.collect_fields(prog)
        self.names.image = self.image
        self.g = Globals()
        self.tmp = 0
        self.drop_port = prog.drop_port
        sm = prog.header("standard_metadata").type.index
        self.sm_fields = set(sm)
        self.user_qbytes = self._find_qdepth_bytes()
        for h in prog.headers.values():
            if h.union is not None and h.stack is not None:
                raise Unsupported("a header both in a union and a stack", h.name)
        self.error_codes = prog.errors
        self.exit_actions = {
            aid for aid, a in prog.actions.items() if any(p.get("op") == "exit" for p in a.primitives)
        }

    def image(self, h: str) -> str:
        """Expression of the current wire bytes of header ``h`` (gen_headers)."""
        raise NotImplementedError

    def fresh(self, stem: str = "t") -> str:
        self.tmp += 1
        return f"_{stem}{self.tmp}"

    def err(self, name: str) -> int:
        code = self.error_codes.get(name)
        if code is None:
            raise ConfigError(f"the program declares no error '{name}'")
        return code

    def _find_qdepth_bytes(self) -> str | None:
        var, self.user_qbytes_max = find_qdepth_bytes(self.prog, self.names)
        return var

    def sm(self, f: str) -> str | None:
        """Variable of standard_metadata.f when the program touches it, else None."""
        if f not in self.sm_fields:
            return None
        idx = self.prog.header("standard_metadata").type.index[f]
        if not self.names.is_touched("standard_metadata", idx):
            return None
        return self.names.field_at("standard_metadata", idx)

    def set_sm(self, w: Writer, f: str, value: str) -> None:
        """standard_metadata.f = value, truncated to the field as BMv2's Field::set does."""
        var = self.sm(f)
        if var is not None:
            spec = self.prog.field_spec("standard_metadata", f)
            w(f"{var} = {self.mask_of(spec, value)}")

    def mask_of(self, spec: pm.FieldSpec, code: str) -> str:
        """``code`` truncated to the field's width as BMv2's Field::export_bytes does."""
        if spec.vl:
            return code
        m = (1 << spec.width) - 1
        if spec.signed:
            half = 1 << (spec.width - 1)
            return f"((({code}) + {half} & {m}) - {half})"
        return f"(({code}) & {m})"

    def header_bytes(self, h: str) -> str:
        """Byte length of header ``h`` (run-time for variable-length headers)."""
        t = self.prog.header(h).type
        if t.vl_index is None:
            return str(t.fixed_bits // 8)
        return f"(({t.fixed_bits} + {self.names.vlw(h)}) // 8)"

def find_qdepth_bytes(prog: pm.Program, names: ex.Names) -> tuple[str | None, int]:
    """(variable, saturation value) of the user metadata field named ``enq_qdepth_bytes``,
    which the embedded target fills with the bytes queued at enqueue (docs/switch.md,
    intrinsic metadata); (None, 0) when the program has none or does not touch it."""
    for h in prog.headers.values():
        if not h.metadata or h.name == "standard_metadata":
            continue
        for i, f in enumerate(h.type.fields):
            named = f.name == "enq_qdepth_bytes" or f.name.endswith(".enq_qdepth_bytes")
            if named and names.is_touched(h.name, i) and not f.signed and not f.vl:
                return names.field_at(h.name, i), (1 << f.width) - 1
    return None, 0


def stack_shift(size: int, num: int, push: bool) -> tuple[list[tuple[int, int]], list[int]]:
    """push_front / pop_front of ``num`` elements on a stack of ``size`` (BMv2's P4_16
    stacks, src/bm_sim/stacks.cpp): the element swaps, in order, then the elements that
    become invalid."""
    if num <= 0:
        return [], []
    if push:
        return [(i, i - num) for i in range(size - 1, num - 1, -1)], list(range(min(size, num)))
    if num < size:
        return [(i, i + num) for i in range(size - num)], list(range(size - num, size))
    return [], list(range(size))


def bind(fn: Callable[[str], None], arg: str) -> Callable[[], None]:
    return lambda: fn(arg)
