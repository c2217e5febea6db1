"""The controller's operator commands, written once: ``mrcnet ctl COMMAND`` and the fabric
CLI's ``ctl COMMAND`` parse the same arguments and run the same code over one client
(controller/client.py).

A command without modifying options queries; with options it modifies (all options of one
command are one request, applied all-or-nothing). EVs are written ``VALUE@PORT`` (VALUE in
decimal or 0x-hex, PORT 1-based). ``--json`` prints the protobuf answer as JSON. Examples are
in docs/controller.md.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from common.proto import mrc_ctl_pb2 as pb
from common.units import parse_duration, parse_rate
from controller.client import ControllerClient
from controller.profile_store import nscc_defaults

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


class CommandParseExit(Exception):
    """A command line of the fabric CLI's ``ctl`` did not parse (usage already printed)."""


class _Parser(argparse.ArgumentParser):
    """argparse that prints to a given stream and raises instead of exiting (for a shell)."""

    def __init__(self, *args: Any, out: TextIO, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.out = out

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            self.out.write(message)
            self.out.flush()

    def exit(self, status: int = 0, message: str | None = None) -> Any:  # type: ignore[override]
        if message:
            self._print_message(message)
        raise CommandParseExit(status)

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.print_usage(self.out)
        self.exit(2, f"{self.prog}: {message}\n")


def command_parser(prog: str, out: TextIO) -> argparse.ArgumentParser:
    """A parser of the commands alone (no connection options), for a shell: it writes usage
    and errors to ``out`` and raises CommandParseExit instead of exiting."""
    parser = _Parser(prog=prog, out=out, description="controller commands (mrcnet ctl)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_commands(parser, _Parser, out)
    return parser


def add_commands(parser: argparse.ArgumentParser, parser_class: Any = None,
                 out: TextIO | None = None) -> None:
    """Every command as a subcommand of ``parser`` (``args.ctl_cmd`` names the one given)."""
    extra: dict[str, Any] = {} if parser_class is None else {"parser_class": parser_class}
    sub = parser.add_subparsers(dest="ctl_cmd", metavar="COMMAND", **extra)
    if out is not None:  # subparsers of a shell parser print to the shell too
        add = sub.add_parser

        def add_parser(name: str, **kwargs: Any) -> argparse.ArgumentParser:
            return add(name, out=out, **kwargs)  # type: ignore[no-any-return]

        sub.add_parser = add_parser  # type: ignore[method-assign]
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


def _emit(args: argparse.Namespace, out: TextIO, msg: Message,
          text: Callable[[Any], str] | None = None) -> None:
    if getattr(args, "json", False) or text is None:
        print(json.dumps(json_format.MessageToDict(msg, preserving_proto_field_name=True),
                         indent=None if getattr(args, "json", False) else 2), file=out)
    else:
        print(text(msg), file=out)
    out.flush()


def _ev_op(op_type: int, evs: list[str], state: int = 0) -> pb.EvOp:
    op = pb.EvOp(op=op_type)  # type: ignore[arg-type]
    for text in evs:
        op.entries.add(ev=parse_ev(text), state=state)  # type: ignore[arg-type]
    return op


def _cmd_ev(args: argparse.Namespace, client: ControllerClient, t: float) -> Message:
    ctl = client.ctl
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


def _cmd_cc(args: argparse.Namespace, client: ControllerClient, t: float) -> Message:
    ctl = client.ctl
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
                view = client.fabric.GetTopology(pb.GetTopologyRequest(), timeout=t)
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


def _cmd_events(args: argparse.Namespace, client: ControllerClient, out: TextIO) -> int:
    stream = client.ctl.WatchEvEvents(
        pb.WatchEvEventsRequest(profile_ids=args.profile), timeout=args.duration or None
    )
    seen = 0
    try:
        for ev in stream:
            if getattr(args, "json", False):
                print(json.dumps(json_format.MessageToDict(ev, preserving_proto_field_name=True)),
                      file=out, flush=True)
            else:
                state = pb.EvState.Name(ev.state).removeprefix("EV_")
                drops = f" (dropped {ev.drop_count})" if ev.drop_count else ""
                print(f"profile {ev.profile_id} ev {ev.ev.value:#x}@{ev.ev.port} {state} "
                      f"host {ev.host} qpn {ev.qpn}{drops}", file=out, flush=True)
            seen += 1
            if args.count and seen >= args.count:
                stream.cancel()
                break
    except grpc.RpcError as exc:
        if exc.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):  # type: ignore[attr-defined]
            raise
    return 0


def _ep(args: argparse.Namespace, client: ControllerClient, op_type: int, t: float) -> Message:
    ctl = client.ctl
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


def _text_ev(resp: pb.QueryEvProfileResponse) -> str:
    """An EV profile query as text: the profile, then its EVs (with their states when the
    query returned them) as VALUE@PORT."""
    prof = resp.profile
    lines = [f"EV profile {prof.id}: {pb.ProfileState.Name(prof.state).removeprefix('PROFILE_')}"
             f" {pb.EvMode.Name(prof.mode).removeprefix('EV_MODE_')}, format profile "
             f"{prof.fmt_profile_id} ({pb.EvFmtMode.Name(prof.fmt_mode).removeprefix('EV_FMT_')})"
             f", {len(prof.evs)} EVs, min active {prof.ev_min_active}, load balancing "
             f"{prof.lb_policy or 'rotation'}"]
    if resp.results:
        lines += [f"  {r.ev.value:#x}@{r.ev.port} {pb.EvState.Name(r.state).removeprefix('EV_')}"
                  for r in resp.results]
    elif prof.evs:
        lines.append("  " + " ".join(f"{e.value:#x}@{e.port}" for e in prof.evs))
    if prof.denied:
        lines.append("  denied: " + " ".join(f"{e.value:#x}@{e.port}" for e in prof.denied))
    return "\n".join(lines)


def _text_stats(stats: pb.Statistics) -> str:
    lines = [f"{k:32} {v}" for k, v in sorted(stats.counters.items())]
    lines += [
        f"agent {a.host} ({a.agent_id}) attached={a.attached} reports={a.ev_reports}"
        for a in stats.agents
    ]
    return "\n".join(lines)




def execute(args: argparse.Namespace, client: ControllerClient, out: TextIO) -> int:
    """Run the parsed command ``args.ctl_cmd`` through ``client``, writing to ``out``.
    Raises UsageError for a malformed request and grpc.RpcError for a refused one."""
    cmd = args.ctl_cmd
    t = client.timeout
    ctl, fabric = client.ctl, client.fabric
    if cmd == "version":
        _emit(args, out, ctl.QueryVersion(pb.QueryVersionRequest(), timeout=t))
    elif cmd == "device":
        _emit(args, out, ctl.QueryDevice(pb.QueryDeviceRequest(host=args.host or ""), timeout=t))
    elif cmd == "port":
        if args.enable or args.disable:
            state = pb.PORT_ADMIN_ENABLED if args.enable else pb.PORT_ADMIN_DISABLED
            req = pb.ModifyPortRequest(host=args.host, port=args.port, admin_state=state)
            _emit(args, out, ctl.ModifyPort(req, timeout=t))
        else:
            _emit(
                args, out,
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
            _emit(args, out, ctl.ModifyEvFmtProfile(freq, timeout=t))
        else:
            _emit(
                args, out,
                ctl.QueryEvFmtProfile(
                    pb.QueryEvFmtProfileRequest(profile_id=args.id), timeout=t
                ),
            )
    elif cmd == "ev":
        answer = _cmd_ev(args, client, t)
        _emit(args, out, answer,
              _text_ev if isinstance(answer, pb.QueryEvProfileResponse) else None)
    elif cmd == "cc":
        _emit(args, out, _cmd_cc(args, client, t))
    elif cmd == "events":
        return _cmd_events(args, client, out)
    elif cmd == "probe":
        _emit(args, out, _ep(args, client, int(pb.EP_OP_EV_PROBE), t))
    elif cmd == "port-status":
        _emit(args, out, _ep(args, client, int(pb.EP_OP_PORT_STATUS_UPDATE), t))
    elif cmd == "topo":
        _emit(args, out, fabric.GetTopology(pb.GetTopologyRequest(), timeout=t), _text_topo)
    elif cmd == "link":
        _emit(
            args, out,
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
                args, out,
                fabric.ReconfigureCircuits(
                    pb.ReconfigureCircuitsRequest(circuits=circuits), timeout=t
                ),
            )
        else:
            _emit(args, out, fabric.GetCircuits(pb.GetCircuitsRequest(), timeout=t))
    elif cmd == "stats":
        _emit(args, out, fabric.GetStatistics(pb.GetStatisticsRequest(), timeout=t), _text_stats)
    else:  # pragma: no cover - argparse restricts commands
        raise UsageError(f"unknown command {cmd}")
    return 0
