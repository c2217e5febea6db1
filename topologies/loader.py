"""Load and validate topology files (YAML) into ``topologies.model.Topology``.

Every problem found is reported, each naming the file, the node or link and the field, e.g.
``clos-2p.yaml: links[3] (h0:0 -- p0-leaf9:1): unknown node 'p0-leaf9'``. Validation is
all-or-nothing: a file with any problem yields a ``TopologyError`` and no Topology.
Schema and rules: docs/topologies.md.
"""

from __future__ import annotations

import ipaddress
import re
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from common.classes import DEFAULT_CLASSES, ClassMap, TrafficClass
from common.units import parse_duration, parse_rate, parse_ratio, parse_size
from topologies.model import (
    Addressing,
    Endpoint,
    FabricKind,
    FabricSpec,
    Link,
    LinkParams,
    Node,
    NodeKind,
    OcsConfig,
    PathMode,
    Thresholds,
    Topology,
)

TOPOLOGY_DIR = Path(__file__).resolve().parent
MAX_PLANES = 32  # port_status_mask of an endpoint operation has one bit per port
MAX_TIER = 3
MAX_SWITCH_PORT = 510  # v1model port 511 is the drop port
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")

_TOP_KEYS = {"name", "description", "fabric", "link_defaults", "hosts", "gpus", "switches", "links"}
_FABRIC_KEYS = {
    "kind", "planes", "path_mode", "mtu", "base_rtt", "thresholds", "classes", "addressing", "ocs",
}  # fmt: skip
_LINK_KEYS = {"rate", "delay", "queue_packets", "queue_bytes", "loss"}
_DEFAULT_LINK = {
    "rate": "1Gbps", "delay": "5us", "queue_packets": 32, "queue_bytes": "128KiB", "loss": 0,
}  # fmt: skip

T = TypeVar("T")


class TopologyError(ValueError):
    """A topology file is invalid; ``problems`` lists every problem found."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n  ".join(problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n  {lines}")


class _Errors:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, msg: str) -> None:
        self.items.append(f"{where}: {msg}" if where else msg)

    def parse(self, where: str, fn: Callable[[object], T], value: object) -> T | None:
        try:
            return fn(value)
        except (ValueError, TypeError) as exc:
            self.add(where, str(exc))
            return None


def available() -> list[str]:
    """Names of the shipped topologies (files next to this module)."""
    return sorted(p.stem for p in TOPOLOGY_DIR.glob("*.yaml"))


def resolve(name_or_path: str | Path) -> Path:
    """A shipped topology name ('clos-2p') or a path to a YAML file."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    shipped = TOPOLOGY_DIR / f"{name_or_path}.yaml"
    if shipped.exists():
        return shipped
    raise TopologyError(
        str(name_or_path), [f"no such topology file; shipped topologies: {', '.join(available())}"]
    )


def load(name_or_path: str | Path) -> Topology:
    """Load, validate and return a topology (shipped name or file path)."""
    path = resolve(name_or_path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise TopologyError(str(path), [f"cannot read: {exc.strerror or exc}"]) from None
    return loads(text, source=path.name, default_name=path.stem)


def loads(text: str, source: str = "<string>", default_name: str = "topology") -> Topology:
    """Parse and validate YAML text."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise TopologyError(source, [f"{where}invalid YAML: {problem}"]) from None
    return from_dict(data, source=source, default_name=default_name)


def from_dict(data: object, source: str = "<dict>", default_name: str = "topology") -> Topology:
    errors = _Errors()
    if not isinstance(data, Mapping):
        raise TopologyError(source, ["the file must be a mapping with 'fabric', nodes and 'links'"])
    _unknown_keys(errors, "", data, _TOP_KEYS)
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        errors.add("name", f"must be a non-empty string, got {name!r}")
        name = default_name
    description = str(data.get("description", "")).strip()
    fabric = _fabric(errors, data.get("fabric"))
    defaults = _link_params(errors, "link_defaults", data.get("link_defaults") or {}, None)
    nodes = _nodes(errors, data, fabric)
    links = _links(errors, data.get("links"), nodes, defaults, fabric)
    if fabric is not None and defaults is not None and defaults.queue_bytes < fabric.mtu:
        errors.add("link_defaults.queue_bytes", f"{defaults.queue_bytes} is below the MTU")
    if fabric is not None and not errors.items:
        if fabric.kind == FabricKind.PACKET:
            _check_packet_fabric(errors, fabric, nodes, links)
        else:
            _check_circuit_fabric(errors, fabric, nodes, links)
    if errors.items or fabric is None:
        raise TopologyError(source, errors.items or ["no valid 'fabric' section"])
    return Topology(
        name=name,
        description=description,
        source=source,
        fabric=fabric,
        nodes=tuple(nodes.values()),
        links=tuple(links),
    )


def _unknown_keys(errors: _Errors, where: str, data: Mapping[Any, Any], allowed: set[str]) -> None:
    for key in data:
        if key not in allowed:
            errors.add(
                where or "top level",
                f"unknown field {key!r} (expected one of: {', '.join(sorted(allowed))})",
            )


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _choice(enum_type: type[T]) -> Callable[[object], T]:
    def parse(value: object) -> T:
        try:
            return enum_type(value)  # type: ignore[call-arg]
        except ValueError:
            options = ", ".join(str(m.value) for m in enum_type)  # type: ignore[attr-defined]
            raise ValueError(f"{value!r} is not one of: {options}") from None

    return parse


def _fabric(errors: _Errors, data: object) -> FabricSpec | None:
    if not isinstance(data, Mapping):
        errors.add("fabric", "missing or not a mapping (needs at least 'kind' and 'planes')")
        return None
    _unknown_keys(errors, "fabric", data, _FABRIC_KEYS)
    before = len(errors.items)
    kind = errors.parse("fabric.kind", _choice(FabricKind), data.get("kind", "packet"))
    planes = errors.parse("fabric.planes", _int, data.get("planes", 1))
    if planes is not None and not 1 <= planes <= MAX_PLANES:
        errors.add("fabric.planes", f"impossible plane count {planes} (1..{MAX_PLANES})")
    mode = errors.parse("fabric.path_mode", _choice(PathMode), data.get("path_mode", "ecmp"))
    mtu = errors.parse("fabric.mtu", _int, data.get("mtu", 4096))
    if mtu is not None and not 256 <= mtu <= 9000:
        errors.add("fabric.mtu", f"{mtu} outside 256..9000")
    base_rtt: float | None = None
    raw_rtt = data.get("base_rtt", "auto")
    if raw_rtt != "auto":
        base_rtt = errors.parse("fabric.base_rtt", parse_duration, raw_rtt)
        if base_rtt is not None and base_rtt <= 0:
            errors.add("fabric.base_rtt", "must be positive (or 'auto')")
    thresholds = _thresholds(errors, data.get("thresholds") or {})
    classes = _classes(errors, data.get("classes") or {})
    addressing = _addressing(errors, data.get("addressing") or {})
    ocs = None
    if kind == FabricKind.CIRCUIT:
        ocs = _ocs(errors, data.get("ocs"))
    elif "ocs" in data:
        errors.add("fabric.ocs", "only a circuit fabric (kind: circuit) has an 'ocs' section")
    if len(errors.items) > before or None in (kind, planes, mode, mtu):
        return None
    assert kind is not None and planes is not None and mode is not None and mtu is not None
    return FabricSpec(
        kind=kind,
        planes=planes,
        path_mode=mode,
        mtu=mtu,
        base_rtt_s=base_rtt,
        classes=classes,
        thresholds=thresholds,
        addressing=addressing,
        ocs=ocs,
    )


def _thresholds(errors: _Errors, data: object) -> Thresholds:
    default = Thresholds(0.5, 1.0, 1.5)
    if not isinstance(data, Mapping):
        errors.add("fabric.thresholds", "must be a mapping")
        return default
    _unknown_keys(errors, "fabric.thresholds", data, {"ecn_bdp", "trim_bdp", "trim_lasthop_bdp"})
    values = {}
    for key, dflt in (("ecn_bdp", 0.5), ("trim_bdp", 1.0), ("trim_lasthop_bdp", 1.5)):
        v = errors.parse(f"fabric.thresholds.{key}", parse_ratio, data.get(key, dflt))
        values[key] = dflt if v is None else v
    if not 0 < values["ecn_bdp"] < values["trim_bdp"] <= values["trim_lasthop_bdp"]:
        errors.add(
            "fabric.thresholds",
            "need 0 < ecn_bdp < trim_bdp <= trim_lasthop_bdp, got "
            f"{values['ecn_bdp']}, {values['trim_bdp']}, {values['trim_lasthop_bdp']}",
        )
    return Thresholds(values["ecn_bdp"], values["trim_bdp"], values["trim_lasthop_bdp"])


def _classes(errors: _Errors, data: object) -> ClassMap:
    if not isinstance(data, Mapping):
        errors.add("fabric.classes", "must be a mapping with 'dscp' and/or 'priority'")
        return DEFAULT_CLASSES
    _unknown_keys(errors, "fabric.classes", data, {"dscp", "priority"})
    dscp = dict(DEFAULT_CLASSES.dscp)
    prio = dict(DEFAULT_CLASSES.priority)
    for key, target in (("dscp", dscp), ("priority", prio)):
        section = data.get(key) or {}
        if not isinstance(section, Mapping):
            errors.add(f"fabric.classes.{key}", "must map class names to numbers")
            continue
        for cls_name, value in section.items():
            where = f"fabric.classes.{key}.{cls_name}"
            try:
                cls = TrafficClass(cls_name)
            except ValueError:
                names = ", ".join(c.value for c in TrafficClass)
                errors.add(where, f"unknown class (expected one of: {names})")
                continue
            number = errors.parse(where, _int, value)
            if number is not None:
                target[cls] = number
    classes = ClassMap(dscp=dscp, priority=prio)
    try:
        classes.validate()
    except ValueError as exc:
        errors.add("fabric.classes", str(exc))
    return classes


def _addressing(errors: _Errors, data: object) -> Addressing:
    default = Addressing("fd00:6d72:6300::", 0xFCBBBB00)
    if not isinstance(data, Mapping):
        errors.add("fabric.addressing", "must be a mapping")
        return default
    _unknown_keys(errors, "fabric.addressing", data, {"gid_prefix", "usid_block"})
    gid_prefix = default.gid_prefix
    block = default.usid_block
    if "gid_prefix" in data:
        try:
            net = ipaddress.IPv6Network(str(data["gid_prefix"]))
            if net.prefixlen != 48:
                raise ValueError("must be a /48")
            gid_prefix = str(net.network_address)
        except ValueError as exc:
            errors.add("fabric.addressing.gid_prefix", f"{data['gid_prefix']!r}: {exc}")
    if "usid_block" in data:
        try:
            net = ipaddress.IPv6Network(str(data["usid_block"]))
            if net.prefixlen != 32:
                raise ValueError("must be a /32 (32-bit uSID locator block)")
            block = int(net.network_address) >> 96
            if block & 0xFF:
                raise ValueError("the low 8 bits of the block number the planes; keep them 0")
        except ValueError as exc:
            errors.add("fabric.addressing.usid_block", f"{data['usid_block']!r}: {exc}")
    return Addressing(gid_prefix, block)


def _ocs(errors: _Errors, data: object) -> OcsConfig | None:
    if not isinstance(data, Mapping):
        errors.add("fabric.ocs", "a circuit fabric needs 'ocs: {ports_per_gpu, reconfig_delay}'")
        return None
    _unknown_keys(errors, "fabric.ocs", data, {"ports_per_gpu", "reconfig_delay"})
    d = errors.parse("fabric.ocs.ports_per_gpu", _int, data.get("ports_per_gpu"))
    if d is not None and not 1 <= d <= 16:
        errors.add("fabric.ocs.ports_per_gpu", f"{d} outside 1..16")
        d = None
    delay = errors.parse("fabric.ocs.reconfig_delay", parse_duration, data.get("reconfig_delay", 0))
    if d is None or delay is None:
        return None
    return OcsConfig(d, delay)


def _link_params(
    errors: _Errors, where: str, data: object, base: LinkParams | None
) -> LinkParams | None:
    if not isinstance(data, Mapping):
        errors.add(where, "must be a mapping of link parameters")
        return None
    _unknown_keys(errors, where, data, _LINK_KEYS)
    merged: dict[str, object] = dict(_DEFAULT_LINK)
    if base is not None:
        merged = {
            "rate": base.rate_bps, "delay": base.delay_s, "queue_packets": base.queue_packets,
            "queue_bytes": base.queue_bytes, "loss": base.loss,
        }  # fmt: skip
    merged.update({k: v for k, v in data.items() if k in _LINK_KEYS})
    before = len(errors.items)
    rate = errors.parse(f"{where}.rate", parse_rate, merged["rate"])
    delay = errors.parse(f"{where}.delay", parse_duration, merged["delay"])
    qpk = errors.parse(f"{where}.queue_packets", _int, merged["queue_packets"])
    qby = errors.parse(f"{where}.queue_bytes", parse_size, merged["queue_bytes"])
    loss = errors.parse(f"{where}.loss", parse_ratio, merged["loss"])
    if rate is not None and rate < 0:
        errors.add(f"{where}.rate", "must be >= 0 (0 = unlimited)")
    if delay is not None and not 0 <= delay <= 1.0:
        errors.add(f"{where}.delay", "must be between 0 and 1s")
    if qpk is not None and not 1 <= qpk <= 1 << 19:
        errors.add(f"{where}.queue_packets", f"{qpk} outside 1..{1 << 19}")
    if qby is not None and qby < 1:
        errors.add(f"{where}.queue_bytes", "must be positive")
    if loss is not None and not 0 <= loss < 1:
        errors.add(f"{where}.loss", f"{loss} outside [0, 1)")
    if len(errors.items) > before:
        return None
    assert rate is not None and delay is not None and qpk is not None
    assert qby is not None and loss is not None
    return LinkParams(rate, delay, qpk, qby, loss)


def _node_entries(errors: _Errors, data: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    raw = data.get(key) or []
    if not isinstance(raw, list):
        errors.add(key, "must be a list")
        return []
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            out.append({"name": item, "_where": f"{key}[{i}]"})
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            out.append({**item, "_where": f"{key}[{i}] ({item['name']})"})
        else:
            errors.add(f"{key}[{i}]", f"expected a name or a mapping with 'name', got {item!r}")
    return out


def _nodes(errors: _Errors, data: Mapping[str, Any], fabric: FabricSpec | None) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    planes = fabric.planes if fabric else MAX_PLANES
    circuit = fabric is not None and fabric.kind == FabricKind.CIRCUIT
    counters: dict[NodeKind, int] = {}

    def add(entry: dict[str, Any], kind: NodeKind, plane: int | None, tier: int | None) -> None:
        name = entry["name"]
        where = entry["_where"]
        if not NAME_RE.fullmatch(name):
            errors.add(where, f"bad node name {name!r} (letter first, then letters, digits, - _)")
            return
        if name in nodes:
            errors.add(where, f"duplicate node name {name!r}")
            return
        order = counters.get(kind, 0)
        counters[kind] = order + 1
        nodes[name] = Node(name, kind, order, plane, tier)

    for entry in _node_entries(errors, data, "hosts"):
        _unknown_keys(errors, entry["_where"], entry, {"name", "_where"})
        if circuit:
            errors.add(entry["_where"], "a circuit fabric has 'gpus', not 'hosts'")
        add(entry, NodeKind.HOST, None, None)
    for entry in _node_entries(errors, data, "gpus"):
        _unknown_keys(errors, entry["_where"], entry, {"name", "_where"})
        if fabric is not None and not circuit:
            errors.add(entry["_where"], "'gpus' belong to a circuit fabric (fabric.kind: circuit)")
        add(entry, NodeKind.GPU, None, None)
    for entry in _node_entries(errors, data, "switches"):
        where = entry["_where"]
        _unknown_keys(errors, where, entry, {"name", "plane", "tier", "kind", "_where"})
        kind_name = entry.get("kind", "ocs" if circuit else "switch")
        if kind_name not in ("switch", "ocs"):
            errors.add(f"{where}.kind", f"{kind_name!r} is not one of: switch, ocs")
            continue
        if kind_name == "ocs":
            if not circuit:
                errors.add(where, "an 'ocs' switch belongs to a circuit fabric")
            add(entry, NodeKind.OCS, None, None)
            continue
        if circuit:
            errors.add(where, "a circuit fabric has only 'ocs' switches")
            continue
        plane = errors.parse(f"{where}.plane", _int, entry.get("plane", 0))
        tier = errors.parse(f"{where}.tier", _int, entry.get("tier"))
        if plane is not None and not 0 <= plane < planes:
            errors.add(f"{where}.plane", f"plane {plane} outside 0..{planes - 1} (fabric.planes)")
            continue
        if tier is not None and not 0 <= tier <= MAX_TIER:
            errors.add(f"{where}.tier", f"tier {tier} outside 0..{MAX_TIER}")
            continue
        if plane is not None and tier is not None:
            add(entry, NodeKind.SWITCH, plane, tier)
    if not nodes:
        errors.add("", "no nodes: declare 'hosts' (or 'gpus') and 'switches'")
    return nodes


def _endpoint(text: object, nodes: Mapping[str, Node]) -> Endpoint:
    if not isinstance(text, str) or text.count(":") != 1:
        raise ValueError(f"endpoint {text!r} must be 'node:port'")
    name, port_text = text.split(":")
    if name not in nodes:
        raise ValueError(f"unknown node {name!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"port of {text!r} is not an integer") from None
    node = nodes[name]
    if node.kind in (NodeKind.SWITCH, NodeKind.OCS):
        if not 1 <= port <= MAX_SWITCH_PORT:
            raise ValueError(f"switch port {text!r} outside 1..{MAX_SWITCH_PORT}")
    elif port < 0:
        raise ValueError(f"port of {text!r} must be >= 0")
    return Endpoint(name, port)


def _links(
    errors: _Errors,
    data: object,
    nodes: Mapping[str, Node],
    defaults: LinkParams | None,
    fabric: FabricSpec | None,
) -> list[Link]:
    if not isinstance(data, list) or not data:
        errors.add("links", "missing or empty list of links")
        return []
    links: list[Link] = []
    used: dict[Endpoint, str] = {}
    for i, item in enumerate(data):
        where = f"links[{i}]"
        params_data: Mapping[str, Any] = {}
        if isinstance(item, str) and "--" in item:
            ends: list[object] = [s.strip() for s in item.split("--", 1)]
        elif isinstance(item, Mapping) and "a" in item and "b" in item:
            ends = [item["a"], item["b"]]
            params_data = {k: v for k, v in item.items() if k not in ("a", "b")}
        else:
            errors.add(where, f"expected 'A:port -- B:port' or {{a:, b:, ...}}, got {item!r}")
            continue
        where = f"links[{i}] ({ends[0]} -- {ends[1]})"
        parsed = [errors.parse(where, lambda t: _endpoint(t, nodes), e) for e in ends]
        params = _link_params(errors, where, params_data, defaults) if defaults else None
        a, b = parsed
        if a is None or b is None:
            continue
        if a.node == b.node:
            errors.add(where, "a link must join two different nodes")
            continue
        reused = False
        for end in (a, b):
            if end in used:
                errors.add(where, f"port {end} already used by {used[end]}")
                reused = True
        if reused:
            continue
        used[a] = used[b] = where
        if params is not None and fabric is not None and params.queue_bytes < fabric.mtu:
            errors.add(f"{where}.queue_bytes", f"{params.queue_bytes} is below the MTU")
        if params is not None:
            links.append(Link(len(links), a, b, params))
    return links


def _check_packet_fabric(
    errors: _Errors, fabric: FabricSpec, nodes: Mapping[str, Node], links: list[Link]
) -> None:
    hosts = [n for n in nodes.values() if n.kind == NodeKind.HOST]
    switches = [n for n in nodes.values() if n.kind == NodeKind.SWITCH]
    if not hosts:
        errors.add("hosts", "a packet fabric needs at least one host")
    for plane in range(fabric.planes):
        if not any(s.plane == plane for s in switches):
            errors.add(
                "fabric.planes",
                f"impossible plane count {fabric.planes}: no switch is in plane {plane}",
            )
    host_ports: dict[str, set[int]] = {h.name: set() for h in hosts}
    for link in links:
        where = f"links[{link.index}] ({link})"
        na, nb = nodes[link.a.node], nodes[link.b.node]
        if na.kind == NodeKind.HOST and nb.kind == NodeKind.HOST:
            errors.add(where, "hosts cannot be linked directly (no switch in between)")
            continue
        if NodeKind.HOST in (na.kind, nb.kind):
            host, sw = (link.a, link.b) if na.kind == NodeKind.HOST else (link.b, link.a)
            snode = nodes[sw.node]
            if host.port >= fabric.planes:
                errors.add(
                    where,
                    f"host port {host} does not exist: hosts have one port per plane "
                    f"(0..{fabric.planes - 1})",
                )
                continue
            if snode.plane != host.port:
                errors.add(
                    where,
                    f"host port {host} is plane {host.port} but switch {sw.node} is in plane "
                    f"{snode.plane}",
                )
            if snode.tier != 0:
                errors.add(
                    where, f"hosts attach to tier-0 switches; {sw.node} is tier {snode.tier}"
                )
            host_ports[host.node].add(host.port)
            continue
        if na.plane != nb.plane:
            errors.add(
                where, f"link joins plane {na.plane} ({na.name}) and plane {nb.plane} ({nb.name})"
            )
        if na.tier is not None and nb.tier is not None and abs(na.tier - nb.tier) != 1:
            errors.add(
                where,
                f"switch links join adjacent tiers; {na.name} is tier {na.tier}, "
                f"{nb.name} is tier {nb.tier}",
            )
    for host_name, ports in host_ports.items():
        missing = sorted(set(range(fabric.planes)) - ports)
        if missing:
            errors.add(
                f"hosts ({host_name})",
                f"NIC port(s) {', '.join(map(str, missing))} not connected "
                f"(a host needs one port per plane, 0..{fabric.planes - 1})",
            )
    connected = {link.a.node for link in links} | {link.b.node for link in links}
    for swn in switches:
        if swn.name not in connected:
            errors.add(f"switches ({swn.name})", "switch has no links")
    if errors.items:
        return
    adjacency: dict[str, list[str]] = {n: [] for n in nodes}
    for link in links:
        adjacency[link.a.node].append(link.b.node)
        adjacency[link.b.node].append(link.a.node)
    for plane in range(fabric.planes):
        members = {s.name for s in switches if s.plane == plane}
        start = next(iter(sorted(members)))
        seen = {start}
        queue = deque([start])
        while queue:
            cur = queue.popleft()
            for nxt in adjacency[cur]:
                if nxt in members and nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        unreachable = sorted(members - seen)
        if unreachable:
            errors.add(
                f"plane {plane}",
                f"switches {', '.join(unreachable)} cannot reach {start} (plane is partitioned)",
            )


def _check_circuit_fabric(
    errors: _Errors, fabric: FabricSpec, nodes: Mapping[str, Node], links: list[Link]
) -> None:
    assert fabric.ocs is not None
    gpus = [n for n in nodes.values() if n.kind == NodeKind.GPU]
    ocs = [n for n in nodes.values() if n.kind == NodeKind.OCS]
    if len(ocs) != 1:
        errors.add("switches", f"a circuit fabric has exactly one OCS switch, found {len(ocs)}")
        return
    if len(gpus) < 2:
        errors.add("gpus", "a circuit fabric needs at least two GPUs")
    d = fabric.ocs.ports_per_gpu
    gpu_ports: dict[str, set[int]] = {g.name: set() for g in gpus}
    for link in links:
        where = f"links[{link.index}] ({link})"
        kinds = {nodes[link.a.node].kind, nodes[link.b.node].kind}
        if kinds != {NodeKind.GPU, NodeKind.OCS}:
            errors.add(where, "in a circuit fabric every link joins a GPU port to the OCS")
            continue
        gpu = link.a if nodes[link.a.node].kind == NodeKind.GPU else link.b
        if gpu.port >= d:
            errors.add(where, f"GPU port {gpu} outside 0..{d - 1} (fabric.ocs.ports_per_gpu)")
            continue
        gpu_ports[gpu.node].add(gpu.port)
    for gpu_name, ports in gpu_ports.items():
        missing = sorted(set(range(d)) - ports)
        if missing:
            errors.add(
                f"gpus ({gpu_name})",
                f"port(s) {', '.join(map(str, missing))} not connected to the OCS "
                f"(each GPU has {d} ports)",
            )
