"""The controller's collective sessions: step barrier, reconfigurations, read-back, errors."""

from __future__ import annotations

import threading

import pytest

from common.netns import wait_until
from common.proto import mrc_ctl_pb2 as pb
from controller.core import Controller
from controller.errors import CtlError
from controller.fabric import InMemoryFabric
from topologies.loader import load

GPUS = [f"g{i}" for i in range(8)]


def shift(offset: int, port: int = 0) -> pb.CircuitSet:
    return pb.CircuitSet(circuits=[pb.Circuit(src=f"g{i}:{port}", dst=f"g{(i + offset) % 8}:0")
                                   for i in range(8)])


def controller() -> tuple[Controller, InMemoryFabric, list[float]]:
    backend = InMemoryFabric()
    ctl = Controller(load("scaleup-ocs"), backend=backend)
    slept: list[float] = []
    assert ctl.fabric is not None
    ctl.fabric.sleep = slept.append
    return ctl, backend, slept


def run_all(ctl: Controller, session: str, steps: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def rank(r: int) -> None:
        try:
            for step in range(1, steps + 2):
                ctl.collectives.barrier(pb.StepBarrierRequest(session=session, rank=r, step=step))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return errors


def test_barrier_reconfigures_between_intervals_and_reads_back() -> None:
    ctl, backend, slept = controller()
    req = pb.StartCollectiveRequest(session="s1", ranks=GPUS, alpha_r_s=0.002,
                                    intervals=[shift(1), shift(2), shift(4), shift(2),
                                               shift(1)],
                                    step_interval=[0, 1, 2, 2, 3, 4])
    state = ctl.start_collective(req)
    assert state.reconfigurations == 0 and not state.done
    first = backend.read_circuits()
    assert len(first) == 8  # interval 0 applied at start, without a dark period
    assert slept == []
    assert run_all(ctl, "s1", 6) == []
    state = ctl.collectives.state("s1")
    assert state.done and state.reconfigurations == 4
    assert slept == [0.002] * 4  # each reconfiguration waited out alpha_r
    recon = [r.step for r in state.records if r.reconfigured]
    assert recon == [2, 3, 5, 6]
    for r in state.records[:6]:
        assert r.last_arrival_s >= r.first_arrival_s and r.released_s >= r.last_arrival_s
        want = ctl.fabric.check_circuits(list(req.intervals[r.interval].circuits))[1]  # type: ignore[union-attr]
        assert {x.in_port: x.out_port for x in r.readback} == want


def test_bad_sessions_are_refused_before_anything_changes() -> None:
    ctl, backend, _ = controller()
    bad_gpu = pb.StartCollectiveRequest(session="x", ranks=["g0", "h9"], intervals=[shift(1)],
                                        step_interval=[0])
    with pytest.raises(CtlError, match="h9"):
        ctl.start_collective(bad_gpu)
    clash = pb.CircuitSet(circuits=[pb.Circuit(src="g0:0", dst="g1:0"),
                                    pb.Circuit(src="g2:0", dst="g1:0")])
    with pytest.raises(CtlError, match="already receives"):
        ctl.start_collective(pb.StartCollectiveRequest(
            session="x", ranks=GPUS, intervals=[shift(1), clash], step_interval=[0, 1]))
    with pytest.raises(CtlError, match="in order"):
        ctl.start_collective(pb.StartCollectiveRequest(
            session="x", ranks=GPUS, intervals=[shift(1), shift(2)], step_interval=[1, 0]))
    assert backend.circuit_changes == 0


def test_barrier_misuse_is_an_error_not_a_hang() -> None:
    ctl, _, _ = controller()
    ctl.start_collective(pb.StartCollectiveRequest(session="s", ranks=GPUS,
                                                   intervals=[shift(1)], step_interval=[0],
                                                   barrier_timeout_s=0.2))
    with pytest.raises(CtlError, match="rank 9"):
        ctl.collectives.barrier(pb.StepBarrierRequest(session="s", rank=9, step=1))
    with pytest.raises(CtlError, match="before step 1 was released"):
        ctl.collectives.barrier(pb.StepBarrierRequest(session="s", rank=0, step=2))
    with pytest.raises(CtlError, match="no collective session"):
        ctl.collectives.barrier(pb.StepBarrierRequest(session="nope", rank=0, step=1))
    # one rank alone times out and the session is failed for everyone
    with pytest.raises(CtlError, match="did not arrive"):
        ctl.collectives.barrier(pb.StepBarrierRequest(session="s", rank=0, step=1))
    with pytest.raises(CtlError, match="failed"):
        ctl.collectives.barrier(pb.StepBarrierRequest(session="s", rank=1, step=1))


def _arrive(ctl: Controller, session: str, ranks: list[int], step: int,
            errors: list[BaseException]) -> list[threading.Thread]:
    def one(r: int) -> None:
        try:
            ctl.collectives.barrier(pb.StepBarrierRequest(session=session, rank=r, step=step))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    return threads


def test_early_barrier_reconfigures_once_the_listed_gpus_arrived() -> None:
    ctl, backend, slept = controller()
    intervals = [shift(1), shift(2)]
    ctl.start_collective(pb.StartCollectiveRequest(
        session="e", ranks=GPUS, alpha_r_s=0.002, intervals=intervals, step_interval=[0, 1],
        early=[pb.EarlyReconfiguration(step=2, ranks=[0, 1])], barrier_timeout_s=20))
    errors: list[BaseException] = []
    for t in _arrive(ctl, "e", list(range(8)), 1, errors):
        t.join(20)
    assert errors == [] and ctl.collectives.state("e").records[0].released_s > 0
    want = ctl.fabric.check_circuits(list(intervals[1].circuits))[1]  # type: ignore[union-attr]
    early = _arrive(ctl, "e", [0, 1], 2, errors)
    wait_until(lambda: backend.read_circuits() == want, 10, "the early reconfiguration")
    state = ctl.collectives.state("e")
    assert slept == [0.002] and state.reconfigurations == 1
    assert state.records[1].released_s == 0  # six GPUs still in step 1: not released
    rest = _arrive(ctl, "e", list(range(2, 8)), 2, errors)
    for t in early + rest:
        t.join(20)
    for t in _arrive(ctl, "e", list(range(8)), 3, errors):
        t.join(20)
    state = ctl.collectives.state("e")
    assert errors == [] and state.done
    assert state.reconfigurations == 1 and slept == [0.002]  # once, not again at release
    assert state.records[1].early and state.records[1].reconfigured
    assert state.records[1].dark_end_s <= state.records[1].last_arrival_s


def test_early_entries_must_name_a_reconfiguring_step() -> None:
    ctl, _, _ = controller()
    for step, ranks, needle in [(1, [0], "new interval"), (2, [0], "new interval"),
                                (3, [9], "beyond")]:
        with pytest.raises(CtlError, match=needle):
            ctl.start_collective(pb.StartCollectiveRequest(
                session="x", ranks=GPUS, intervals=[shift(1), shift(2)],
                step_interval=[0, 0, 1],
                early=[pb.EarlyReconfiguration(step=step, ranks=ranks)]))


def test_finished_sessions_give_way_to_new_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from controller import collective

    monkeypatch.setattr(collective, "MAX_SESSIONS", 2)
    ctl, _, _ = controller()

    def start(name: str) -> None:
        ctl.start_collective(pb.StartCollectiveRequest(
            session=name, ranks=GPUS, intervals=[shift(1)], step_interval=[0]))

    start("a")
    start("b")
    with pytest.raises(CtlError, match="in progress"):  # both still running
        start("c")
    assert run_all(ctl, "a", 1) == [] and ctl.collectives.state("a").done
    start("c")  # "a" is finished: it makes room
    with pytest.raises(CtlError, match="no collective session"):
        ctl.collectives.state("a")
    assert not ctl.collectives.state("b").done  # a live session is never dropped
