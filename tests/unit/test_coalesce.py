"""Wake-up coalescing (common/coalesce.py): when a loop moderates its waits and when not."""

from __future__ import annotations

import pytest

from common.coalesce import MIN_WALL_SLACK, Coalescer


def test_off_never_moderates() -> None:
    c = Coalescer(0.0)
    assert [c.after_round(t * 1e-9, True) for t in range(5)] == [False] * 5


def test_a_slack_shorter_than_a_useful_sleep_is_off() -> None:
    """At TDF 1 a fabric's slack (half a 4 KiB frame at 10 Gb/s: 1.6 us) is below what a
    sleep is worth; dilated 200 times (330 us of wall time) it is in force."""
    assert Coalescer(1.6e-6, tdf=1.0).slack == 0.0
    assert Coalescer(1.6e-6, tdf=200.0).slack == 1.6e-6
    assert Coalescer(MIN_WALL_SLACK).slack == MIN_WALL_SLACK
    off = Coalescer(1.6e-6)
    assert [off.after_round(t * 1e-7, True) for t in range(4)] == [False] * 4


def test_isolated_events_are_not_delayed() -> None:
    """Work rounds further apart than the slack: every wait stays normal."""
    c = Coalescer(1e-3)
    assert [c.after_round(t, True) for t in (0.0, 0.002, 0.0035, 0.010)] == [False] * 4


def test_dense_work_moderates_until_a_round_finds_nothing() -> None:
    c = Coalescer(1e-3)
    assert c.after_round(0.0, True) is False  # the first round: nothing to compare with
    assert c.after_round(0.0004, True) is True  # within the slack of the previous one
    # moderated rounds are a slack apart (>= slack): they stay moderated while they find work
    assert c.after_round(0.0014, True) is True
    assert c.after_round(0.0025, True) is True
    assert c.after_round(0.0035, False) is False  # the poll after the sleep found nothing
    assert c.after_round(0.0060, True) is False  # isolated again: normal
    assert c.after_round(0.0061, True) is True


def test_a_round_without_work_does_not_count_as_recent_work() -> None:
    c = Coalescer(1e-3)
    c.after_round(0.0, True)
    c.after_round(0.0009, False)
    assert c.after_round(0.0012, True) is False  # 1.2 ms since the last work


@pytest.mark.parametrize("slack", [-1e-6, float("nan")])
def test_bad_slack_is_refused(slack: float) -> None:
    with pytest.raises(ValueError, match="slack"):
        Coalescer(slack)
