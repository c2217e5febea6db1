"""Fast-loss detector ReorderThreshold (hosts/transport/loss.py) on its own."""

from __future__ import annotations

import pytest

from hosts.transport.loss import ReorderThreshold


def test_lost_once_threshold_later_transmissions_were_delivered() -> None:
    det = ReorderThreshold(4)
    assert not det.is_lost(0)  # nothing delivered yet
    det.on_acked(3)
    assert not det.is_lost(0)  # 3 later ones delivered
    det.on_acked(4)
    assert det.is_lost(0) and not det.is_lost(1)
    det.on_acked(2)  # an older delivery never moves the mark back
    assert det.max_acked == 4


def test_spurious_retransmissions_double_the_threshold_up_to_the_cap() -> None:
    det = ReorderThreshold(3, max_threshold=20)
    seen = []
    for _ in range(5):
        det.on_spurious()
        seen.append(det.threshold)
    assert seen == [6, 12, 20, 20, 20] and det.spurious == 5
    assert ReorderThreshold(8, max_threshold=2).max_threshold == 8  # the cap is at least the start
    with pytest.raises(ValueError):
        ReorderThreshold(0)
