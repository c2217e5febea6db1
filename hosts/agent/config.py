"""Agent configuration: a JSON file (or dict) validated into typed dataclasses.

Example::

    {"name": "h1",
     "ports": [{"ifname": "h1p0", "mac": "02:00:00:00:01:00", "gid": "fd00:0:1::1",
                "neighbor_mac": "02:00:00:00:ff:00"}],
     "ev_mode": "ecmp",            # ecmp | structured | srv6
     "srv6_templates": {"fd00:0:2::1": {"block": "0xfc000000",
                        "slots": [{"base": 256, "ev_shift": 0, "ev_width": 4}]}},
     "mtu": 4096, "qlog_dir": "/tmp/qlog", "metrics_interval": 1.0,
     "classes": {"TRIMMABLE": 10, ...},   # optional DSCP overrides
     "core": {"ev_probe_interval": 0.05, "endpoint_timeout": 0.25},  # optional, CORE_KNOBS
     "backpressure": {"low": 0.005, "high": 0.05},  # optional: receive-queue wait -> penalty
     "apps": [{"target": "hosts.apps:sink", "args": {...}}]}

Port i of the list is NIC port i, which is plane i. ``neighbor_mac`` is the static next-hop MAC
(the switch port or, host to host, the peer NIC). Errors name the offending field.

``core`` sets timing knobs of the transport core (hosts.transport.HostConfig). Their defaults
are sized for real NICs (a 20 us SACK delay, EV probes every 1 ms, endpoint answers awaited
5 ms); an emulated fabric whose RTTs are milliseconds may need longer ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.classes import DEFAULT_CLASSES, ClassMap, TrafficClass
from common.evbits import UsidSlot, UsidTemplate
from hosts.wire import EvMode, ip6, mac


class ConfigError(ValueError):
    """The agent configuration is invalid; the message names the field."""


@dataclass(frozen=True)
class NicPortConfig:
    ifname: str
    mac: bytes
    gid: bytes
    neighbor_mac: bytes


@dataclass(frozen=True)
class AppConfig:
    target: str  # "package.module:function", called as function(context, args) -> int
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RouterConfig:
    """A GPU of a circuit fabric: its rank and every GPU's port GIDs (rank order), for the
    built-in router (hosts/agent/router.py)."""

    rank: int
    gids: tuple[tuple[bytes, ...], ...]
    buckets: int = 64


@dataclass(frozen=True)
class AgentConfig:
    name: str
    ports: tuple[NicPortConfig, ...]
    ev_mode: EvMode = EvMode.ECMP
    srv6_templates: dict[bytes, UsidTemplate] = field(default_factory=dict)
    mtu: int = 4096
    qlog_dir: str | None = None
    metrics_interval: float = 1.0
    classes: ClassMap = DEFAULT_CLASSES
    netns: str | None = None  # library use: open the ports inside this namespace
    apps: tuple[AppConfig, ...] = ()
    rx_batch: int = 64
    evs_per_plane: int = 16  # size of the default EV profile (id 0) on every plane
    seed: int = 1  # the core's deterministic rotation / request-id seed
    cc_window: int = 1 << 30  # bytes in flight per QP of the default (fixed-window) CC
    core: dict[str, float | int | None] = field(default_factory=dict)  # CORE_KNOBS overrides
    router: RouterConfig | None = None  # GPUs of circuit fabrics forward transit traffic
    # responder backpressure (hosts/agent/backpressure.py): the receive-queue wait at which
    # the penalty starts and where it reaches 127 (seconds; high <= low: never penalise)
    backpressure_low: float = 0.005
    backpressure_high: float = 0.05

    def gid_port(self, gid: bytes) -> int | None:
        for i, p in enumerate(self.ports):
            if p.gid == gid:
                return i
        return None


# Transport-core knobs an agent config may set: name -> (type, minimum, maximum, None allowed)
CORE_KNOBS: dict[str, tuple[type, float, float, bool]] = {
    "ack_coalesce": (int, 1, 64, False),  # SACK after this many in-order packets ...
    "ack_delay": (float, 0.0, 1.0, False),  # ... or this long after the first one (s)
    "reorder_threshold": (int, 1, 1 << 16, False),  # fast-loss reordering threshold (packets)
    "probe_after": (float, 0.0, 60.0, True),  # quiet time before a reliability probe (s)
    "per_packet_timeout": (float, 0.0, 60.0, True),  # optional per-packet timer (s)
    "ev_probe_interval": (float, 1e-6, 60.0, False),  # EV probes of ASSUMED_BAD EVs (s)
    "endpoint_timeout": (float, 1e-6, 60.0, False),  # endpoint request answer timeout (s)
    "endpoint_retries": (int, 0, 100, False),  # port status update retransmissions
    "rx_penalty": (int, 0, 127, False),  # responder backpressure (CC_STATE rcv_cwnd_pen)
    "cc_log_interval": (float, 1e-4, 60.0, True),  # recovery:metrics_updated per QP (s)
    "ack_backoff_cap": (int, 1, 1 << 30, False),  # ACK-timeout backoff stops at T x this
    "mpr_budget": (int, 0, 1 << 24, False),  # Dynamic MPR: tracking PSNs shared (0: off)
    "mpr_interval": (float, 1e-5, 10.0, False),  # ... recomputed this often (s)
    # receive resources (0: unlimited): out-of-order PSNs held per responder QP / per host
    # (NACK NO_BITMAP beyond), their payload bytes per QP / per host (NACK NO_PKT_BUFFER)
    "rx_bitmap_qp": (int, 0, 1 << 24, False),
    "rx_bitmap_host": (int, 0, 1 << 30, False),
    "rx_buffer_qp": (int, 0, 1 << 40, False),
    "rx_buffer_host": (int, 0, 1 << 40, False),
}


def parse_core(raw: Any, where: str = "config.core") -> dict[str, float | int | None]:
    """Validate transport-core knob overrides (CORE_KNOBS) into a dict for HostConfig."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be an object")
    out: dict[str, float | int | None] = {}
    for key, value in raw.items():
        spec = CORE_KNOBS.get(key)
        if spec is None:
            raise ConfigError(f"{where}: unknown knob {key!r} (known: {', '.join(CORE_KNOBS)})")
        kind, low, high, optional = spec
        w = f"{where}.{key}"
        if value is None:
            if not optional:
                raise ConfigError(f"{w}: may not be null")
            out[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ConfigError(f"{w}: not a number: {value!r}")
        if kind is int:
            number: float | int = _int(value, w)
        else:
            try:
                number = float(value)
            except ValueError:
                raise ConfigError(f"{w}: not a number: {value!r}") from None
        if not low <= number <= high:  # also rejects NaN
            raise ConfigError(f"{w}: {low:g}..{high:g}, got {value!r}")
        out[key] = number
    return out


_EV_MODES = {"ecmp": EvMode.ECMP, "udp": EvMode.ECMP, "structured": EvMode.STRUCTURED,
             "stev": EvMode.STRUCTURED, "srv6": EvMode.SRV6}


def _get(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise ConfigError(f"{where}: missing field {key!r}")
    return d[key]


def _int(value: Any, where: str) -> int:
    try:
        return int(value, 0) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: not an integer: {value!r}") from None


def _addr(fn: Any, value: Any, where: str) -> bytes:
    try:
        return bytes(fn(str(value)))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def parse_config(d: dict[str, Any]) -> AgentConfig:
    """Validate a decoded JSON object into an AgentConfig (raises ConfigError)."""
    if not isinstance(d, dict):
        raise ConfigError("agent config must be a JSON object")
    name = str(_get(d, "name", "config"))
    raw_ports = _get(d, "ports", "config")
    if not isinstance(raw_ports, list) or not raw_ports:
        raise ConfigError("config.ports: need a non-empty list")
    if len(raw_ports) > 32:
        raise ConfigError("config.ports: at most 32 ports (port_status_mask is 32 bits)")
    ports = []
    for i, p in enumerate(raw_ports):
        w = f"config.ports[{i}]"
        if not isinstance(p, dict):
            raise ConfigError(f"{w}: must be an object")
        ports.append(NicPortConfig(
            ifname=str(_get(p, "ifname", w)),
            mac=_addr(mac, _get(p, "mac", w), f"{w}.mac"),
            gid=_addr(ip6, _get(p, "gid", w), f"{w}.gid"),
            neighbor_mac=_addr(mac, _get(p, "neighbor_mac", w), f"{w}.neighbor_mac"),
        ))
    if len({p.gid for p in ports}) != len(ports):
        raise ConfigError("config.ports: every port needs its own gid")
    mode_name = str(d.get("ev_mode", "ecmp")).lower()
    if mode_name not in _EV_MODES:
        raise ConfigError(f"config.ev_mode: one of {sorted(_EV_MODES)}, got {mode_name!r}")
    templates: dict[bytes, UsidTemplate] = {}
    for dst, t in dict(d.get("srv6_templates", {})).items():
        w = f"config.srv6_templates[{dst}]"
        try:
            slots = tuple(
                UsidSlot(base=_int(s.get("base", 0), w), ev_shift=_int(s.get("ev_shift", 0), w),
                         ev_width=_int(s.get("ev_width", 0), w),
                         usid_shift=_int(s.get("usid_shift", 0), w))
                for s in t.get("slots", [])
            )
            templates[_addr(ip6, dst, w)] = UsidTemplate(block=_int(_get(t, "block", w), w),
                                                          slots=slots)
        except (AttributeError, ValueError) as exc:
            raise ConfigError(f"{w}: {exc}") from None
    mtu = _int(d.get("mtu", 4096), "config.mtu")
    if not 256 <= mtu <= 8192:
        raise ConfigError(f"config.mtu: 256..8192, got {mtu}")
    interval = float(d.get("metrics_interval", 1.0))
    if interval <= 0:
        raise ConfigError("config.metrics_interval must be > 0")
    classes = DEFAULT_CLASSES
    if "classes" in d:
        dscp = dict(DEFAULT_CLASSES.dscp)
        for cname, value in dict(d["classes"]).items():
            try:
                dscp[TrafficClass(cname)] = _int(value, f"config.classes.{cname}")
            except ValueError as exc:
                raise ConfigError(f"config.classes: {exc}") from None
        classes = ClassMap(dscp=dscp, priority=dict(DEFAULT_CLASSES.priority))
        try:
            classes.validate()
        except ValueError as exc:
            raise ConfigError(f"config.classes: {exc}") from None
    apps = []
    for i, a in enumerate(d.get("apps", [])):
        w = f"config.apps[{i}]"
        target = str(_get(a, "target", w))
        if ":" not in target:
            raise ConfigError(f"{w}.target: expected 'module:function', got {target!r}")
        apps.append(AppConfig(target=target, args=dict(a.get("args", {}))))
    batch = _int(d.get("rx_batch", 64), "config.rx_batch")
    if not 1 <= batch <= 1024:
        raise ConfigError("config.rx_batch: 1..1024")
    evs = _int(d.get("evs_per_plane", 16), "config.evs_per_plane")
    if not 1 <= evs <= 4096:
        raise ConfigError("config.evs_per_plane: 1..4096")
    window = _int(d.get("cc_window", 1 << 30), "config.cc_window")
    if window < mtu:
        raise ConfigError(f"config.cc_window: at least one MTU ({mtu}) bytes")
    router = _router(d["router"], ports) if d.get("router") is not None else None
    bp = d.get("backpressure", {})
    if not isinstance(bp, dict) or set(bp) - {"low", "high"}:
        raise ConfigError("config.backpressure: an object with 'low' and/or 'high' (seconds)")
    try:
        bp_low = float(bp.get("low", 0.005))
        bp_high = float(bp.get("high", 0.05))
    except (TypeError, ValueError):
        raise ConfigError(f"config.backpressure: not numbers: {bp!r}") from None
    if not (0 <= bp_low <= 60 and 0 <= bp_high <= 60):
        raise ConfigError(f"config.backpressure: 0..60 s, got {bp!r}")
    return AgentConfig(
        name=name, ports=tuple(ports), ev_mode=_EV_MODES[mode_name], srv6_templates=templates,
        mtu=mtu, qlog_dir=d.get("qlog_dir"), metrics_interval=interval, classes=classes,
        netns=d.get("netns"), apps=tuple(apps), rx_batch=batch, evs_per_plane=evs,
        seed=_int(d.get("seed", 1), "config.seed"), cc_window=window,
        core=parse_core(d.get("core", {})), router=router,
        backpressure_low=bp_low, backpressure_high=bp_high,
    )


def _router(raw: Any, ports: list[NicPortConfig]) -> RouterConfig:
    w = "config.router"
    if not isinstance(raw, dict):
        raise ConfigError(f"{w}: must be an object")
    rank = _int(_get(raw, "rank", w), f"{w}.rank")
    gpus = _get(raw, "gids", w)
    if not isinstance(gpus, list) or not 0 <= rank < len(gpus):
        raise ConfigError(f"{w}.gids: one list of GIDs per GPU, including rank {rank}")
    gids = tuple(tuple(_addr(ip6, g, f"{w}.gids[{r}]") for g in owned)
                 for r, owned in enumerate(gpus))
    if set(gids[rank]) != {p.gid for p in ports}:
        raise ConfigError(f"{w}.gids[{rank}] must be this agent's port GIDs")
    buckets = _int(raw.get("buckets", 64), f"{w}.buckets")
    if not 1 <= buckets <= 256 or buckets & (buckets - 1):
        raise ConfigError(f"{w}.buckets: a power of two up to 256, got {buckets}")
    return RouterConfig(rank, gids, buckets)


def load_config(path: str | Path) -> AgentConfig:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return parse_config(data)
