"""Loss recovery and every recoverable NACK on real packets: two hosts on one embedded switch
(testbed/mechanism_lab.py), their agents in this process. Each test makes one mechanism fire
(random loss on h2's egress link, that is on the data only: h1's acknowledgements come back
on h1's egress, which loses nothing; or a receive resource the responder runs out of), checks
its counters on both sides (and the switch's loss counter where that is the witness) and that
the bytes written landed exactly.

Each test fails with its mechanism switched off: ``MRC_MECHANISM_OFF=<name> pytest -p
tests.emulation.loss_mechanism_off tests/emulation/test_mechanisms_loss.py -k <test>`` (names
in that plugin's docstring; docs/transport.md, "Mechanisms and their tests").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from common.netns import NetKit, wait_until
from hosts.agent.qlog import event_name
from hosts.api import QpAttr, QpType, RecvWR, RetryAttr
from hosts.transport.lognames import PACKETS_LOST
from testbed.mechanism_lab import StarLab, Transfer

pytestmark = pytest.mark.emulation

MiB = 1 << 20
LOSSY = {2: "loss=0.02"}  # h2's switch egress: data towards the responder only
ATTR = QpAttr(retry=RetryAttr(7, 25), timeout=17)  # T = 134 ms, retries unlimited


def _loss_drops(lab: StarLab, host: str = "h2") -> int:
    """Frames the switch dropped as random loss on ``host``'s egress link."""
    from switch.stats import fetch

    port = lab.switch.ports[(host, 0)]
    return sum(p.egress.loss_drops for p in fetch(lab.switch.address).ports if p.port == port)


def _triggers(lab: StarLab, t: Transfer) -> set[str]:
    return {e["data"]["trigger"] for e in lab.qlog(1, t.qp.qpn)
            if e["name"] == event_name(PACKETS_LOST)}


def _nacks_arrived(lab: StarLab, t: Transfer, reason: str) -> tuple[dict[str, int],
                                                                      dict[str, int]]:
    """Both sides' counters once every NACK the responder sent reached the requester."""
    w, s = lab.host(1), lab.host(2)
    key = f"tx_nack_{reason}"
    wait_until(lambda: w.qp_stats(t.qp.qpn).get(f"rx_nack_{reason}", 0)
               == s.qp_stats(t.peer_qp.qpn).get(key, 0), 10, f"the {reason} NACKs to arrive")
    return w.qp_stats(t.qp.qpn), s.qp_stats(t.peer_qp.qpn)


def _no_nack_ev_changes(w: dict[str, int]) -> None:
    """Receiver refusals leave the EVs alone (only TRIMMED moves one to SKIP)."""
    assert not [k for k in w if k.startswith("ev_state_nack")], w


# -- loss detection ------------------------------------------------------------------------
def test_sack_gap_retransmission(run_prefix: str, tmp_path: Path) -> None:
    """2% of the data is lost: the SACK bitmaps show the gaps and the requester retransmits
    the missing PSNs (rtx_sack_gap), found fast or by time, before any ACK timeout."""
    size = 8 * MiB
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path, links=LOSSY) as lab:
        t = lab.connect(1, 2, size, attr=ATTR)
        t.write(size)
        assert t.exact()
        w, s = lab.host(1).qp_stats(t.qp.qpn), lab.host(2).qp_stats(t.peer_qp.qpn)
        lost = _loss_drops(lab)
        triggers = _triggers(lab, t)
    assert lost > 0
    # each SACK-gap retransmission follows a fast or time-based detection of its PSN
    assert 0 < w["rtx_sack_gap"] <= w.get("loss_fast", 0) + w.get("loss_time", 0)
    assert w["tx_rtx"] == sum(v for k, v in w.items() if k.startswith("rtx_"))
    # every lost frame was sent again: the responder has all of them
    assert w["tx_rtx"] >= lost and w["tx_data"] - w["tx_rtx"] == size // 4096
    assert s["rx_data"] == size // 4096  # each PSN placed once
    assert w["rtx_sack_gap"] > w.get("rtx_probe", 0) + w.get("rtx_ack_timeout", 0)
    assert triggers & {"fast", "time"}


def test_fast_loss_detection(run_prefix: str, tmp_path: Path) -> None:
    """With a reordering threshold of 3 packets, a lost packet is declared lost once 3 sent
    after it on its plane were delivered (loss_fast), long before a round trip passes."""
    size = 8 * MiB
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path, links=LOSSY,
                                           core={"reorder_threshold": 3}) as lab:
        t = lab.connect(1, 2, size, attr=ATTR)
        t.write(size)
        assert t.exact()
        w = lab.host(1).qp_stats(t.qp.qpn)
        triggers = _triggers(lab, t)
    assert w["loss_fast"] > 0 and w["rtx_sack_gap"] > 0 and "fast" in triggers
    assert w["reorder_threshold"] >= 3


def test_time_based_loss_detection(run_prefix: str, tmp_path: Path) -> None:
    """Fast loss held off (a reordering threshold no gap reaches): losses are found by time,
    a packet sent an RTT after the missing one having been delivered (loss_time)."""
    size = 8 * MiB
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path, links=LOSSY,
                                           core={"reorder_threshold": 1 << 16}) as lab:
        t = lab.connect(1, 2, size, attr=ATTR)
        t.write(size)
        assert t.exact()
        w = lab.host(1).qp_stats(t.qp.qpn)
        triggers = _triggers(lab, t)
    assert w.get("loss_fast", 0) == 0 and "fast" not in triggers
    assert w["loss_time"] > 0 and w["rtx_sack_gap"] > 0 and "time" in triggers


def test_rc_go_back_n(run_prefix: str, tmp_path: Path) -> None:
    """The RC baseline on the lossy link: the responder takes only the expected PSN and NAKs
    the first one after a hole (sequence error); the requester goes back N from there."""
    size = 4 * MiB
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path, links={2: "loss=0.01"}) as lab:
        t = lab.connect(1, 2, size, qp_type=QpType.RC, attr=ATTR)
        t.write(size, chunk=256 << 10)
        assert t.exact()
        assert [wc.imm for wc in t.wait_receives(1)] == [16]
        w, s = lab.host(1).qp_stats(t.qp.qpn), lab.host(2).qp_stats(t.peer_qp.qpn)
        lost = _loss_drops(lab)
    assert lost > 0
    assert s["tx_nak"] > 0 and w["rx_nak_seq"] > 0 and w["rc_go_back"] > 0
    assert w["rtx_go_back"] > 0 and w["loss_go_back"] >= w["rc_go_back"]
    assert s.get("rx_out_of_order", 0) > 0  # what go-back-N costs: packets after a hole
    assert w.get("rtx_sack_gap", 0) == 0 and w.get("tx_sack", 0) == 0 == s.get("tx_sack", 0)


# -- NACKs: the responder refuses, the requester retransmits, EVs untouched -------------------
@pytest.mark.parametrize(("knobs", "reason", "peak", "limit"), [
    ({"rx_bitmap_qp": 4}, "no_bitmap", "rx_bitmap_held_max", 4),
    ({"rx_buffer_qp": 4 * 4096}, "no_pkt_buffer", "rx_buffer_held_max", 4 * 4096),
    ({"rx_bitmap_host": 4}, "no_bitmap", "rx_bitmap_held_max", 4),
], ids=["no_bitmap", "no_pkt_buffer", "host_bitmap"])
def test_receive_resources_run_out(run_prefix: str, tmp_path: Path, knobs: dict[str, int],
                                   reason: str, peak: str, limit: int) -> None:
    """h2's NIC holds at most 4 out-of-order packets (bitmap entries, buffer bytes; per QP or
    per host): after each loss, what arrives beyond them is dropped and NACKed; the
    requester retransmits, the data lands exactly, and the responder never held more."""
    size = 4 * MiB
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path, links=LOSSY,
                                           host_core={2: knobs}) as lab:
        t = lab.connect(1, 2, size, attr=ATTR)
        t.write(size)
        assert t.exact()
        w, s = _nacks_arrived(lab, t, reason)
    assert s[f"rx_{reason}"] > 0 and s[f"tx_nack_{reason}"] == s[f"rx_{reason}"]
    assert w[f"rx_nack_{reason}"] == s[f"tx_nack_{reason}"]
    assert w["rtx_nack"] > 0 and w["loss_nack"] > 0
    assert 0 < s[peak] <= limit
    _no_nack_ev_changes(w)


def test_psn_out_of_window_nack(run_prefix: str, tmp_path: Path) -> None:
    """The requester was told a larger MPR (1024 PSNs) than the responder tracks (128): what
    it sends beyond cack + 128 is NACKed PSN_OOR_WINDOW and retransmitted once the window
    moved. In order arrivals never get there (cack follows them): the holes 2% loss leaves
    hold cack back for a round trip (20 ms of delay towards h2) while the requester goes on."""
    size = 2 * MiB
    attr = QpAttr(retry=RetryAttr(7, 25), timeout=17, mpr=8, mpr_dest=1)
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path, links={2: "delay=20e-3,loss=0.02"}) as lab:
        t = lab.connect(1, 2, size, attr=attr)
        t.write(size)
        assert t.exact()
        w, s = _nacks_arrived(lab, t, "psn_oor_window")
    assert s.get("rx_oor", 0) > 0
    assert s["tx_nack_psn_oor_window"] == s["rx_oor"]
    assert w["rx_nack_psn_oor_window"] == s["rx_oor"] and w["rtx_nack"] > 0
    _no_nack_ev_changes(w)


def test_no_resource_nack_until_a_receive_is_posted(run_prefix: str, tmp_path: Path) -> None:
    """A WriteImm arrives with no receive posted: its last packet is NACKed NO_RESOURCE (the
    data is not completed) and retransmitted until the application posts a receive; then
    the WriteImm completes on both sides with its immediate."""
    size = 256 << 10
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path) as lab:
        t = lab.connect(1, 2, size, attr=ATTR, receives=0)
        s_host = lab.host(2)
        t.post(1, 0, size, imm=0x5A)
        wait_until(lambda: s_host.qp_stats(t.peer_qp.qpn).get("tx_nack_no_resource", 0) >= 3,
                   10, "NO_RESOURCE NACKs while no receive is posted")
        assert not t.peer_cq.poll(8) and not t.done  # nothing completed yet
        t.peer_qp.post_recv([RecvWR(wr_id=77)])
        t.wait_sends(1, timeout=20)
        got = t.wait_receives(1)
        assert t.exact()
        w, s = _nacks_arrived(lab, t, "no_resource")
    assert [(wc.wr_id, wc.imm) for wc in got] == [(77, 0x5A)]
    assert s["rx_no_recv"] == s["tx_nack_no_resource"] >= 3
    assert w["rx_nack_no_resource"] == s["tx_nack_no_resource"] and w["rtx_nack"] >= 3
    _no_nack_ev_changes(w)


def test_trimmed_nack_not_at_the_last_hop_skips_the_ev(run_prefix: str, tmp_path: Path) -> None:
    """The switch trims (at 4 queued packets) as a hop before the last one (ECN marking on,
    so its trimmed class is TRIMMED, not TRIMMED_LASTHOP): the responder NACKs TRIMMED, the
    requester retransmits and moves that EV to SKIP (a congested path), unlike a last-hop
    trim."""
    size = 8 * MiB
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path, links={2: "rate=100e6,qpkts=4096"},
                                           trim_at=4, ecn_at=2,
                                           agent={"cc_window": 64 << 10}) as lab:
        t = lab.connect(1, 2, size, attr=ATTR)
        t.write(size)
        assert t.exact()
        w, s = _nacks_arrived(lab, t, "trimmed")
    assert s["rx_trimmed"] > 0 and s["tx_nack_trimmed"] == s["rx_trimmed"]
    assert s.get("tx_nack_trimmed_lasthop", 0) == 0
    assert w["rx_nack_trimmed"] == s["tx_nack_trimmed"] and w["rtx_nack"] > 0
    assert 0 < w["ev_state_nack_trimmed"] <= w["rx_nack_trimmed"]


def test_unexp_event_nack_fails_both_qps_and_writes_nothing(run_prefix: str,
                                                            tmp_path: Path) -> None:
    """A Write with a wrong R_Key: the responder writes nothing, NACKs UNEXP_EVENT and goes
    to ERR; the requester's WR completes REM_ACCESS_ERR (a fatal NACK: no retransmission)."""
    from hosts.api import SendWR, WcStatus, WrOpcode

    size = 64 << 10
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path) as lab:
        t = lab.connect(1, 2, size, attr=ATTR)
        t.qp.post_send(SendWR(1, WrOpcode.WRITE, t.mr.addr, size, t.mr.lkey, t.peer_mr.addr,
                              t.peer_mr.rkey ^ 0x5A5A))
        got = t.cq.wait(1, 10.0)
        w, s = _nacks_arrived(lab, t, "unexp_event")
        assert t.sink == bytearray(size)  # not a byte landed
    assert [(wc.wr_id, wc.status) for wc in got] == [(1, WcStatus.REM_ACCESS_ERR)]
    assert s["tx_nack_unexp_event"] >= 1 and w["rx_nack_unexp_event"] >= 1
    assert w.get("tx_rtx", 0) == 0
