"""EV format, EV and CC profiles: the mrc_ctl profile model, in memory, all-or-nothing.

Lifecycle of every profile: INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT (mrc_ctl.h).
Requirements: EV format to OFFLINE needs a mode, to ONLINE field widths. EV profile to OFFLINE
needs a mode (and, unless AUTO, a format profile and an EV count; GEN also fields); to ONLINE
the min-active count and the event mask, a fully populated array (EXP) and an ONLINE format
profile. CC profile to OFFLINE needs the algorithm (``uet-1.0-nscc`` or ``none``, the fixed
window), to ONLINE its configuration (NSCC's parameters; the fixed window's ``max_cwnd``).
ONLINE profiles may change their event mask, EV array (REPLACE_EV), EV states, fields, load
balancing policy (``lb_policy``: rotation, reps, bitmap) and CC configuration (the device advertises *_PROFILE_MODIFY_ONLINE).

Each modify works on a copy and commits only when the whole request is valid; it returns the
messages the controller must send to every agent (profile now ONLINE or changed, profile
removed, EV state changes). GEN profiles are expanded here into the explicit EV array agents
receive, so agents and the controller agree on the EV universe by construction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from common.evgen import GenField, gen_array
from common.nscc import profile_fields, scaled
from common.proto import mrc_ctl_pb2 as pb
from controller.errors import busy, invalid, not_found

NSCC = "uet-1.0-nscc"
# The fixed window (the transport's "none"): no congestion control beyond ``max_cwnd`` bytes
# in flight, the only field of its configuration that it reads (an RC baseline's window).
FIXED_WINDOW = "none"
CC_ALGORITHMS = (NSCC, FIXED_WINDOW)
LB_POLICIES = ("rotation", "reps", "bitmap")  # EV profile lb_policy (agents' spraying policies)
MAX_FMT_PROFILES = 16
MAX_EV_PROFILES = 64
MAX_CC_PROFILES = 64
EV_MAX_COUNT_PROFILE = 4096
EV_MAX_COUNT = 65536
EV_MAX_WIDTH = 32
EV_OP_MAX_ENTRIES = 4096
FMT_MAX_BITS = {pb.EV_FMT_STEV: 32, pb.EV_FMT_UDP: 16, pb.EV_FMT_SRV6: 16}
EVENT_STATES = (pb.EV_GOOD, pb.EV_ASSUMED_BAD)
SETTABLE_STATES = (pb.EV_GOOD, pb.EV_ASSUMED_BAD, pb.EV_DENIED)

EvKey = tuple[int, int]  # (value, port)

_TRANSITIONS = {
    (pb.PROFILE_INIT, pb.PROFILE_OFFLINE),
    (pb.PROFILE_OFFLINE, pb.PROFILE_ONLINE),
    (pb.PROFILE_ONLINE, pb.PROFILE_OFFLINE),
    (pb.PROFILE_OFFLINE, pb.PROFILE_INIT),
}


def enum_name(enum: Any, value: int) -> str:
    """The name of an enum value, or ``unknown value N`` for one the proto does not define
    (a request may carry any number in an enum field)."""
    try:
        return str(enum.Name(value))
    except ValueError:
        return f"unknown value {value}"


def state_name(state: int) -> str:
    return enum_name(pb.ProfileState, state).removeprefix("PROFILE_")


def _check_transition(kind: str, pid: int, cur: int, new: int) -> None:
    if cur != new and (cur, new) not in _TRANSITIONS:
        raise invalid(
            f"{kind} profile {pid}: cannot go from {state_name(cur)} to {state_name(new)} "
            "(lifecycle INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT)"
        )


def ev_key(ev: pb.Ev) -> EvKey:
    return (ev.value, ev.port)


def ev_text(ev: pb.Ev | EvKey) -> str:
    value, port = ev_key(ev) if isinstance(ev, pb.Ev) else ev
    return f"{value:#x}@{port}"


@dataclass
class _EvRecord:
    """An EV profile plus what is not part of its wire view."""

    profile: pb.EvProfile
    min_active_set: bool = False
    event_mask_set: bool = False
    overrides: dict[EvKey, int] = field(default_factory=dict)  # controller-set states
    reports: dict[str, dict[EvKey, int]] = field(default_factory=dict)  # host -> reported states

    def copy(self) -> _EvRecord:
        p = pb.EvProfile()
        p.CopyFrom(self.profile)
        return _EvRecord(
            p,
            self.min_active_set,
            self.event_mask_set,
            dict(self.overrides),
            {h: dict(r) for h, r in self.reports.items()},
        )


class ProfileStore:
    """All profiles of the fabric's logical mrc_ctl device. Not thread-safe: callers lock."""

    def __init__(self, ports: int) -> None:
        if not 1 <= ports <= 32:
            raise ValueError("a device has 1..32 ports")
        self.ports = ports
        self.generation = 0
        self._fmt: dict[int, pb.EvFmtProfile] = {}
        self._ev: dict[int, _EvRecord] = {}
        self._cc: dict[int, pb.CcProfile] = {}

    # ------------------------------------------------------------------ helpers

    def _bump(self, msgs: list[pb.ControllerMessage]) -> list[pb.ControllerMessage]:
        if msgs:
            self.generation += 1
            for m in msgs:
                m.generation = self.generation
        return msgs

    @staticmethod
    def _check_id(kind: str, pid: int, limit: int) -> None:
        if not 1 <= pid <= limit:
            raise not_found(f"{kind} profile {pid} does not exist (ids 1..{limit})")

    def _check_ev(self, ev: pb.Ev, bits: int, what: str) -> None:
        if not 1 <= ev.port <= self.ports:
            raise invalid(f"{what} {ev_text(ev)}: port {ev.port} outside 1..{self.ports}")
        if ev.value >= 1 << bits:
            raise invalid(f"{what} {ev_text(ev)}: value does not fit {bits} bits")
        if ev.srv6_container and len(ev.srv6_container) != 16:
            raise invalid(f"{what} {ev_text(ev)}: an SRv6 container is 16 bytes")

    # ------------------------------------------------------------------ EV format profiles

    def fmt_profile(self, pid: int) -> pb.EvFmtProfile:
        self._check_id("EV format", pid, MAX_FMT_PROFILES)
        cur = self._fmt.get(pid)
        if cur is None:
            return pb.EvFmtProfile(id=pid, state=pb.PROFILE_INIT)
        out = pb.EvFmtProfile()
        out.CopyFrom(cur)
        return out

    def modify_fmt(
        self, req: pb.ModifyEvFmtProfileRequest
    ) -> tuple[pb.EvFmtProfile, list[pb.ControllerMessage]]:
        pid = req.profile_id
        new = self.fmt_profile(pid)
        old_state = new.state
        target = req.state if req.HasField("state") else old_state
        _check_transition("EV format", pid, old_state, target)
        editing = req.HasField("mode") or req.HasField("fields")
        if old_state == pb.PROFILE_ONLINE and editing:
            raise invalid(f"EV format profile {pid} is ONLINE: set it OFFLINE before changing it")
        if req.HasField("mode"):
            if req.mode not in FMT_MAX_BITS:
                raise invalid(f"EV format profile {pid}: mode must be STEV, SRV6 or UDP")
            new.mode = req.mode
        if req.HasField("fields"):
            widths = list(req.fields.widths)
            if not 1 <= len(widths) <= 8 or any(not 1 <= w <= EV_MAX_WIDTH for w in widths):
                raise invalid(
                    f"EV format profile {pid}: 1..8 fields of 1..{EV_MAX_WIDTH} bits each"
                )
            del new.field_widths[:]
            new.field_widths.extend(widths)
        if target == pb.PROFILE_INIT and old_state != pb.PROFILE_INIT:
            self._fmt_in_use(pid)
            new = pb.EvFmtProfile(id=pid, state=pb.PROFILE_INIT)
        if target == pb.PROFILE_OFFLINE and new.mode == pb.EV_FMT_UNSPECIFIED:
            raise invalid(f"EV format profile {pid}: going OFFLINE needs a mode")
        if target == pb.PROFILE_ONLINE:
            if not new.field_widths:
                raise invalid(f"EV format profile {pid}: going ONLINE needs field widths")
            total = sum(new.field_widths)
            limit = FMT_MAX_BITS[new.mode]
            if total > limit:
                raise invalid(
                    f"EV format profile {pid}: fields total {total} bits, "
                    f"{enum_name(pb.EvFmtMode, new.mode)} EVs have {limit}"
                )
        if old_state == pb.PROFILE_ONLINE and target != pb.PROFILE_ONLINE:
            self._fmt_in_use(pid)
        new.state = target
        self._fmt[pid] = new
        msgs: list[pb.ControllerMessage] = []
        if target == pb.PROFILE_ONLINE and old_state != pb.PROFILE_ONLINE:
            msgs.append(pb.ControllerMessage(fmt_profile=new))
        elif old_state == pb.PROFILE_ONLINE and target != pb.PROFILE_ONLINE:
            msgs.append(pb.ControllerMessage(removed=pb.ProfileRemoved(kind="fmt", profile_id=pid)))
        return self.fmt_profile(pid), self._bump(msgs)

    def _fmt_in_use(self, pid: int) -> None:
        for rec in self._ev.values():
            p = rec.profile
            if p.fmt_profile_id == pid and p.state != pb.PROFILE_INIT:
                raise busy(
                    f"EV format profile {pid} is used by EV profile {p.id} "
                    f"({state_name(p.state)}); reset that profile first"
                )

    # ------------------------------------------------------------------ EV profiles

    def _ev_view(self, pid: int) -> _EvRecord:
        """The stored record, read-only. Stored profile messages are never mutated: a modify
        works on a copy and replaces the record (copy-on-write), so they can be shared."""
        self._check_id("EV", pid, MAX_EV_PROFILES)
        rec = self._ev.get(pid)
        return rec if rec is not None else _EvRecord(pb.EvProfile(id=pid, state=pb.PROFILE_INIT))

    def _ev_record(self, pid: int) -> _EvRecord:
        """A private copy of the record, for a modify."""
        rec = self._ev_view(pid)
        return rec.copy() if pid in self._ev else rec

    def ev_profile(self, pid: int) -> pb.EvProfile:
        """The profile (read-only: do not mutate the returned message)."""
        return self._ev_view(pid).profile

    def _ev_bits(self, p: pb.EvProfile) -> int:
        if p.mode == pb.EV_MODE_AUTO or not p.fmt_profile_id:
            return 16
        fmt = self._fmt.get(p.fmt_profile_id)
        return FMT_MAX_BITS.get(fmt.mode, 16) if fmt else 16

    def modify_ev(
        self, req: pb.ModifyEvProfileRequest
    ) -> tuple[pb.EvProfile, list[pb.ControllerMessage]]:
        pid = req.profile_id
        rec = self._ev_record(pid)
        p = rec.profile
        old_state = p.state
        target = req.state if req.HasField("state") else old_state
        _check_transition("EV", pid, old_state, target)
        msgs: list[pb.ControllerMessage] = []
        if old_state == pb.PROFILE_ONLINE:
            for name in ("mode", "fmt_profile_id", "ev_count", "ev_min_active"):
                if req.HasField(name):
                    raise invalid(
                        f"EV profile {pid} is ONLINE: {name} cannot change (set it OFFLINE)"
                    )
        if req.HasField("mode"):
            if req.mode not in (pb.EV_MODE_AUTO, pb.EV_MODE_EXP, pb.EV_MODE_GEN):
                raise invalid(f"EV profile {pid}: mode must be AUTO, EXP or GEN")
            if req.mode != p.mode and old_state == pb.PROFILE_OFFLINE:
                # a new mode starts from an empty EV universe
                del p.evs[:]
                del p.fields[:]
                rec.overrides.clear()
            p.mode = req.mode
            if p.mode == pb.EV_MODE_EXP and old_state == pb.PROFILE_OFFLINE:
                self._resize(p)
        if req.HasField("fmt_profile_id"):
            fmt_id = req.fmt_profile_id
            if fmt_id not in self._fmt or self._fmt[fmt_id].state == pb.PROFILE_INIT:
                raise not_found(f"EV profile {pid}: EV format profile {fmt_id} is not configured")
            p.fmt_profile_id = fmt_id
            p.fmt_mode = self._fmt[fmt_id].mode
        if req.HasField("ev_count"):
            if not 1 <= req.ev_count <= EV_MAX_COUNT_PROFILE:
                raise invalid(
                    f"EV profile {pid}: ev_count {req.ev_count} outside 1..{EV_MAX_COUNT_PROFILE}"
                )
            if self._total_evs(exclude=pid) + req.ev_count > EV_MAX_COUNT:
                raise invalid(
                    f"EV profile {pid}: only {EV_MAX_COUNT - self._total_evs(exclude=pid)} EVs free"
                )
            p.ev_count = req.ev_count
            if p.mode == pb.EV_MODE_EXP and old_state != pb.PROFILE_INIT:
                self._resize(p)
        if req.HasField("ev_min_active"):
            p.ev_min_active = req.ev_min_active
            rec.min_active_set = True
        if req.HasField("event_mask"):
            states = list(req.event_mask.states)
            if any(s not in EVENT_STATES for s in states):
                raise invalid(
                    f"EV profile {pid}: the event mask may hold only GOOD and ASSUMED_BAD"
                )
            del p.event_states[:]
            p.event_states.extend(sorted(set(states)))
            rec.event_mask_set = True
        if req.HasField("lb_policy"):
            if req.lb_policy not in LB_POLICIES:
                raise invalid(f"EV profile {pid}: lb_policy must be one of "
                              f"{', '.join(LB_POLICIES)}, got {req.lb_policy!r}")
            p.lb_policy = req.lb_policy
        if req.HasField("fields"):
            if p.mode != pb.EV_MODE_GEN:
                raise invalid(f"EV profile {pid}: fields apply to GEN profiles only")
            del p.fields[:]
            p.fields.extend(req.fields.fields)
        # state transitions (on the copy), then EV operations, then the ONLINE checks
        if target == pb.PROFILE_INIT and old_state != pb.PROFILE_INIT:
            rec = _EvRecord(pb.EvProfile(id=pid, state=pb.PROFILE_INIT))
            p = rec.profile
        if target != pb.PROFILE_INIT and old_state == pb.PROFILE_INIT:
            self._to_offline(p)
        p.state = target
        if p.mode == pb.EV_MODE_GEN and target != pb.PROFILE_INIT:
            fmt = self._fmt.get(p.fmt_profile_id)
            assert fmt is not None  # checked when fmt_profile_id was set
            self._check_fields(p, fmt)
            self._expand(p)
        if req.HasField("ev_op"):
            msgs.extend(self._apply_ev_op(rec, req.ev_op, online=old_state == pb.PROFILE_ONLINE))
        if target == pb.PROFILE_ONLINE:
            self._check_online(rec)
        self._set_denied(rec)
        if target == pb.PROFILE_ONLINE:
            changed = (
                old_state != pb.PROFILE_ONLINE
                or any(req.HasField(f) for f in ("event_mask", "fields", "lb_policy"))
                or (req.HasField("ev_op") and req.ev_op.op == pb.REPLACE_EV)
            )
            if changed:
                msgs = [pb.ControllerMessage(ev_profile=p)]  # the full profile supersedes updates
        elif old_state == pb.PROFILE_ONLINE:
            msgs = [pb.ControllerMessage(removed=pb.ProfileRemoved(kind="ev", profile_id=pid))]
        else:
            msgs = []
        if target == pb.PROFILE_INIT:
            self._ev.pop(pid, None)
        else:
            self._ev[pid] = rec
        return p, self._bump(msgs)

    def _total_evs(self, exclude: int) -> int:
        return sum(r.profile.ev_count for i, r in self._ev.items() if i != exclude)

    def _to_offline(self, p: pb.EvProfile) -> None:
        pid = p.id
        if p.mode == pb.EV_MODE_UNSPECIFIED:
            raise invalid(f"EV profile {pid}: going OFFLINE needs a mode")
        if p.mode == pb.EV_MODE_AUTO:
            return
        if not p.fmt_profile_id:
            raise invalid(
                f"EV profile {pid}: a {enum_name(pb.EvMode, p.mode)} profile needs fmt_profile_id"
            )
        if not p.ev_count:
            raise invalid(f"EV profile {pid}: going OFFLINE needs ev_count")
        if p.mode == pb.EV_MODE_GEN and not p.fields:
            raise invalid(f"EV profile {pid}: a GEN profile needs fields")
        if p.mode == pb.EV_MODE_EXP:
            self._resize(p)

    @staticmethod
    def _resize(p: pb.EvProfile) -> None:
        evs = list(p.evs)[: p.ev_count]
        evs += [pb.Ev() for _ in range(p.ev_count - len(evs))]
        del p.evs[:]
        p.evs.extend(evs)

    def _check_online(self, rec: _EvRecord) -> None:
        p = rec.profile
        pid = p.id
        if not rec.min_active_set or not rec.event_mask_set:
            raise invalid(f"EV profile {pid}: going ONLINE needs ev_min_active and event_mask")
        if p.mode != pb.EV_MODE_AUTO and p.ev_min_active > p.ev_count:
            raise invalid(
                f"EV profile {pid}: ev_min_active {p.ev_min_active} > ev_count {p.ev_count}"
            )
        if p.mode == pb.EV_MODE_AUTO:
            return
        if p.mode == pb.EV_MODE_GEN and not p.fields:
            raise invalid(f"EV profile {pid}: a GEN profile needs fields")
        fmt = self._fmt.get(p.fmt_profile_id)
        if fmt is None or fmt.state != pb.PROFILE_ONLINE:
            raise invalid(f"EV profile {pid}: EV format profile {p.fmt_profile_id} is not ONLINE")
        if p.mode == pb.EV_MODE_EXP:
            for i, ev in enumerate(p.evs):
                if ev.port == 0:
                    raise invalid(
                        f"EV profile {pid}: EV {i} of {p.ev_count} is unpopulated; REPLACE_EV it first"
                    )

    def _check_fields(self, p: pb.EvProfile, fmt: pb.EvFmtProfile) -> None:
        pid = p.id
        if len(p.fields) > len(fmt.field_widths):
            raise invalid(
                f"EV profile {pid}: {len(p.fields)} fields, format profile has {len(fmt.field_widths)}"
            )
        for i, f in enumerate(_gen_fields(p)):
            where = f"EV profile {pid} field {i}"
            if not 1 <= f.width <= fmt.field_widths[i]:
                raise invalid(f"{where}: width {f.width} outside 1..{fmt.field_widths[i]} (format)")
            problem = f.problem()
            if problem:
                raise invalid(f"{where}: {problem}")

    def _expand(self, p: pb.EvProfile) -> None:
        """GEN -> explicit array (common.evgen.gen_array); mrc_ctl ports count from 1."""
        evs = [pb.Ev(value=value, port=port + 1)
               for value, port in gen_array(_gen_fields(p), p.ev_count, self.ports)]
        del p.evs[:]
        p.evs.extend(evs)

    def _apply_ev_op(self, rec: _EvRecord, op: pb.EvOp, online: bool) -> list[pb.ControllerMessage]:
        p = rec.profile
        pid = p.id
        if p.state == pb.PROFILE_INIT:
            raise invalid(f"EV profile {pid} is INIT: configure it (OFFLINE) before EV operations")
        if len(op.entries) > EV_OP_MAX_ENTRIES:
            raise invalid(f"EV profile {pid}: at most {EV_OP_MAX_ENTRIES} entries per operation")
        bits = self._ev_bits(p)
        msgs: list[pb.ControllerMessage] = []
        if op.op == pb.REPLACE_EV:
            if p.mode != pb.EV_MODE_EXP:
                raise invalid(f"EV profile {pid}: REPLACE_EV needs an EXP (explicit) profile")
            keys = [ev_key(e) for e in p.evs]
            for entry in op.entries:
                self._check_ev(entry.ev_new, bits, "new EV")
                cur = ev_key(entry.ev)
                hits = [i for i, k in enumerate(keys) if k == cur]
                if not hits:
                    raise not_found(f"EV profile {pid}: EV {ev_text(cur)} is not in the EV array")
                if entry.state not in (pb.EV_STATE_UNSPECIFIED, pb.EV_GOOD, pb.EV_DENIED):
                    raise invalid(f"EV profile {pid}: a replacement EV starts GOOD or DENIED")
                for i in hits if entry.all_copies else hits[:1]:
                    p.evs[i].CopyFrom(entry.ev_new)
                    keys[i] = ev_key(entry.ev_new)
                new_key = ev_key(entry.ev_new)
                if entry.state == pb.EV_DENIED:
                    rec.overrides[new_key] = pb.EV_DENIED
                if cur not in keys:
                    rec.overrides.pop(cur, None)
            return msgs
        if op.op == pb.MODIFY_EV_STATE:
            known = {ev_key(e) for e in p.evs}
            for entry in op.entries:
                key = ev_key(entry.ev)
                if p.mode == pb.EV_MODE_AUTO:
                    self._check_ev(entry.ev, bits, "EV")
                elif key not in known:
                    raise not_found(f"EV profile {pid}: EV {ev_text(key)} is not in the EV array")
                if entry.state not in SETTABLE_STATES:
                    raise invalid(f"EV profile {pid}: state must be GOOD, ASSUMED_BAD or DENIED")
                if entry.state == pb.EV_ASSUMED_BAD and not online:
                    raise invalid(
                        f"EV profile {pid}: ASSUMED_BAD can be set on ONLINE profiles only"
                    )
                if entry.state == pb.EV_GOOD:
                    rec.overrides.pop(key, None)
                    for reports in rec.reports.values():
                        reports.pop(key, None)
                elif entry.state == pb.EV_DENIED:
                    rec.overrides[key] = pb.EV_DENIED
                if online:
                    update = pb.EvStateUpdate(
                        profile_id=pid, ev=pb.Ev(value=key[0], port=key[1]), state=entry.state
                    )
                    msgs.append(pb.ControllerMessage(ev_state=update))
            return msgs
        if op.op in (pb.QUERY_EV_STATE, pb.QUERY_EV_ARRAY):
            raise invalid("QUERY_EV_STATE / QUERY_EV_ARRAY belong to QueryEvProfile")
        raise invalid(f"EV profile {pid}: unknown EV operation {op.op}")

    @staticmethod
    def _set_denied(rec: _EvRecord) -> None:
        denied = [k for k, s in sorted(rec.overrides.items()) if s == pb.EV_DENIED]
        del rec.profile.denied[:]
        rec.profile.denied.extend(pb.Ev(value=v, port=port) for v, port in denied)

    @staticmethod
    def ev_state_of(rec: _EvRecord, key: EvKey, in_array: bool) -> int:
        """Controller view: DENIED > ASSUMED_BAD (controller or any agent) > GOOD."""
        if key in rec.overrides:
            return rec.overrides[key]
        if any(r.get(key) == pb.EV_ASSUMED_BAD for r in rec.reports.values()):
            return pb.EV_ASSUMED_BAD
        if rec.profile.mode == pb.EV_MODE_AUTO:
            known = any(key in r for r in rec.reports.values())
            return pb.EV_GOOD if known else pb.EV_UNKNOWN
        if key[1] == 0 or not in_array:
            return pb.EV_UNKNOWN
        return pb.EV_GOOD

    def query_ev(self, req: pb.QueryEvProfileRequest) -> pb.QueryEvProfileResponse:
        rec = self._ev_view(req.profile_id)
        resp = pb.QueryEvProfileResponse(profile=rec.profile)
        if not req.HasField("ev_op"):
            return resp
        op = req.ev_op
        known = {ev_key(e) for e in rec.profile.evs}
        if op.op == pb.QUERY_EV_ARRAY:
            for ev in rec.profile.evs:
                key = ev_key(ev)
                resp.results.add(ev=ev, state=self.ev_state_of(rec, key, key in known))
        elif op.op == pb.QUERY_EV_STATE:
            for entry in op.entries:
                key = ev_key(entry.ev)
                if rec.profile.mode != pb.EV_MODE_AUTO and key not in known:
                    raise not_found(
                        f"EV profile {req.profile_id}: EV {ev_text(key)} is not in the EV array"
                    )
                resp.results.add(ev=entry.ev, state=self.ev_state_of(rec, key, key in known))
        else:
            raise invalid("QueryEvProfile supports QUERY_EV_STATE and QUERY_EV_ARRAY")
        return resp

    def report(self, host: str, rep: pb.EvStateReport) -> bool:
        """Record an agent's datapath transition; True when it matches the event mask."""
        rec = self._ev.get(rep.profile_id)
        if rec is None or rec.profile.state != pb.PROFILE_ONLINE:
            return False
        if rep.state not in EVENT_STATES:
            return False
        rec.reports.setdefault(host, {})[ev_key(rep.ev)] = rep.state
        return rep.state in rec.profile.event_states

    def forget_host(self, host: str) -> None:
        for rec in self._ev.values():
            rec.reports.pop(host, None)

    # ------------------------------------------------------------------ CC profiles

    def cc_profile(self, pid: int) -> pb.CcProfile:
        self._check_id("CC", pid, MAX_CC_PROFILES)
        out = pb.CcProfile(id=pid, state=pb.PROFILE_INIT)
        if pid in self._cc:
            out.CopyFrom(self._cc[pid])
        return out

    def modify_cc(
        self, req: pb.ModifyCcProfileRequest
    ) -> tuple[pb.CcProfile, list[pb.ControllerMessage]]:
        pid = req.profile_id
        new = self.cc_profile(pid)
        old_state = new.state
        target = req.state if req.HasField("state") else old_state
        _check_transition("CC", pid, old_state, target)
        if req.HasField("algorithm"):
            if old_state == pb.PROFILE_ONLINE:
                raise invalid(f"CC profile {pid} is ONLINE: the algorithm cannot change")
            if req.algorithm not in CC_ALGORITHMS:
                raise invalid(
                    f"CC profile {pid}: unknown algorithm {req.algorithm!r} (supported: "
                    f"{', '.join(CC_ALGORITHMS)})"
                )
            new.algorithm = req.algorithm
        if req.HasField("nscc"):
            if new.algorithm == FIXED_WINDOW:
                validate_fixed_window(pid, req.nscc)
            else:
                validate_nscc(pid, req.nscc)
            new.nscc.CopyFrom(req.nscc)
        if target == pb.PROFILE_INIT and old_state != pb.PROFILE_INIT:
            new = pb.CcProfile(id=pid, state=pb.PROFILE_INIT)
        if target == pb.PROFILE_OFFLINE and not new.algorithm:
            raise invalid(f"CC profile {pid}: going OFFLINE needs an algorithm")
        if target == pb.PROFILE_ONLINE and not new.HasField("nscc"):
            raise invalid(f"CC profile {pid}: going ONLINE needs its configuration (nscc: the "
                          f"NSCC parameters; {FIXED_WINDOW}: max_cwnd, the window)")
        new.state = target
        msgs: list[pb.ControllerMessage] = []
        if target == pb.PROFILE_ONLINE and (old_state != pb.PROFILE_ONLINE or req.HasField("nscc")):
            msgs.append(pb.ControllerMessage(cc_profile=new))
        elif old_state == pb.PROFILE_ONLINE and target != pb.PROFILE_ONLINE:
            msgs.append(pb.ControllerMessage(removed=pb.ProfileRemoved(kind="cc", profile_id=pid)))
        if target == pb.PROFILE_INIT:
            self._cc.pop(pid, None)
        else:
            self._cc[pid] = new
        return self.cc_profile(pid), self._bump(msgs)

    # ------------------------------------------------------------------ distribution

    def snapshot(self) -> pb.ProfileSnapshot:
        """Everything an agent needs: ONLINE profiles (EV profiles with their DENIED EVs)."""
        snap = pb.ProfileSnapshot(generation=self.generation)
        snap.fmt_profiles.extend(
            p for _, p in sorted(self._fmt.items()) if p.state == pb.PROFILE_ONLINE
        )
        snap.ev_profiles.extend(
            r.profile for _, r in sorted(self._ev.items()) if r.profile.state == pb.PROFILE_ONLINE
        )
        snap.cc_profiles.extend(
            p for _, p in sorted(self._cc.items()) if p.state == pb.PROFILE_ONLINE
        )
        return snap

    def ev_count_used(self) -> int:
        return self._total_evs(exclude=0)


def _gen_fields(p: pb.EvProfile) -> list[GenField]:
    return [GenField(f.width, f.init_val, f.mask, f.min_val, f.max_val) for f in p.fields]


def validate_fixed_window(pid: int, c: pb.NsccConfig) -> None:
    """A fixed-window profile's configuration: its window (``max_cwnd``) and nothing else."""
    mtu = c.mtu or 4096
    if c.max_cwnd < mtu:
        raise invalid(f"CC profile {pid} ({FIXED_WINDOW}): max_cwnd, the window, must be at "
                      f"least one MTU ({mtu})")
    others = [f.name for f, _ in c.ListFields() if f.name not in ("max_cwnd", "mtu")]
    if others:
        raise invalid(f"CC profile {pid} ({FIXED_WINDOW}): only max_cwnd (the window) and mtu "
                      f"apply, not {', '.join(others)}")


def validate_nscc(pid: int, c: pb.NsccConfig) -> None:
    where = f"CC profile {pid}"
    checks = [
        (c.base_rtt_ns > 0, "base_rtt_ns must be > 0"),
        (c.target_delay_ns > 0, "target_delay_ns must be > 0"),
        (c.max_cwnd >= (c.mtu or 4096), "max_cwnd must be at least one MTU"),
        (0 < c.gamma <= 1, "gamma must be in (0, 1]"),
        (0 < c.max_md_jump <= 1, "max_md_jump must be in (0, 1]"),
        (min(c.eta, c.fi, c.fi_scale, c.alpha) >= 0, "eta, fi, fi_scale, alpha must be >= 0"),
        (c.qa_gate <= 31, "qa_gate must be <= 31 (a shift)"),
        (
            c.disable_qa or c.qa_threshold_ns > 0,
            "qa_threshold_ns must be > 0 unless QA is disabled",
        ),
        (c.adjust_bytes_threshold > 0, "adjust_bytes_threshold must be > 0"),
        (c.adjust_period_threshold_ns > 0, "adjust_period_threshold_ns must be > 0"),
        (
            all(
                math.isfinite(x) for x in (c.eta, c.fi, c.fi_scale, c.gamma, c.max_md_jump, c.alpha)
            ),
            "parameters must be finite",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise invalid(f"{where}: {message}")


def nscc_defaults(
    rate_bps: float, base_rtt_s: float, mtu: int = 4096, trimming: bool = True,
    unmarked_last_hop: bool = True,
) -> pb.NsccConfig:
    """NSCC parameters scaled from the 100 Gb/s x 12 us reference (common/nscc.py), for this
    controller's fabrics, whose last hops mark no ECN (MRC) unless ``unmarked_last_hop`` is
    False.

    ``alpha`` is per nanosecond of delay below target (delays are carried in ns).
    """
    fields: dict[str, Any] = profile_fields(scaled(rate_bps, base_rtt_s, mtu, trimming,
                                                   unmarked_last_hop))
    return pb.NsccConfig(**fields)
