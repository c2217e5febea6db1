"""``mrcnet ctl``: the operator's client for the controller (mrc_ctl operations and fabric).

A command without modifying options queries; with options it modifies (all options of one
command are one request, applied all-or-nothing). EVs are written ``VALUE@PORT`` (VALUE in
decimal or 0x-hex, PORT 1-based). ``--json`` prints the protobuf answer as JSON.
Examples are in docs/controller.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from common.units import parse_duration, parse_rate
from controller.auth import AuthError, open_channel, read_token
from controller.profile_store import nscc_defaults

DEFAULT_SOCKET = os.environ.get("MRCNET_CTL_SOCKET", "/run/mrcnet/controller.sock")


def default_socket() -> str:
    """$MRCNET_CTL_SOCKET, else the controller of the newest fabric ``mrcnet up`` runs
    (common.fabric_registry), else /run/mrcnet/controller.sock."""
    if "MRCNET_CTL_SOCKET" in os.environ:
        return os.environ["MRCNET_CTL_SOCKET"]
    from common.fabric_registry import newest_controller

    return newest_controller() or DEFAULT_SOCKET
STATES: dict[str, int] = {"INIT": pb.PROFILE_INIT, "OFFLINE": pb.PROFILE_OFFLINE, "ONLINE": pb.PROFILE_ONLINE}
FMT_MODES: dict[str, int] = {"STEV": pb.EV_FMT_STEV, "SRV6": pb.EV_FMT_SRV6, "UDP": pb.EV_FMT_UDP}
EV_MODES: dict[str, int] = {"AUTO": pb.EV_MODE_AUTO, "EXP": pb.EV_MODE_EXP, "GEN": pb.EV_MODE_GEN}
EV_STATES: dict[str, int] = {"GOOD": pb.EV_GOOD, "ASSUMED_BAD": pb.EV_ASSUMED_BAD, "DENIED": pb.EV_DENIED}


class UsageError(ValueError):
    pass


def parse_ev(text: str) -> pb.Ev:
    value, sep, port = text.partition("@")
    try:
        if not sep:
            raise ValueError
        return pb.Ev(value=int(value, 0), port=int(port))
    except ValueError:
        raise UsageError(f"EV {text!r} must be VALUE@PORT, e.g. 0x1a2b@1") from None


def _choice(table: dict[str, int], what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        key = text.upper()
        if key not in table:
            raise argparse.ArgumentTypeError(f"{what} must be one of {', '.join(table)}")
        return table[key]

    return parse


def parse_field(text: str) -> pb.EvField:
    parts = text.split(":")
    if len(parts) != 5:
        raise UsageError(f"field {text!r} must be width:init:min:max:mask")
    try:
        w, init, lo, hi, mask = (int(p, 0) for p in parts)
    except ValueError:
        raise UsageError(f"field {text!r}: numbers expected") from None
    return pb.EvField(width=w, init_val=init, min_val=lo, max_val=hi, mask=mask)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--unix", default=None,
        help="controller socket (default: $MRCNET_CTL_SOCKET, else the running fabric's "
             f"controller, else {DEFAULT_SOCKET})"
    )
    parser.add_argument("--tcp", help="controller HOST:PORT (needs --token-file or TLS)")
    parser.add_argument("--token-file", help="bearer token for a TCP controller")
    parser.add_argument("--tls-cert", help="client certificate (mutual TLS)")
    parser.add_argument("--tls-key", help="client key (mutual TLS)")
    parser.add_argument("--tls-ca", help="CA of the controller's certificate")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per call")
    sub = parser.add_subparsers(dest="ctl_cmd", metavar="COMMAND")
    sub.add_parser("version", help="controller API version")
    p = sub.add_parser("device", help="device attributes")
    p.add_argument("--host")
    p = sub.add_parser("port", help="query or set a host port")
    p.add_argument("host")
    p.add_argument("port", type=int)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--enable", action="store_true")
    g.add_argument("--disable", action="store_true")
    p = sub.add_parser("fmt", help="EV format profile")
    p.add_argument("id", type=int)
    p.add_argument("--state", type=_choice(STATES, "state"))
    p.add_argument("--mode", type=_choice(FMT_MODES, "mode"))
    p.add_argument("--fields", help="comma-separated field widths, e.g. 8,4,4")
    p = sub.add_parser("ev", help="EV profile")
    p.add_argument("id", type=int)
    p.add_argument("--state", type=_choice(STATES, "state"))
    p.add_argument("--mode", type=_choice(EV_MODES, "mode"))
    p.add_argument("--fmt", type=int, help="EV format profile id")
    p.add_argument("--count", type=int)
    p.add_argument("--min-active", type=int)
    p.add_argument("--events", help="event mask, e.g. GOOD,ASSUMED_BAD ('' for none)")
    p.add_argument("--field", action="append", default=[], help="GEN field width:init:min:max:mask")
    p.add_argument(
        "--replace", action="append", default=[], help="OLD=NEW (EVs; OLD 0@0 = unpopulated)"
    )
    p.add_argument("--replace-all", action="store_true", help="replace every copy of OLD")
    p.add_argument("--deny", action="append", default=[], metavar="EV")
    p.add_argument(
        "--allow", action="append", default=[], metavar="EV", help="set GOOD (lift a denial)"
    )
    p.add_argument("--assume-bad", action="append", default=[], metavar="EV")
    p.add_argument("--query", action="append", default=[], metavar="EV", help="QUERY_EV_STATE")
    p.add_argument("--array", action="store_true", help="QUERY_EV_ARRAY")
    p = sub.add_parser("cc", help="CC profile")
    p.add_argument("id", type=int)
    p.add_argument("--state", type=_choice(STATES, "state"))
    p.add_argument("--algorithm")
    p.add_argument(
        "--defaults",
        action="store_true",
        help="NSCC defaults from --rate/--base-rtt or the topology",
    )
    p.add_argument("--rate", help="link rate for --defaults, e.g. 1Gbps")
    p.add_argument("--base-rtt", help="base RTT for --defaults, e.g. 200us")
    p.add_argument("--mtu", type=int, default=4096)
    p.add_argument(
        "--set", action="append", default=[], metavar="PARAM=VALUE", help="override one NSCC field"
    )
    p = sub.add_parser("events", help="stream EV events")
    p.add_argument("--profile", type=int, action="append", default=[])
    p.add_argument(
        "--count", type=int, default=0, help="stop after N events (0 = until Ctrl-C/--for)"
    )
    p.add_argument("--for", dest="duration", type=float, default=0.0, help="stop after S seconds")
    p = sub.add_parser("probe", help="EV probes (batched) through the agent owning --sgid")
    p.add_argument("--sgid", required=True)
    p.add_argument("--dgid", required=True)
    p.add_argument(
        "--ev", action="append", required=True, help="EV to probe (VALUE@PORT), repeatable"
    )
    p.add_argument("--mode", type=_choice(FMT_MODES, "mode"), default=pb.EV_FMT_UDP)
    p.add_argument("--tc", type=int, default=48, help="request DSCP")
    p.add_argument("--wait", default="1s", help="response timeout, e.g. 500ms")
    p = sub.add_parser("port-status", help="send a port status update")
    p.add_argument("--sgid", required=True)
    p.add_argument("--dgid", required=True)
    p.add_argument("--mask", type=lambda s: int(s, 0), required=True,
                   help="usable ports: bit p-1 = port p (0b10: port 2 only)")
    p.add_argument("--wait", default="1s")
    sub.add_parser("topo", help="topology view")
    p = sub.add_parser("link", help="set a link up or down")
    p.add_argument("link", help="link id or node:port")
    p.add_argument("state", choices=["up", "down"])
    p = sub.add_parser("circuits", help="show or set optical circuits ('g0:0->g1:1' ...)")
    p.add_argument("circuit", nargs="*")
    sub.add_parser("stats", help="controller statistics")


def _channel(args: argparse.Namespace) -> grpc.Channel:
    tls = (args.tls_cert, args.tls_key, args.tls_ca)
    if any(tls) and not all(tls):
        raise UsageError("--tls-cert, --tls-key and --tls-ca go together")
    if args.tcp:
        token = read_token(args.token_file) if args.token_file else None
        return open_channel(args.tcp, token=token, tls=tls if all(tls) else None)  # type: ignore[arg-type]
    args.unix = args.unix or default_socket()
    return open_channel(f"unix:{args.unix}")


def _emit(args: argparse.Namespace, msg: Message, text: Callable[[Any], str] | None = None) -> None:
    if args.json or text is None:
        print(
            json.dumps(
                json_format.MessageToDict(msg, preserving_proto_field_name=True),
                indent=None if args.json else 2,
            )
        )
    else:
        print(text(msg))


def _ev_op(op_type: int, evs: list[str], state: int = 0) -> pb.EvOp:
    op = pb.EvOp(op=op_type)  # type: ignore[arg-type]
    for text in evs:
        op.entries.add(ev=parse_ev(text), state=state)  # type: ignore[arg-type]
    return op


def _cmd_ev(args: argparse.Namespace, ctl: pb_grpc.MrcCtlStub, t: float) -> Message:
    req = pb.ModifyEvProfileRequest(profile_id=args.id)
    modify = False
    for attr, value in (
        ("state", args.state), ("mode", args.mode), ("fmt_profile_id", args.fmt),
        ("ev_count", args.count), ("ev_min_active", args.min_active),
    ):  # fmt: skip
        if value is not None:
            setattr(req, attr, value)
            modify = True
    if args.events is not None:
        names = [s for s in args.events.replace(" ", "").split(",") if s]
        req.event_mask.SetInParent()
        req.event_mask.states.extend(_choice(EV_STATES, "event state")(n) for n in names)
        modify = True
    if args.field:
        req.fields.fields.extend(parse_field(f) for f in args.field)
        modify = True
    ops = [bool(args.replace), bool(args.deny or args.allow or args.assume_bad)]
    if sum(ops) > 1:
        raise UsageError(
            "--replace and state changes (--deny/--allow/--assume-bad) are separate requests"
        )
    if args.replace:
        req.ev_op.op = pb.REPLACE_EV
        for pair in args.replace:
            old, sep, new = pair.partition("=")
            if not sep:
                raise UsageError(f"--replace {pair!r} must be OLD=NEW")
            req.ev_op.entries.add(
                ev=parse_ev(old), ev_new=parse_ev(new), all_copies=args.replace_all
            )
        modify = True
    if ops[1]:
        req.ev_op.op = pb.MODIFY_EV_STATE
        for evs, state in (
            (args.deny, pb.EV_DENIED),
            (args.allow, pb.EV_GOOD),
            (args.assume_bad, pb.EV_ASSUMED_BAD),
        ):
            for text in evs:
                req.ev_op.entries.add(ev=parse_ev(text), state=state)
        modify = True
    if modify:
        if args.query or args.array:
            raise UsageError("--query/--array are queries; run them separately")
        return ctl.ModifyEvProfile(req, timeout=t)  # type: ignore[no-any-return]
    query = pb.QueryEvProfileRequest(profile_id=args.id)
    if args.array:
        query.ev_op.op = pb.QUERY_EV_ARRAY
    elif args.query:
        query.ev_op.CopyFrom(_ev_op(pb.QUERY_EV_STATE, args.query))
    return ctl.QueryEvProfile(query, timeout=t)  # type: ignore[no-any-return]


def _cmd_cc(args: argparse.Namespace, chan: grpc.Channel, t: float) -> Message:
    ctl = pb_grpc.MrcCtlStub(chan)
    req = pb.ModifyCcProfileRequest(profile_id=args.id)
    modify = False
    if args.state is not None:
        req.state = args.state
        modify = True
    if args.algorithm:
        req.algorithm = args.algorithm
        modify = True
    if args.defaults or args.set:
        if args.defaults:
            rate = parse_rate(args.rate) if args.rate else None
            rtt = parse_duration(args.base_rtt) if args.base_rtt else None
            if rate is None or rtt is None:
                view = pb_grpc.MrcFabricStub(chan).GetTopology(pb.GetTopologyRequest(), timeout=t)
                rate = rate or max((lk.rate_bps for lk in view.links), default=0.0)
                rtt = rtt or view.base_rtt_ns / 1e9
            req.nscc.CopyFrom(nscc_defaults(rate, rtt, args.mtu))
        else:
            req.nscc.CopyFrom(
                ctl.QueryCcProfile(pb.QueryCcProfileRequest(profile_id=args.id), timeout=t).nscc
            )
        for item in args.set:
            key, sep, value = item.partition("=")
            field = pb.NsccConfig.DESCRIPTOR.fields_by_name.get(key)
            if not sep or field is None:
                names = ", ".join(f.name for f in pb.NsccConfig.DESCRIPTOR.fields)
                raise UsageError(f"--set {item!r}: PARAM=VALUE with PARAM one of {names}")
            kind = type(getattr(req.nscc, key))
            setattr(
                req.nscc,
                key,
                value.lower() in ("1", "true", "yes") if kind is bool else kind(float(value)),
            )
        modify = True
    if modify:
        return ctl.ModifyCcProfile(req, timeout=t)  # type: ignore[no-any-return]
    return ctl.QueryCcProfile(pb.QueryCcProfileRequest(profile_id=args.id), timeout=t)  # type: ignore[no-any-return]


def _cmd_events(args: argparse.Namespace, ctl: pb_grpc.MrcCtlStub) -> int:
    stream = ctl.WatchEvEvents(
        pb.WatchEvEventsRequest(profile_ids=args.profile), timeout=args.duration or None
    )
    seen = 0
    try:
        for ev in stream:
            if args.json:
                print(
                    json.dumps(json_format.MessageToDict(ev, preserving_proto_field_name=True)),
                    flush=True,
                )
            else:
                state = pb.EvState.Name(ev.state).removeprefix("EV_")
                drops = f" (dropped {ev.drop_count})" if ev.drop_count else ""
                print(
                    f"profile {ev.profile_id} ev {ev.ev.value:#x}@{ev.ev.port} {state} host {ev.host} qpn {ev.qpn}{drops}",
                    flush=True,
                )
            seen += 1
            if args.count and seen >= args.count:
                stream.cancel()
                break
    except grpc.RpcError as exc:
        if exc.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):  # type: ignore[attr-defined]
            raise
    return 0


def _ep(args: argparse.Namespace, ctl: pb_grpc.MrcCtlStub, op_type: int, t: float) -> Message:
    wait = parse_duration(args.wait)
    req = pb.EpBatchRequest(rsp_timeout_ns=round(wait * 1e9), req_tc=getattr(args, "tc", 48))
    req.op_type = op_type  # type: ignore[assignment]
    if op_type == pb.EP_OP_EV_PROBE:
        for i, text in enumerate(args.ev, start=1):
            req.requests.add(
                req_id=i,
                sgid=args.sgid,
                dgid=args.dgid,
                ev_fmt_mode=args.mode,
                req_ev=parse_ev(text),
            )
    else:
        req.requests.add(req_id=1, sgid=args.sgid, dgid=args.dgid, port_status=args.mask)
    return ctl.EpBatchSendWait(req, timeout=max(t, wait + 5))  # type: ignore[no-any-return]


def _text_topo(view: pb.TopologyView) -> str:
    lines = [
        f"{view.name}: {view.kind}, {view.planes} plane(s), {view.path_mode}, MTU {view.mtu}, base RTT {view.base_rtt_ns / 1000:g}us"
    ]
    for n in view.nodes:
        where = f" plane {n.plane} tier {n.tier} uSID {n.usid:#06x}" if n.kind == "switch" else ""
        agent = " [agent]" if n.agent_registered else ""
        lines.append(f"  {n.kind:6} {n.name}{where}{agent}")
        for p in n.ports:
            gid = f" {p.gid}" if p.gid else ""
            lines.append(f"      port {p.port} -> {p.peer}{gid}")
    for lk in view.links:
        lines.append(
            f"  link {lk.id}: {lk.a} -- {lk.b} {lk.rate_bps / 1e9:g}Gbps {lk.delay_ns / 1000:g}us {'up' if lk.up else 'DOWN'}"
        )
    return "\n".join(lines)


def _text_stats(stats: pb.Statistics) -> str:
    lines = [f"{k:32} {v}" for k, v in sorted(stats.counters.items())]
    lines += [
        f"agent {a.host} ({a.agent_id}) attached={a.attached} reports={a.ev_reports}"
        for a in stats.agents
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    cmd = getattr(args, "ctl_cmd", None)
    if not cmd:
        print("mrcnet ctl: give a command (see mrcnet ctl --help)", file=sys.stderr)
        return 2
    t = args.timeout
    try:
        chan = _channel(args)
    except (UsageError, AuthError, OSError) as exc:
        print(f"mrcnet ctl: {exc}", file=sys.stderr)
        return 2
    ctl = pb_grpc.MrcCtlStub(chan)
    fabric = pb_grpc.MrcFabricStub(chan)
    try:
        if cmd == "version":
            _emit(args, ctl.QueryVersion(pb.QueryVersionRequest(), timeout=t))
        elif cmd == "device":
            _emit(args, ctl.QueryDevice(pb.QueryDeviceRequest(host=args.host or ""), timeout=t))
        elif cmd == "port":
            if args.enable or args.disable:
                state = pb.PORT_ADMIN_ENABLED if args.enable else pb.PORT_ADMIN_DISABLED
                req = pb.ModifyPortRequest(host=args.host, port=args.port, admin_state=state)
                _emit(args, ctl.ModifyPort(req, timeout=t))
            else:
                _emit(
                    args,
                    ctl.QueryPort(pb.QueryPortRequest(host=args.host, port=args.port), timeout=t),
                )
        elif cmd == "fmt":
            freq = pb.ModifyEvFmtProfileRequest(profile_id=args.id)
            if args.state is not None:
                freq.state = args.state
            if args.mode is not None:
                freq.mode = args.mode
            if args.fields:
                try:
                    freq.fields.widths.extend(int(w) for w in args.fields.split(","))
                except ValueError:
                    raise UsageError(
                        f"--fields {args.fields!r}: comma-separated integers"
                    ) from None
            if any(freq.HasField(f) for f in ("state", "mode", "fields")):
                _emit(args, ctl.ModifyEvFmtProfile(freq, timeout=t))
            else:
                _emit(
                    args,
                    ctl.QueryEvFmtProfile(
                        pb.QueryEvFmtProfileRequest(profile_id=args.id), timeout=t
                    ),
                )
        elif cmd == "ev":
            _emit(args, _cmd_ev(args, ctl, t))
        elif cmd == "cc":
            _emit(args, _cmd_cc(args, chan, t))
        elif cmd == "events":
            return _cmd_events(args, ctl)
        elif cmd == "probe":
            _emit(args, _ep(args, ctl, int(pb.EP_OP_EV_PROBE), t))
        elif cmd == "port-status":
            _emit(args, _ep(args, ctl, int(pb.EP_OP_PORT_STATUS_UPDATE), t))
        elif cmd == "topo":
            _emit(args, fabric.GetTopology(pb.GetTopologyRequest(), timeout=t), _text_topo)
        elif cmd == "link":
            _emit(
                args,
                fabric.SetLinkState(
                    pb.SetLinkStateRequest(link=args.link, up=args.state == "up"), timeout=t
                ),
            )
        elif cmd == "circuits":
            if args.circuit:
                circuits = []
                for text in args.circuit:
                    src, sep, dst = text.partition("->")
                    if not sep:
                        raise UsageError(f"circuit {text!r} must be 'gpu:port->gpu:port'")
                    circuits.append(pb.Circuit(src=src.strip(), dst=dst.strip()))
                _emit(
                    args,
                    fabric.ReconfigureCircuits(
                        pb.ReconfigureCircuitsRequest(circuits=circuits), timeout=t
                    ),
                )
            else:
                _emit(args, fabric.GetCircuits(pb.GetCircuitsRequest(), timeout=t))
        elif cmd == "stats":
            _emit(args, fabric.GetStatistics(pb.GetStatisticsRequest(), timeout=t), _text_stats)
        else:  # pragma: no cover - argparse restricts commands
            raise UsageError(f"unknown command {cmd}")
    except UsageError as exc:
        print(f"mrcnet ctl: {exc}", file=sys.stderr)
        return 2
    except grpc.RpcError as exc:
        code = exc.code()  # type: ignore[attr-defined]
        details = exc.details()  # type: ignore[attr-defined]
        if code == grpc.StatusCode.UNAVAILABLE and not args.tcp:
            details = f"cannot reach the controller at {args.unix or default_socket()} ({details})"
        print(f"mrcnet ctl: {code.name}: {details}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        chan.close()
    return 0
