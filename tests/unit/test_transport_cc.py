"""Congestion-control plug-in point (hosts/transport/cc.py): the registry of algorithms by
name, how a QP resolves its CC profile, the calls a controller gets and its log data."""

from __future__ import annotations

import random

import pytest

from hosts.transport import cc as ccmod
from hosts.transport.cc import (
    FIXED_WINDOW,
    CcSetup,
    CongestionControl,
    NackFeedback,
    NoCongestionControl,
    SackFeedback,
    congestion_control_factory,
    register_congestion_control,
    registered_algorithms,
)
from hosts.transport.core import HostCore
from hosts.transport.memory import ALL_ACCESS
from hosts.transport.profiles import CcProfile
from hosts.transport.sim import LinkModel, Network, QpOptions, connect, default_profile
from hosts.transport.types import (
    Completion,
    QpAttr,
    QpAttrMask,
    QpError,
    QpState,
    SendWR,
    WrOpcode,
)
from tests.unit.transport_util import make_host

KIB = 1024
M = QpAttrMask


class Recording(NoCongestionControl):
    """The fixed window, recording every call the core makes."""

    def __init__(self, setup: CcSetup) -> None:
        super().__init__(int(setup.params.get("window", setup.default_window)))
        self.setup = setup
        self.sent: list[tuple[float, int, int, bool]] = []
        self.sacks: list[SackFeedback] = []
        self.nacks: list[NackFeedback] = []
        self.timeouts: list[tuple[float, int]] = []

    def on_packet_sent(
        self, *, now: float, size: int, bytes_in_flight: int, retransmission: bool
    ) -> None:
        self.sent.append((now, size, bytes_in_flight, retransmission))

    def on_sack(self, feedback: SackFeedback) -> None:
        self.sacks.append(feedback)

    def on_nack(self, feedback: NackFeedback) -> None:
        self.nacks.append(feedback)

    def on_timeout(self, *, now: float, bytes_in_flight: int) -> None:
        self.timeouts.append((now, bytes_in_flight))

    def get_log_data(self) -> dict[str, float]:
        return {"cwnd": self.window, "sacks": len(self.sacks)}


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, ccmod.CcFactory]:
    """A private copy of the registry (what a test registers does not leak)."""
    reg = dict(ccmod._REGISTRY)
    monkeypatch.setattr(ccmod, "_REGISTRY", reg)
    return reg


def register_recording() -> list[Recording]:
    """Register "test-recording"; returns the list every controller it builds goes to."""
    made: list[Recording] = []

    def factory(setup: CcSetup) -> Recording:
        made.append(Recording(setup))
        return made[-1]

    register_congestion_control("test-recording", factory)
    return made


def test_the_fixed_window_is_registered_under_the_profiles_default_name() -> None:
    assert FIXED_WINDOW == CcProfile(1).algorithm == "none"
    assert FIXED_WINDOW in registered_algorithms()
    factory = congestion_control_factory(FIXED_WINDOW)
    assert factory is not None
    made = factory(CcSetup(qpn=0x10, mtu=4096, default_window=64 * KIB))
    assert isinstance(made, NoCongestionControl) and made.window == 64 * KIB
    assert made.get_log_data() == {"cwnd": 64 * KIB}
    assert congestion_control_factory("cubic") is None


def test_names_register_once(registry: dict[str, ccmod.CcFactory]) -> None:
    register_congestion_control("test-recording", Recording)
    assert "test-recording" in registered_algorithms()
    with pytest.raises(ValueError, match="already registered"):
        register_congestion_control("test-recording", Recording)
    with pytest.raises(ValueError):
        register_congestion_control("", Recording)


def test_methods_take_now_and_counts_by_keyword() -> None:
    cc: CongestionControl = NoCongestionControl(10_000)
    assert cc.can_send(bytes_in_flight=6_000, size=4_000)
    assert not cc.can_send(bytes_in_flight=6_001, size=4_000)
    assert cc.can_send(bytes_in_flight=0, size=20_000)  # an empty window always admits one
    with pytest.raises(TypeError):
        cc.can_send(6_000, 4_000)  # type: ignore[misc]
    with pytest.raises(TypeError):
        cc.on_timeout(1.0, 0)  # type: ignore[misc]


def _init(
    host_profiles: list[CcProfile], cc_profile_id: int, **cfg: object
) -> tuple[HostCore, int]:
    """A host with these CC profiles and one QP moved to INIT with ``cc_profile_id``."""
    h = make_host(1, **cfg)
    h.set_ev_profile(default_profile())
    for p in host_profiles:
        h.set_cc_profile(p)
    q = h.create_qp(QpOptions().qp_type, 0, 0)
    attr = QpAttr(qp_state=QpState.INIT, ev_profile_id=1, cc_profile_id=cc_profile_id)
    h.modify_qp(q, attr, M.STATE | M.HINT | M.EV_PROFILE | M.CC_PROFILE)
    return h, q


def test_a_qp_resolves_its_profiles_algorithm(registry: dict[str, ccmod.CcFactory]) -> None:
    made = register_recording()
    h, q = _init([CcProfile(3, "test-recording", {"window": 12_345.0})], 3, mtu=2048)
    assert h.qp_cc_log(q) == {"cwnd": 12_345, "sacks": 0}
    assert [m.setup for m in made] == [CcSetup(q, 2048, 1 << 30, {"window": 12_345.0})]
    # no CC profile installed under the id: the fixed window of the host's default size
    h2, q2 = _init([], 7, default_cc_window=99_000)
    assert h2.qp_cc_log(q2) == {"cwnd": 99_000}


def test_an_unknown_algorithm_fails_loudly_and_changes_nothing() -> None:
    h = make_host(1)
    h.set_ev_profile(default_profile())
    h.set_cc_profile(CcProfile(2, "uet-2.0-future"))
    q = h.create_qp(QpOptions().qp_type, 0, 0)
    attr = QpAttr(qp_state=QpState.INIT, ev_profile_id=1, cc_profile_id=2)
    with pytest.raises(QpError, match=r"unknown congestion control 'uet-2.0-future' .*none"):
        h.modify_qp(q, attr, M.STATE | M.HINT | M.EV_PROFILE | M.CC_PROFILE)
    assert h.query_qp(q).qp_state == QpState.RESET and h.query_qp(q).ev_profile_id == 0


def test_the_hosts_cc_factory_overrides_the_registry() -> None:
    made: list[tuple[CcProfile | None, int]] = []

    def factory(profile: CcProfile | None, qpn: int) -> NoCongestionControl:
        made.append((profile, qpn))
        return NoCongestionControl(5_000)

    prof = CcProfile(2, "not-registered-anywhere")
    h, q = _init([prof], 2, cc_factory=factory)
    assert made == [(prof, q)] and h.qp_cc_log(q) == {"cwnd": 5_000}


def test_the_controller_sees_every_send_and_the_feedback(
    registry: dict[str, ccmod.CcFactory],
) -> None:
    made = register_recording()
    size = 256 * KIB
    a, b = make_host(1), make_host(2)
    for h in (a, b):
        h.set_ev_profile(default_profile())
        h.set_cc_profile(CcProfile(4, "test-recording"))
    qa, _qb = connect(a, b, QpOptions(cc_profile_id=4))
    src = bytearray(random.Random(5).randbytes(size))
    dst = bytearray(size)
    ma, mb = a.register_mr(src, ALL_ACCESS), b.register_mr(dst, ALL_ACCESS)
    net = Network([a, b], LinkModel(delay=5e-6, loss=0.02, seed=3))
    net.record = True
    a.post_send(qa, SendWR(1, WrOpcode.WRITE, ma.addr, size, ma.lkey, mb.addr, mb.rkey), 0.0)
    assert net.run(lambda: any(isinstance(e, Completion) for e in net.events[0]), max_time=2.0)
    assert dst == src
    assert len(made) == 2  # one controller per QP (the responder's side too)
    cc = made[0]
    data = [(t, tx) for (t, s, tx) in net.sent if s == 0 and tx.pkt.reth is not None]
    # one on_packet_sent per data packet that left, with its time, size and retransmission flag
    assert [(t, len(tx.pkt.payload), tx.pkt.bth.rtx) for t, tx in data] == [
        (t, sz, rtx) for (t, sz, _bif, rtx) in cc.sent
    ]
    stats = a.qp_stats(qa)
    assert len(cc.sent) == stats["tx_data"]
    assert sum(rtx for *_x, rtx in cc.sent) == stats["tx_rtx"] > 0
    assert stats["rx_sack"] == len(cc.sacks) and sum(f.newly_acked_bytes for f in cc.sacks) == size
    # bytes in flight right after a send: sent, not acknowledged, not declared lost; never
    # more than the window (MPR 8 x 128 PSNs of 4096 bytes)
    assert all(0 < bif <= 8 * 128 * 4096 for (_t, _s, bif, _r) in cc.sent)
    assert a.qp_cc_log(qa) == {"cwnd": 1 << 30, "sacks": len(cc.sacks)}
