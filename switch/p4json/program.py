"""A BMv2 JSON program, loaded and checked: the objects the compiler and the runtime use.

``load_program`` reads the JSON p4c's BMv2 back end writes for a v1model program
(docs: behavioral-model docs/JSON_format.md) into typed objects with name indexes. Anything
this engine does not execute raises ``Unsupported`` naming it; inconsistent JSON raises
``ConfigError``. Expressions and primitive calls stay JSON here: the compiler checks them when
it generates code, which also happens at load time (``switch.p4json.engine``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from switch.p4json.errors import ConfigError, Unsupported
from switch.p4json.hashes import SUPPORTED as HASHES

Json = Any
SUPPORTED_MAJOR = 2
V1MODEL_PARSER, V1MODEL_DEPARSER = "parser", "deparser"
V1MODEL_PIPELINES = ("ingress", "egress")


def parse_hexstr(text: str) -> int:
    """A JSON ``hexstr`` ("0x0a", "-0x1", "ab") as an int."""
    neg = text.startswith("-")
    body = text[1:] if neg else text
    if body.startswith(("0x", "0X")):
        body = body[2:]
    if not body:
        raise ConfigError(f"empty hexstr {text!r}")
    value = int(body, 16)
    return -value if neg else value


def hexstr_bytes(text: str) -> int:
    """Byte width of a hexstr as BMv2's ByteContainer reads it (2 digits per byte)."""
    body = text[1:] if text.startswith("-") else text
    if body.startswith(("0x", "0X")):
        body = body[2:]
    return (len(body) + 1) // 2


@dataclass(frozen=True)
class FieldSpec:
    name: str
    width: int  # bits; 0 for the variable-length field
    signed: bool = False
    vl: bool = False


@dataclass(frozen=True)
class HeaderType:
    name: str
    fields: tuple[FieldSpec, ...]
    max_bytes: int = 0  # VL headers: the most bytes the header may take

    @property
    def index(self) -> dict[str, int]:
        return {f.name: i for i, f in enumerate(self.fields)}

    @property
    def vl_index(self) -> int | None:
        for i, f in enumerate(self.fields):
            if f.vl:
                return i
        return None

    @property
    def fixed_bits(self) -> int:
        return sum(f.width for f in self.fields)

    def bit_offsets(self) -> list[int]:
        """MSB-first bit offset of every field before the VL field (all fields when fixed)."""
        out, pos = [], 0
        for f in self.fields:
            out.append(pos)
            pos += f.width
        return out


@dataclass
class Header:
    """A header (or metadata) instance."""

    name: str
    id: int
    type: HeaderType
    metadata: bool
    stack: str | None = None
    stack_pos: int = 0
    union: str | None = None
    union_pos: int = 0


@dataclass(frozen=True)
class Stack:
    name: str
    type: HeaderType
    headers: tuple[str, ...]


@dataclass(frozen=True)
class Union:
    name: str
    members: tuple[tuple[str, str], ...]  # (member name, header instance)


@dataclass(frozen=True)
class UnionStack:
    name: str
    unions: tuple[str, ...]


@dataclass(frozen=True)
class Param:
    name: str
    width: int


@dataclass
class Action:
    name: str
    id: int
    params: tuple[Param, ...]
    primitives: list[Json]


@dataclass(frozen=True)
class KeyField:
    match_type: str  # exact | lpm | ternary | range | valid
    target: tuple[str, str]  # (header, field); (header, "$valid$") for valid
    name: str
    mask: int | None
    width: int


@dataclass
class ConstEntry:
    key: list[Json]  # JSON match_key
    action_id: int
    args: tuple[int, ...]
    priority: int


@dataclass
class Table:
    name: str
    id: int
    pipeline: str
    keys: tuple[KeyField, ...]
    match_type: str
    kind: str  # simple | indirect | indirect_ws
    profile: str | None
    size: int
    with_counters: bool
    direct_meter: str | None
    action_ids: tuple[int, ...]
    next_tables: dict[str, str | None]
    base_default_next: str | None
    default_action: int | None
    default_args: tuple[int, ...]
    default_const: bool
    default_entry_const: bool
    entries: list[ConstEntry]
    support_timeout: bool

    @property
    def hit_miss(self) -> bool:
        return "__HIT__" in self.next_tables or "__MISS__" in self.next_tables


@dataclass
class Conditional:
    name: str
    expression: Json
    true_next: str | None
    false_next: str | None


@dataclass(frozen=True)
class Selector:
    algo: str
    inputs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ActionProfile:
    name: str
    id: int
    size: int
    selector: Selector | None


@dataclass
class Pipeline:
    name: str
    init: str | None
    tables: dict[str, Table]
    conditionals: dict[str, Conditional]
    profiles: dict[str, ActionProfile]


@dataclass(frozen=True)
class ParserOp:
    op: str
    params: list[Json]


@dataclass(frozen=True)
class Transition:
    kind: str  # hexstr | default | parse_vset
    value: int | str | None  # int for hexstr, vset name for parse_vset
    mask: int | None
    next: str | None


@dataclass
class ParseState:
    name: str
    ops: list[ParserOp]
    key: list[Json]
    transitions: list[Transition]


@dataclass
class Parser:
    name: str
    init: str
    states: dict[str, ParseState]


@dataclass(frozen=True)
class Deparser:
    name: str
    order: tuple[str, ...]


@dataclass(frozen=True)
class Calculation:
    name: str
    algo: str
    inputs: tuple[Json, ...]


@dataclass(frozen=True)
class Checksum:
    name: str
    target: tuple[str, str]
    calculation: str
    verify: bool
    update: bool
    condition: Json | None


@dataclass(frozen=True)
class CounterSpec:
    name: str
    id: int
    size: int
    direct_table: str | None


@dataclass(frozen=True)
class MeterSpec:
    name: str
    id: int
    size: int
    kind: str  # bytes | packets
    rate_count: int
    direct_table: str | None
    result: tuple[str, str] | None


@dataclass(frozen=True)
class RegisterSpec:
    name: str
    id: int
    size: int
    width: int


@dataclass(frozen=True)
class ParseVSet:
    name: str
    id: int
    width: int


@dataclass
class Program:
    """Everything the engine needs from a BMv2 JSON program."""

    header_types: dict[str, HeaderType]
    headers: dict[str, Header]
    stacks: dict[str, Stack]
    unions: dict[str, Union]
    union_stacks: dict[str, UnionStack]
    errors: dict[str, int]
    enums: dict[str, dict[str, int]]
    parser: Parser
    deparser: Deparser
    actions: dict[int, Action]
    pipelines: dict[str, Pipeline]
    calculations: dict[str, Calculation]
    checksums: list[Checksum]
    counters: dict[str, CounterSpec]
    meters: dict[str, MeterSpec]
    registers: dict[str, RegisterSpec]
    field_lists: dict[int, tuple[tuple[str, str], ...]]
    learn_lists: dict[int, tuple[str, tuple[tuple[str, str], ...]]]
    vsets: dict[str, ParseVSet]
    raw: Json = field(repr=False, default=None)
    # Code generated from the program (switch.p4json.engine, cbackend), made once per loaded
    # program: engines built from the same Program object share it (the simulator builds one
    # engine per switch from one parse).
    derived: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    # -- lookups -----------------------------------------------------------------------------
    def field_spec(self, header: str, name: str) -> FieldSpec:
        h = self.header(header)
        idx = h.type.index.get(name)
        if idx is None:
            raise ConfigError(f"header {header} has no field {name}")
        return h.type.fields[idx]

    def header(self, name: str) -> Header:
        h = self.headers.get(name)
        if h is None:
            raise ConfigError(f"unknown header instance {name}")
        return h

    def table(self, name: str) -> Table:
        for p in self.pipelines.values():
            if name in p.tables:
                return p.tables[name]
        raise KeyError(name)

    def all_tables(self) -> list[Table]:
        return [t for p in self.pipelines.values() for t in p.tables.values()]

    def profile(self, name: str) -> ActionProfile:
        for p in self.pipelines.values():
            if name in p.profiles:
                return p.profiles[name]
        raise KeyError(name)

    def all_profiles(self) -> list[ActionProfile]:
        return [a for p in self.pipelines.values() for a in p.profiles.values()]

    @property
    def drop_port(self) -> int:
        """simple_switch's drop port: all ones in egress_spec's width (511 for v1model)."""
        return (1 << self.field_spec("standard_metadata", "egress_spec").width) - 1


# ---- loading ----------------------------------------------------------------------------------


def _need(obj: Json, key: str, where: str) -> Json:
    if not isinstance(obj, dict) or key not in obj:
        raise ConfigError(f"{where}: missing '{key}'")
    return obj[key]


def _pair(value: Json, where: str) -> tuple[str, str]:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise ConfigError(f"{where}: expected a [header, field] pair, got {value!r}")
    return value[0], value[1]


def _header_types(root: Json) -> dict[str, HeaderType]:
    out: dict[str, HeaderType] = {}
    for ht in root.get("header_types", []):
        name = _need(ht, "name", "header_types")
        fields = []
        for f in _need(ht, "fields", f"header type {name}"):
            if not isinstance(f, list) or len(f) not in (2, 3):
                if isinstance(f, list) and len(f) == 4:
                    raise Unsupported("saturating fields", f"header type {name}")
                raise ConfigError(f"header type {name}: bad field {f!r}")
            fname, width = f[0], f[1]
            signed = bool(f[2]) if len(f) == 3 else False
            if width == "*":
                fields.append(FieldSpec(fname, 0, signed, True))
            elif isinstance(width, int) and width > 0:
                if signed and width < 2:
                    raise ConfigError(f"header type {name}: signed field {fname} of width 1")
                fields.append(FieldSpec(fname, width, signed))
            else:
                raise ConfigError(f"header type {name}: field {fname} has width {width!r}")
        vl = [f for f in fields if f.vl]
        if len(vl) > 1:
            raise ConfigError(f"header type {name}: more than one variable-length field")
        if vl and "length_exp" in ht and ht["length_exp"] is not None:
            raise Unsupported("header types with a length_exp (use extract_VL)", name)
        fixed = sum(f.width for f in fields)
        max_bytes = int(ht.get("max_length") or 0)
        if vl and fixed % 8:
            raise Unsupported("variable-length headers whose fixed fields are not whole bytes", name)
        if vl and max_bytes <= 0:
            raise ConfigError(f"header type {name}: variable-length header without max_length")
        out[name] = HeaderType(name, tuple(fields), max_bytes)
    return out


def load_program(source: str | bytes | Json) -> Program:
    """Load and check a BMv2 JSON program (text, bytes or an already decoded object)."""
    if isinstance(source, (str, bytes, bytearray)):
        try:
            root = json.loads(source)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConfigError(f"not JSON: {exc}") from None
    else:
        root = source
    if not isinstance(root, dict):
        raise ConfigError("a BMv2 JSON program is a JSON object")
    meta = root.get("__meta__", {})
    version = meta.get("version") if isinstance(meta, dict) else None
    if not (isinstance(version, list) and version and version[0] == SUPPORTED_MAJOR):
        raise Unsupported(f"BMv2 JSON version {version!r} (this engine reads 2.x)", "__meta__")
    try:
        return _load(root)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ConfigError(f"malformed BMv2 JSON: {type(exc).__name__}: {exc}") from None


def _load(root: Json) -> Program:
    if root.get("extern_instances"):
        names = [e.get("type") for e in root["extern_instances"]]
        raise Unsupported(f"extern instances {names}", "extern_instances")
    types = _header_types(root)
    headers: dict[str, Header] = {}
    by_id: dict[int, str] = {}
    for h in root.get("headers", []):
        name = _need(h, "name", "headers")
        tname = _need(h, "header_type", f"header {name}")
        if tname not in types:
            raise ConfigError(f"header {name}: unknown type {tname}")
        hid = int(_need(h, "id", f"header {name}"))
        headers[name] = Header(name, hid, types[tname], bool(h.get("metadata", False)))
        by_id[hid] = name
    for required in ("standard_metadata",):
        if required not in headers:
            raise ConfigError(f"no '{required}' header: not a v1model program")
    sm = headers["standard_metadata"].type.index
    for f in ("ingress_port", "packet_length", "instance_type", "egress_spec", "egress_port"):
        if f not in sm:
            raise ConfigError(f"standard_metadata has no field {f} (simple_switch requires it)")

    stacks: dict[str, Stack] = {}
    for s in root.get("header_stacks", []):
        name = s["name"]
        members = tuple(by_id[int(i)] for i in s["header_ids"])
        st = types[s["header_type"]]
        for pos, hname in enumerate(members):
            headers[hname].stack, headers[hname].stack_pos = name, pos
        stacks[name] = Stack(name, st, members)

    unions: dict[str, Union] = {}
    union_types = {u["name"]: [m[0] for m in u["headers"]] for u in root.get("header_union_types", [])}
    union_by_id: dict[int, str] = {}
    for u in root.get("header_unions", []):
        name = u["name"]
        member_names = union_types.get(u["union_type"])
        if member_names is None:
            raise ConfigError(f"header union {name}: unknown type {u['union_type']}")
        ids = [by_id[int(i)] for i in u["header_ids"]]
        if len(ids) != len(member_names):
            raise ConfigError(f"header union {name}: {len(ids)} headers for {len(member_names)} members")
        for pos, hname in enumerate(ids):
            headers[hname].union, headers[hname].union_pos = name, pos
        unions[name] = Union(name, tuple(zip(member_names, ids)))
        union_by_id[int(u["id"])] = name
    union_stacks: dict[str, UnionStack] = {}
    for us in root.get("header_union_stacks", []):
        members = tuple(union_by_id[int(i)] for i in us["header_union_ids"])
        union_stacks[us["name"]] = UnionStack(us["name"], members)

    errors = {str(e[0]): int(e[1]) for e in root.get("errors", [])}
    enums = {
        e["name"]: {str(k): int(v) for k, v in e["entries"]} for e in root.get("enums", [])
    }

    parsers = root.get("parsers", [])
    parser = next((p for p in parsers if p.get("name") == V1MODEL_PARSER), None)
    if parser is None:
        raise ConfigError(f"no parser named '{V1MODEL_PARSER}' (simple_switch runs that one)")
    if len(parsers) > 1:
        raise Unsupported("more than one parser", "parsers")
    deparsers = root.get("deparsers", [])
    deparser = next((d for d in deparsers if d.get("name") == V1MODEL_DEPARSER), None)
    if deparser is None:
        raise ConfigError(f"no deparser named '{V1MODEL_DEPARSER}'")
    if deparser.get("primitives"):
        raise Unsupported("method calls in the deparser", "deparser")
    for hname in deparser.get("order", []):
        if hname not in headers:
            raise ConfigError(f"deparser emits unknown header {hname}")

    actions: dict[int, Action] = {}
    for a in root.get("actions", []):
        aid = int(a["id"])
        params = tuple(Param(p["name"], int(p["bitwidth"])) for p in a.get("runtime_data", []))
        actions[aid] = Action(a["name"], aid, params, list(a.get("primitives", [])))

    pipelines: dict[str, Pipeline] = {}
    for p in root.get("pipelines", []):
        pipelines[p["name"]] = _pipeline(p, headers, actions)
    for name in V1MODEL_PIPELINES:
        if name not in pipelines:
            raise ConfigError(f"no pipeline named '{name}'")
    if len(pipelines) > len(V1MODEL_PIPELINES):
        extra = sorted(set(pipelines) - set(V1MODEL_PIPELINES))
        raise Unsupported(f"pipelines {extra} (v1model has ingress and egress)", "pipelines")

    calculations: dict[str, Calculation] = {}
    for c in root.get("calculations", []):
        algo = c["algo"]
        if algo not in HASHES:
            raise Unsupported(f"hash algorithm '{algo}'", f"calculation {c['name']}")
        for inp in c.get("input", []):
            if inp.get("type") not in ("field", "hexstr", "header", "payload"):
                raise Unsupported(f"calculation input type {inp.get('type')!r}", c["name"])
        calculations[c["name"]] = Calculation(c["name"], algo, tuple(c.get("input", [])))

    checksums = []
    for c in root.get("checksums", []):
        if c.get("type", "generic") != "generic":
            raise Unsupported(f"checksum type {c.get('type')!r}", c["name"])
        if c["calculation"] not in calculations:
            raise ConfigError(f"checksum {c['name']}: unknown calculation {c['calculation']}")
        checksums.append(
            Checksum(
                c["name"],
                _pair(c["target"], c["name"]),
                c["calculation"],
                bool(c.get("verify", True)),
                bool(c.get("update", True)),
                c.get("if_cond"),
            )
        )

    counters = {
        c["name"]: CounterSpec(
            c["name"], int(c["id"]), int(c["size"]),
            c.get("binding") if c.get("is_direct") else None,
        )
        for c in root.get("counter_arrays", [])
    }
    meters = {}
    for m in root.get("meter_arrays", []):
        if m.get("type") not in ("bytes", "packets"):
            raise Unsupported(f"meter type {m.get('type')!r}", m["name"])
        rates = int(m.get("rate_count", 2))
        if rates != 2:
            raise Unsupported(f"meters with {rates} rates (BMv2 v1model meters are trTCM)", m["name"])
        direct = bool(m.get("is_direct"))
        meters[m["name"]] = MeterSpec(
            m["name"], int(m["id"]), int(m["size"]), m["type"], rates,
            m.get("binding") if direct else None,
            _pair(m["result_target"], m["name"]) if direct else None,
        )
    registers = {
        r["name"]: RegisterSpec(r["name"], int(r["id"]), int(r["size"]), int(r["bitwidth"]))
        for r in root.get("register_arrays", [])
    }
    field_lists = {}
    for fl in root.get("field_lists", []):
        elems = []
        for e in fl.get("elements", []):
            if e.get("type") != "field":
                raise Unsupported(f"field list element type {e.get('type')!r}", fl["name"])
            elems.append(_pair(e["value"], fl["name"]))
        field_lists[int(fl["id"])] = tuple(elems)
    learn_lists = {}
    for ll in root.get("learn_lists", []):
        elems = []
        for e in ll.get("elements", []):
            if e.get("type") != "field":
                raise Unsupported(f"learn list element type {e.get('type')!r}", ll["name"])
            elems.append(_pair(e["value"], ll["name"]))
        learn_lists[int(ll["id"])] = (ll["name"], tuple(elems))
    vsets = {
        v["name"]: ParseVSet(v["name"], int(v["id"]), int(v["compressed_bitwidth"]))
        for v in root.get("parse_vsets", [])
    }
    prog = Program(
        header_types=types,
        headers=headers,
        stacks=stacks,
        unions=unions,
        union_stacks=union_stacks,
        errors=errors,
        enums=enums,
        parser=_parser(parser, vsets),
        deparser=Deparser(deparser["name"], tuple(deparser.get("order", []))),
        actions=actions,
        pipelines=pipelines,
        calculations=calculations,
        checksums=checksums,
        counters=counters,
        meters=meters,
        registers=registers,
        field_lists=field_lists,
        learn_lists=learn_lists,
        vsets=vsets,
        raw=root,
    )
    _check_references(prog)
    _check_sizes(prog)
    return prog


def _parser(p: Json, vsets: dict[str, ParseVSet]) -> Parser:
    states: dict[str, ParseState] = {}
    for s in p.get("parse_states", []):
        name = s["name"]
        ops = [ParserOp(op["op"], list(op.get("parameters", []))) for op in s.get("parser_ops", [])]
        for op in ops:
            if op.op not in ("extract", "extract_VL", "set", "verify", "advance", "shift",
                             "primitive"):
                raise Unsupported(f"parser operation '{op.op}'", f"parse state {name}")
        transitions = []
        for t in s.get("transitions", []):
            kind = t.get("type", "hexstr")
            value: int | str | None = None
            if kind == "hexstr" and t.get("value") == "default":
                kind = "default"
            if kind == "hexstr":
                value = parse_hexstr(t["value"])
            elif kind == "parse_vset":
                value = t["value"]
                if value not in vsets:
                    raise ConfigError(f"parse state {name}: unknown value set {value}")
            elif kind != "default":
                raise Unsupported(f"parser transition type {kind!r}", f"parse state {name}")
            mask = t.get("mask")
            transitions.append(
                Transition(kind, value, None if mask is None else parse_hexstr(mask), t.get("next_state"))
            )
        for k in s.get("transition_key", []):
            if k.get("type") not in ("field", "stack_field", "lookahead", "union_stack_field"):
                raise Unsupported(f"parser transition key type {k.get('type')!r}", name)
        states[name] = ParseState(name, ops, list(s.get("transition_key", [])), transitions)
    init = p["init_state"]
    if init not in states:
        raise ConfigError(f"parser {p['name']}: unknown init state {init}")
    for st in states.values():
        for t in st.transitions:
            if t.next is not None and t.next not in states:
                raise ConfigError(f"parse state {st.name}: unknown next state {t.next}")
    return Parser(p["name"], init, states)


def _key_width(headers: dict[str, Header], target: tuple[str, str]) -> int:
    h = headers.get(target[0])
    if h is None:
        raise ConfigError(f"table key on unknown header {target[0]}")
    if target[1] == "$valid$":
        return 1
    idx = h.type.index.get(target[1])
    if idx is None:
        raise ConfigError(f"table key on unknown field {target[0]}.{target[1]}")
    spec = h.type.fields[idx]
    if spec.vl:
        raise Unsupported("table keys on variable-length fields", f"{target[0]}.{target[1]}")
    return spec.width


def _pipeline(p: Json, headers: dict[str, Header], actions: dict[int, Action]) -> Pipeline:
    pname = p["name"]
    if p.get("action_calls"):
        raise Unsupported("pipeline action_calls", pname)
    profiles: dict[str, ActionProfile] = {}
    for ap in p.get("action_profiles", []):
        sel = None
        if "selector" in ap and ap["selector"] is not None:
            algo = ap["selector"]["algo"]
            if algo not in HASHES:
                raise Unsupported(f"selector hash algorithm '{algo}'", ap["name"])
            inputs = []
            for inp in ap["selector"].get("input", []):
                if inp.get("type") != "field":
                    raise Unsupported(f"selector input type {inp.get('type')!r}", ap["name"])
                inputs.append(_pair(inp["value"], ap["name"]))
            sel = Selector(algo, tuple(inputs))
        profiles[ap["name"]] = ActionProfile(ap["name"], int(ap["id"]), int(ap.get("max_size", 0)), sel)
    tables: dict[str, Table] = {}
    for t in p.get("tables", []):
        name = t["name"]
        keys = []
        for k in t.get("key", []):
            mt = k["match_type"]
            if mt not in ("exact", "lpm", "ternary", "range", "valid", "optional"):
                raise Unsupported(f"match type '{mt}'", f"table {name}")
            if mt == "valid":
                target = (k["target"], "$valid$") if isinstance(k["target"], str) else _pair(k["target"], name)
            else:
                target = _pair(k["target"], name)
            mask = k.get("mask")
            keys.append(
                KeyField(
                    "ternary" if mt == "optional" else mt,
                    target,
                    k.get("name") or ".".join(target),
                    None if mask is None else parse_hexstr(mask),
                    _key_width(headers, target),
                )
            )
        if sum(1 for k in keys if k.match_type == "lpm") > 1:
            raise ConfigError(f"table {name} has two LPM fields")
        kind = t.get("type", "simple")
        if kind not in ("simple", "indirect", "indirect_ws"):
            raise Unsupported(f"table type '{kind}'", name)
        profile = t.get("action_profile") if kind != "simple" else None
        if kind != "simple":
            if profile is None:
                raise Unsupported("indirect tables without 'action_profile' (old JSON format)", name)
            if profile not in profiles:
                raise ConfigError(f"table {name}: unknown action profile {profile}")
            if kind == "indirect_ws" and profiles[profile].selector is None:
                raise ConfigError(f"table {name}: indirect_ws on a profile without selector")
        if t.get("support_timeout"):
            pass  # ageing is a control-plane feature: entries simply never age here
        action_ids = tuple(int(a) for a in t.get("action_ids", []))
        for aid in action_ids:
            if aid not in actions:
                raise ConfigError(f"table {name}: unknown action id {aid}")
        de = t.get("default_entry")
        entries = []
        for e in t.get("entries", []) or []:
            ae = e["action_entry"]
            entries.append(
                ConstEntry(
                    list(e["match_key"]),
                    int(ae["action_id"]),
                    tuple(parse_hexstr(x) for x in ae.get("action_data", [])),
                    int(e.get("priority", 0)),
                )
            )
        tables[name] = Table(
            name=name,
            id=int(t["id"]),
            pipeline=pname,
            keys=tuple(keys),
            match_type=t.get("match_type", "exact"),
            kind=kind,
            profile=profile,
            size=int(t.get("max_size", len(entries))),
            with_counters=bool(t.get("with_counters", False)),
            direct_meter=t.get("direct_meters"),
            action_ids=action_ids,
            next_tables=dict(t.get("next_tables", {})),
            base_default_next=t.get("base_default_next"),
            default_action=None if de is None else int(de["action_id"]),
            default_args=() if de is None else tuple(parse_hexstr(x) for x in de.get("action_data", [])),
            default_const=bool(de and de.get("action_const", False)),
            default_entry_const=bool(de and de.get("action_entry_const", False)),
            entries=entries,
            support_timeout=bool(t.get("support_timeout", False)),
        )
    conditionals = {
        c["name"]: Conditional(c["name"], c["expression"], c.get("true_next"), c.get("false_next"))
        for c in p.get("conditionals", [])
    }
    init = p.get("init_table")
    nodes = set(tables) | set(conditionals)
    if init is not None and init not in nodes:
        raise ConfigError(f"pipeline {pname}: unknown init node {init}")
    for t in tables.values():
        for nxt in [*t.next_tables.values(), t.base_default_next]:
            if nxt is not None and nxt not in nodes:
                raise ConfigError(f"table {t.name}: unknown next node {nxt}")
        if not t.hit_miss:
            for aid in t.action_ids:
                if actions[aid].name not in t.next_tables:
                    raise ConfigError(f"table {t.name}: no next node for action {actions[aid].name}")
    for c in conditionals.values():
        for nxt in (c.true_next, c.false_next):
            if nxt is not None and nxt not in nodes:
                raise ConfigError(f"conditional {c.name}: unknown next node {nxt}")
    return Pipeline(pname, init, tables, conditionals, profiles)


MAX_ARRAY = 1 << 24  # cells of one counter, register or meter array


def _check_sizes(prog: Program) -> None:
    for kind, arrays in (("counter", prog.counters), ("meter", prog.meters),
                         ("register", prog.registers)):
        for a in arrays.values():  # type: ignore[attr-defined]
            if not 0 <= a.size <= MAX_ARRAY:
                raise ConfigError(f"{kind} array {a.name} has size {a.size}")
    for r in prog.registers.values():
        if r.width < 1:
            raise ConfigError(f"register array {r.name} has width {r.width}")
    for h in prog.headers.values():
        if not h.metadata and h.type.fixed_bits % 8:
            raise ConfigError(f"header {h.name}: its fields are {h.type.fixed_bits} bits, not a "
                              "whole number of bytes (BMv2 asserts the same)")
    for t in prog.all_tables():
        if t.size < 0:
            raise ConfigError(f"table {t.name} has size {t.size}")
    for v in prog.vsets.values():
        if v.width < 1:
            raise ConfigError(f"value set {v.name} has width {v.width}")


def _check_references(prog: Program) -> None:
    for c in prog.counters.values():
        if c.direct_table is not None:
            try:
                prog.table(c.direct_table)
            except KeyError:
                raise ConfigError(f"direct counter {c.name}: unknown table {c.direct_table}") from None
    for m in prog.meters.values():
        if m.direct_table is not None:
            try:
                prog.table(m.direct_table)
            except KeyError:
                raise ConfigError(f"direct meter {m.name}: unknown table {m.direct_table}") from None
    for t in prog.all_tables():
        if t.direct_meter is not None and t.direct_meter not in prog.meters:
            raise ConfigError(f"table {t.name}: unknown direct meter {t.direct_meter}")
