"""The profile store (pure): lifecycle, requirements, atomicity, GEN expansion, EV states."""

from __future__ import annotations

import itertools

import pytest

from common.proto import mrc_ctl_pb2 as pb
from controller.errors import CtlError, ErrorKind
from controller.profile_store import ProfileStore, nscc_defaults


def fmt_online(
    store: ProfileStore,
    pid: int = 1,
    mode: int = pb.EV_FMT_STEV,
    widths: tuple[int, ...] = (8, 4, 4),
) -> None:
    store.modify_fmt(
        pb.ModifyEvFmtProfileRequest(profile_id=pid, state=pb.PROFILE_OFFLINE, mode=mode)
    )
    store.modify_fmt(
        pb.ModifyEvFmtProfileRequest(
            profile_id=pid, state=pb.PROFILE_ONLINE, fields=pb.FieldWidths(widths=list(widths))
        )
    )


def exp_profile(store: ProfileStore, pid: int = 1, count: int = 4) -> None:
    store.modify_ev(
        pb.ModifyEvProfileRequest(
            profile_id=pid,
            state=pb.PROFILE_OFFLINE,
            mode=pb.EV_MODE_EXP,
            fmt_profile_id=1,
            ev_count=count,
        )
    )


def fill(store: ProfileStore, pid: int, evs: list[tuple[int, int]]) -> None:
    op = pb.EvOp(op=pb.REPLACE_EV)
    for value, port in evs:
        op.entries.add(ev=pb.Ev(), ev_new=pb.Ev(value=value, port=port))
    store.modify_ev(pb.ModifyEvProfileRequest(profile_id=pid, ev_op=op))


def online(
    store: ProfileStore, pid: int = 1, states: tuple[int, ...] = (pb.EV_GOOD, pb.EV_ASSUMED_BAD)
) -> list[pb.ControllerMessage]:
    _, msgs = store.modify_ev(
        pb.ModifyEvProfileRequest(
            profile_id=pid,
            state=pb.PROFILE_ONLINE,
            ev_min_active=1,
            event_mask=pb.EventMask(states=list(states)),
        )
    )
    return msgs


def err(fn: object, *args: object) -> CtlError:
    with pytest.raises(CtlError) as info:
        fn(*args)  # type: ignore[operator]
    return info.value


def test_fmt_lifecycle_and_requirements() -> None:
    store = ProfileStore(ports=2)
    # INIT -> ONLINE skips OFFLINE
    e = err(store.modify_fmt, pb.ModifyEvFmtProfileRequest(profile_id=1, state=pb.PROFILE_ONLINE))
    assert e.kind == ErrorKind.INVALID and "cannot go from INIT to ONLINE" in e.message
    # OFFLINE needs a mode
    e = err(store.modify_fmt, pb.ModifyEvFmtProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE))
    assert "needs a mode" in e.message
    store.modify_fmt(
        pb.ModifyEvFmtProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE, mode=pb.EV_FMT_UDP)
    )
    # UDP EVs have 16 bits
    e = err(
        store.modify_fmt,
        pb.ModifyEvFmtProfileRequest(
            profile_id=1, state=pb.PROFILE_ONLINE, fields=pb.FieldWidths(widths=[8, 9])
        ),
    )
    assert "17 bits" in e.message
    assert (
        store.fmt_profile(1).state == pb.PROFILE_OFFLINE and not store.fmt_profile(1).field_widths
    )
    out, msgs = store.modify_fmt(
        pb.ModifyEvFmtProfileRequest(
            profile_id=1, state=pb.PROFILE_ONLINE, fields=pb.FieldWidths(widths=[8, 8])
        )
    )
    assert out.state == pb.PROFILE_ONLINE and list(out.field_widths) == [8, 8]
    assert [m.WhichOneof("msg") for m in msgs] == ["fmt_profile"]
    # ONLINE: attributes are frozen
    e = err(store.modify_fmt, pb.ModifyEvFmtProfileRequest(profile_id=1, mode=pb.EV_FMT_STEV))
    assert "is ONLINE" in e.message
    assert err(store.fmt_profile, 99).kind == ErrorKind.NOT_FOUND


def test_ev_profile_explicit_lifecycle() -> None:
    store = ProfileStore(ports=2)
    fmt_online(store)
    # non-AUTO needs a format profile, count
    e = err(
        store.modify_ev,
        pb.ModifyEvProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE, mode=pb.EV_MODE_EXP),
    )
    assert "needs fmt_profile_id" in e.message
    e = err(
        store.modify_ev,
        pb.ModifyEvProfileRequest(
            profile_id=1, state=pb.PROFILE_OFFLINE, mode=pb.EV_MODE_EXP, fmt_profile_id=7
        ),
    )
    assert e.kind == ErrorKind.NOT_FOUND
    exp_profile(store, count=3)
    p = store.ev_profile(1)
    assert p.state == pb.PROFILE_OFFLINE and [(e.value, e.port) for e in p.evs] == [(0, 0)] * 3
    # ONLINE needs min_active + event mask, then a populated array
    e = err(store.modify_ev, pb.ModifyEvProfileRequest(profile_id=1, state=pb.PROFILE_ONLINE))
    assert "ev_min_active and event_mask" in e.message
    e = err(online, store)
    assert "EV 0 of 3 is unpopulated" in e.message
    assert store.ev_profile(1).state == pb.PROFILE_OFFLINE
    fill(store, 1, [(0x100, 1), (0x200, 2), (0x300, 1)])
    msgs = online(store)
    assert [m.WhichOneof("msg") for m in msgs] == ["ev_profile"]
    assert [(e.value, e.port) for e in msgs[0].ev_profile.evs] == [
        (0x100, 1),
        (0x200, 2),
        (0x300, 1),
    ]
    # ONLINE -> OFFLINE removes it from agents; OFFLINE -> INIT resets
    _, msgs = store.modify_ev(pb.ModifyEvProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE))
    assert msgs[0].removed.kind == "ev" and msgs[0].removed.profile_id == 1
    store.modify_ev(pb.ModifyEvProfileRequest(profile_id=1, state=pb.PROFILE_INIT))
    assert store.ev_profile(1) == pb.EvProfile(id=1, state=pb.PROFILE_INIT)


def test_replace_ev_validation_is_all_or_nothing() -> None:
    store = ProfileStore(ports=2)
    fmt_online(store, mode=pb.EV_FMT_UDP, widths=(16,))
    exp_profile(store, count=2)
    before = store.ev_profile(1)
    op = pb.EvOp(op=pb.REPLACE_EV)
    op.entries.add(ev=pb.Ev(), ev_new=pb.Ev(value=5, port=1))
    op.entries.add(ev=pb.Ev(), ev_new=pb.Ev(value=1 << 16, port=1))  # too wide for UDP
    e = err(store.modify_ev, pb.ModifyEvProfileRequest(profile_id=1, ev_op=op))
    assert e.kind == ErrorKind.INVALID and "does not fit 16 bits" in e.message
    assert store.ev_profile(1) == before  # first entry not applied either
    op = pb.EvOp(op=pb.REPLACE_EV)
    op.entries.add(ev=pb.Ev(value=77, port=1), ev_new=pb.Ev(value=5, port=1))
    assert (
        err(store.modify_ev, pb.ModifyEvProfileRequest(profile_id=1, ev_op=op)).kind
        == ErrorKind.NOT_FOUND
    )
    op = pb.EvOp(op=pb.REPLACE_EV)
    op.entries.add(ev=pb.Ev(), ev_new=pb.Ev(value=5, port=3))
    assert (
        "port 3 outside 1..2"
        in err(store.modify_ev, pb.ModifyEvProfileRequest(profile_id=1, ev_op=op)).message
    )
    # all_copies replaces every unpopulated slot at once
    op = pb.EvOp(op=pb.REPLACE_EV)
    op.entries.add(ev=pb.Ev(), ev_new=pb.Ev(value=9, port=2), all_copies=True)
    store.modify_ev(pb.ModifyEvProfileRequest(profile_id=1, ev_op=op))
    assert [(e.value, e.port) for e in store.ev_profile(1).evs] == [(9, 2), (9, 2)]


def test_gen_expansion_matches_independent_enumeration() -> None:
    store = ProfileStore(ports=2)
    fmt_online(store, widths=(4, 4, 8))
    fields = [
        pb.EvField(width=4, init_val=0, min_val=0, max_val=2, mask=0b0011),  # 3 values in low bits
        pb.EvField(
            width=4, init_val=0b1000, min_val=1, max_val=3, mask=0b0110
        ),  # 3 values, bit 3 fixed
        pb.EvField(width=8, init_val=0xAB, min_val=0, max_val=0, mask=0),  # fixed field
    ]
    store.modify_ev(
        pb.ModifyEvProfileRequest(
            profile_id=2, state=pb.PROFILE_OFFLINE, mode=pb.EV_MODE_GEN, fmt_profile_id=1, ev_count=20,
            fields=pb.EvFields(fields=fields),
        )
    )  # fmt: skip
    online(store, 2)
    got = [(e.value, e.port) for e in store.ev_profile(2).evs]
    combos = [(a, b) for b in range(1, 4) for a in range(0, 3)]  # field 0 varies fastest
    expected = []
    for i in range(20):
        a, b = combos[(i // 2) % len(combos)]
        f1 = 0b1000 | (b << 1)
        expected.append(((a << 12) | (f1 << 8) | 0xAB, i % 2 + 1))
    assert got == expected
    # every combination appears on both ports
    assert {v for v, _ in got} == {v for v, _ in expected}


def test_gen_field_bounds_checked() -> None:
    store = ProfileStore(ports=1)
    fmt_online(store, widths=(4,))
    bad = pb.EvField(width=4, min_val=0, max_val=8, mask=0b0111)  # 3 mask bits: max 7
    e = err(
        store.modify_ev,
        pb.ModifyEvProfileRequest(
            profile_id=1, state=pb.PROFILE_OFFLINE, mode=pb.EV_MODE_GEN, fmt_profile_id=1, ev_count=4,
            fields=pb.EvFields(fields=[bad]),
        ),
    )  # fmt: skip
    assert "max_val < 2**3" in e.message
    assert store.ev_profile(1).state == pb.PROFILE_INIT


def test_denied_evs_and_state_queries() -> None:
    store = ProfileStore(ports=2)
    fmt_online(store)
    exp_profile(store, count=2)
    fill(store, 1, [(0x11, 1), (0x22, 2)])
    online(store)
    op = pb.EvOp(op=pb.MODIFY_EV_STATE)
    op.entries.add(ev=pb.Ev(value=0x22, port=2), state=pb.EV_DENIED)
    prof, msgs = store.modify_ev(pb.ModifyEvProfileRequest(profile_id=1, ev_op=op))
    assert [(m.ev_state.profile_id, m.ev_state.ev.value, m.ev_state.state) for m in msgs] == [
        (1, 0x22, pb.EV_DENIED)
    ]
    assert [(e.value, e.port) for e in prof.denied] == [(0x22, 2)]
    assert store.snapshot().ev_profiles[0].denied[0].value == 0x22
    # agents report ASSUMED_BAD; controller view aggregates
    assert store.report(
        "h0", pb.EvStateReport(profile_id=1, ev=pb.Ev(value=0x11, port=1), state=pb.EV_ASSUMED_BAD)
    )
    q = pb.EvOp(op=pb.QUERY_EV_STATE)
    q.entries.add(ev=pb.Ev(value=0x11, port=1))
    q.entries.add(ev=pb.Ev(value=0x22, port=2))
    resp = store.query_ev(pb.QueryEvProfileRequest(profile_id=1, ev_op=q))
    assert [r.state for r in resp.results] == [pb.EV_ASSUMED_BAD, pb.EV_DENIED]
    store.report(
        "h0", pb.EvStateReport(profile_id=1, ev=pb.Ev(value=0x11, port=1), state=pb.EV_GOOD)
    )
    arr = store.query_ev(
        pb.QueryEvProfileRequest(profile_id=1, ev_op=pb.EvOp(op=pb.QUERY_EV_ARRAY))
    )
    assert [(r.ev.value, r.state) for r in arr.results] == [
        (0x11, pb.EV_GOOD),
        (0x22, pb.EV_DENIED),
    ]
    # lifting the denial
    op = pb.EvOp(op=pb.MODIFY_EV_STATE)
    op.entries.add(ev=pb.Ev(value=0x22, port=2), state=pb.EV_GOOD)
    prof, _ = store.modify_ev(pb.ModifyEvProfileRequest(profile_id=1, ev_op=op))
    assert not prof.denied
    # unknown EV / bad state
    op = pb.EvOp(op=pb.MODIFY_EV_STATE)
    op.entries.add(ev=pb.Ev(value=0x99, port=1), state=pb.EV_DENIED)
    assert (
        err(store.modify_ev, pb.ModifyEvProfileRequest(profile_id=1, ev_op=op)).kind
        == ErrorKind.NOT_FOUND
    )
    op = pb.EvOp(op=pb.MODIFY_EV_STATE)
    op.entries.add(ev=pb.Ev(value=0x11, port=1), state=pb.EV_UNKNOWN)
    assert (
        err(store.modify_ev, pb.ModifyEvProfileRequest(profile_id=1, ev_op=op)).kind
        == ErrorKind.INVALID
    )


def test_event_mask_filters_reports() -> None:
    store = ProfileStore(ports=1)
    store.modify_ev(
        pb.ModifyEvProfileRequest(profile_id=3, state=pb.PROFILE_OFFLINE, mode=pb.EV_MODE_AUTO)
    )
    online(store, 3, states=(pb.EV_ASSUMED_BAD,))
    bad = pb.EvStateReport(profile_id=3, ev=pb.Ev(value=7, port=1), state=pb.EV_ASSUMED_BAD)
    good = pb.EvStateReport(profile_id=3, ev=pb.Ev(value=7, port=1), state=pb.EV_GOOD)
    assert store.report("h1", bad) is True
    assert store.report("h1", good) is False  # GOOD not in the mask
    assert store.report("h1", pb.EvStateReport(profile_id=4, state=pb.EV_ASSUMED_BAD)) is False
    e = err(
        store.modify_ev,
        pb.ModifyEvProfileRequest(profile_id=3, event_mask=pb.EventMask(states=[pb.EV_DENIED])),
    )
    assert "only GOOD and ASSUMED_BAD" in e.message


def test_format_profile_in_use_cannot_leave() -> None:
    store = ProfileStore(ports=1)
    fmt_online(store)
    exp_profile(store)
    e = err(store.modify_fmt, pb.ModifyEvFmtProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE))
    assert e.kind == ErrorKind.BUSY and "used by EV profile 1" in e.message
    assert store.fmt_profile(1).state == pb.PROFILE_ONLINE


def test_cc_profile_lifecycle_and_validation() -> None:
    store = ProfileStore(ports=1)
    e = err(
        store.modify_cc,
        pb.ModifyCcProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE, algorithm="cubic"),
    )
    assert "unknown algorithm 'cubic'" in e.message
    store.modify_cc(
        pb.ModifyCcProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE, algorithm="uet-1.0-nscc")
    )
    e = err(store.modify_cc, pb.ModifyCcProfileRequest(profile_id=1, state=pb.PROFILE_ONLINE))
    assert "needs its configuration" in e.message
    cfg = nscc_defaults(1e9, 100e-6)
    bad = pb.NsccConfig()
    bad.CopyFrom(cfg)
    bad.gamma = 1.5
    assert (
        "gamma" in err(store.modify_cc, pb.ModifyCcProfileRequest(profile_id=1, nscc=bad)).message
    )
    out, msgs = store.modify_cc(
        pb.ModifyCcProfileRequest(profile_id=1, state=pb.PROFILE_ONLINE, nscc=cfg)
    )
    assert out.state == pb.PROFILE_ONLINE and msgs[0].cc_profile.nscc.base_rtt_ns == 100_000
    # ONLINE: config may change (pushed again), algorithm may not
    cfg2 = pb.NsccConfig()
    cfg2.CopyFrom(cfg)
    cfg2.gamma = 0.5
    _, msgs = store.modify_cc(pb.ModifyCcProfileRequest(profile_id=1, nscc=cfg2))
    assert msgs[0].cc_profile.nscc.gamma == pytest.approx(0.5)
    assert (
        "algorithm cannot change"
        in err(
            store.modify_cc, pb.ModifyCcProfileRequest(profile_id=1, algorithm="uet-1.0-nscc")
        ).message
    )


def test_nscc_defaults_follow_the_reference_formulas() -> None:
    # reference network: 100 Gb/s x 12 us -> scaling factors 1 when target = base RTT (no trimming)
    ref = nscc_defaults(100e9, 12e-6, mtu=4096, trimming=False)
    assert ref.max_cwnd == round(1.5 * 150_000)
    assert ref.fi == pytest.approx(5 * 4096)
    assert ref.eta == pytest.approx(0.15 * 4096)
    assert ref.fi_scale == pytest.approx(0.25)
    assert ref.target_delay_ns == 12_000 and ref.qa_threshold_ns == 48_000
    assert ref.alpha == pytest.approx(4.0 * 4096 / 12_000, rel=1e-6)
    small = nscc_defaults(10e9, 200e-6, mtu=4096, trimming=True)  # BDP: 61 packets
    bdp = 10e9 / 8 * 200e-6
    assert small.max_cwnd == round(1.5 * bdp)
    assert small.target_delay_ns == 150_000
    assert small.fi == pytest.approx(5 * 4096 * bdp / 150_000, rel=1e-6)
    assert (small.gamma, small.max_md_jump, small.qa_gate) == (pytest.approx(0.8), 0.5, 3)
    assert small.adjust_bytes_threshold == 8 * 4096 and small.adjust_period_threshold_ns == 200_000
    # BDP of 6 packets: the target is 20 packet times (655.36 us, not 150 us) and the window
    # grows by the difference's bytes; alpha is still 4 x scaling_a x MTU / base RTT
    tiny = nscc_defaults(1e9, 200e-6, mtu=4096, trimming=True)
    assert tiny.target_delay_ns == 655_360 and tiny.qa_threshold_ns == 4 * 655_360
    assert tiny.max_cwnd == round(1.5 * 25_000 + (655.36e-6 - 150e-6) * 1e9 / 8)  # 100,670
    assert tiny.alpha == pytest.approx(4.0 * (25_000 / 150_000) * 4096 / 200_000, rel=1e-6)


def test_generation_increases_only_on_distributed_changes() -> None:
    store = ProfileStore(ports=1)
    g0 = store.generation
    store.modify_fmt(
        pb.ModifyEvFmtProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE, mode=pb.EV_FMT_STEV)
    )
    assert store.generation == g0  # OFFLINE profiles are not distributed
    fmt_online(store, pid=2)
    assert store.generation == g0 + 1
    for pid in itertools.islice(itertools.count(3), 2):
        err(store.modify_fmt, pb.ModifyEvFmtProfileRequest(profile_id=pid, state=pb.PROFILE_ONLINE))
    assert store.generation == g0 + 1


def test_mode_change_resets_the_ev_universe() -> None:
    store = ProfileStore(ports=2)
    fmt_online(store)
    exp_profile(store, count=2)
    fill(store, 1, [(0x11, 1), (0x22, 2)])
    op = pb.EvOp(
        op=pb.MODIFY_EV_STATE,
        entries=[pb.EvOpEntry(ev=pb.Ev(value=0x22, port=2), state=pb.EV_DENIED)],
    )
    assert store.modify_ev(pb.ModifyEvProfileRequest(profile_id=1, ev_op=op))[0].denied
    # EXP -> GEN without fields cannot go ONLINE; the EXP array and denials are gone
    prof, _ = store.modify_ev(pb.ModifyEvProfileRequest(profile_id=1, mode=pb.EV_MODE_GEN))
    assert not prof.denied and not prof.fields
    assert "needs fields" in err(online, store).message
    # back to EXP: a fresh unpopulated array of ev_count entries
    prof, _ = store.modify_ev(pb.ModifyEvProfileRequest(profile_id=1, mode=pb.EV_MODE_EXP))
    assert [(e.value, e.port) for e in prof.evs] == [(0, 0), (0, 0)]


def test_the_load_balancing_policy_is_part_of_the_ev_profile() -> None:
    from controller.profile_store import LB_POLICIES
    from hosts.transport.spray import SPRAY_POLICIES

    assert set(LB_POLICIES) == set(SPRAY_POLICIES)  # what agents can run
    store = ProfileStore(ports=2)
    fmt_online(store)
    exp_profile(store, count=2)
    fill(store, 1, [(1, 1), (2, 2)])
    msgs = online(store)
    assert msgs[0].ev_profile.lb_policy == ""  # unset: agents use the rotation
    e = err(store.modify_ev, pb.ModifyEvProfileRequest(profile_id=1, lb_policy="ecmp"))
    assert e.kind == ErrorKind.INVALID and "lb_policy" in e.message
    assert store.ev_profile(1).lb_policy == ""  # nothing applied
    # changeable while ONLINE: the whole profile is sent again
    _, msgs = store.modify_ev(pb.ModifyEvProfileRequest(profile_id=1, lb_policy="reps"))
    assert [m.ev_profile.lb_policy for m in msgs] == ["reps"]


def test_a_fixed_window_profile_takes_its_window_and_nothing_else() -> None:
    from hosts.agent.ctlprofiles import core_cc_profile
    from hosts.transport.cc import CcSetup, congestion_control_factory

    store = ProfileStore(ports=1)
    store.modify_cc(pb.ModifyCcProfileRequest(profile_id=2, state=pb.PROFILE_OFFLINE,
                                              algorithm="none"))
    small = pb.NsccConfig(max_cwnd=1000, mtu=4096)
    assert "at least one MTU" in err(
        store.modify_cc, pb.ModifyCcProfileRequest(profile_id=2, nscc=small)).message
    nscc_fields = pb.NsccConfig(max_cwnd=32768, gamma=0.8)
    assert "not gamma" in err(
        store.modify_cc, pb.ModifyCcProfileRequest(profile_id=2, nscc=nscc_fields)).message
    out, msgs = store.modify_cc(pb.ModifyCcProfileRequest(
        profile_id=2, state=pb.PROFILE_ONLINE, nscc=pb.NsccConfig(max_cwnd=32768, mtu=4096)))
    assert out.state == pb.PROFILE_ONLINE and out.algorithm == "none"
    # what an agent builds from the distributed profile: a window of exactly 32 KiB
    core = core_cc_profile(msgs[0].cc_profile)
    factory = congestion_control_factory(core.algorithm)
    assert factory is not None
    cc = factory(CcSetup(qpn=5, mtu=4096, default_window=128 * 1024, params=core.params))
    assert cc.get_log_data()["cwnd"] == 32768
    assert cc.can_send(bytes_in_flight=28672, size=4096)
    assert not cc.can_send(bytes_in_flight=32768, size=4096)
    # a profile without a window keeps the host's default
    plain = factory(CcSetup(qpn=6, mtu=4096, default_window=65536))
    assert plain.get_log_data()["cwnd"] == 65536
