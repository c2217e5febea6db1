"""make test-stress's plan and its reading of pytest's output (testbed/stress.py)."""

from __future__ import annotations

import pytest

from testbed.stress import Conditions, failed_tests, parse_counts, schedule


def test_alternating_rounds_cover_every_condition() -> None:
    plan = schedule(6, "alternate", "alternate")
    assert [c.hog for c in plan] == [False, False, False, True, True, True]
    assert [c.ipv6_off for c in plan] == [False, True, False, True, False, True]
    assert {(c.hog, c.ipv6_off) for c in plan} == {(False, False), (False, True),
                                                   (True, False), (True, True)}
    assert schedule(2, "on", "off") == [Conditions(True, False)] * 2


def test_counts_of_both_passes_and_the_failed_tests() -> None:
    log = ("tests/unit/test_a.py ..F\n"
           "FAILED tests/unit/test_a.py::test_x - AssertionError: 1 passed in 2.0s? no\n"
           "===== 1 failed, 1299 passed, 1 skipped, 2 errors in 630.12s (0:10:30) =====\n"
           "pure-Python reference pass (MRCNET_PURE_PYTHON=1)\n"
           "356 passed in 20.1s\n"
           "ERROR tests/unit/test_b.py::test_y\n")
    counts = parse_counts(log)
    assert counts["passed"] == 1299 + 356  # not the "1 passed" inside the FAILED line
    assert (counts["failed"], counts["skipped"], counts["errors"]) == (1, 1, 2)
    assert failed_tests(log) == ["tests/unit/test_a.py::test_x", "tests/unit/test_b.py::test_y"]


def test_a_series_names_its_one_commit_and_refuses_an_unknown_one(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The commit is resolved once, before any round clones anything: a name that is no
    commit is refused at once (exit 2, the reason), nothing started."""
    import testbed.stress as stress

    monkeypatch.setattr(stress.os, "geteuid", lambda: 0)
    started: list[object] = []
    monkeypatch.setattr(stress, "run_round", lambda *a: started.append(a))
    with pytest.raises(SystemExit) as exc:
        stress.main(["--rounds", "1", "--commit", "no-such-revision-anywhere"])
    assert exc.value.code == 2 and started == []
    assert "no-such-revision-anywhere: no such commit" in capsys.readouterr().err
