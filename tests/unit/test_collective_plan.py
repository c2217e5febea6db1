"""The collective run plan's one schema (common/collective_plan): what the writer builds is what
every GPU reads back, and each kind of malformed or inconsistent plan is refused with a
``PlanError`` that names the field, never a crash.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from common.collective_plan import PlanError, RunPlan
from common.collectives import Collective, build
from controller.harvest import runplan, schedules
from controller.harvest.engine import Synthesizer
from controller.harvest.model import HarvestError, Params
from tests import overlap_plan as op

N = 8
SIZE = 1 << 16
RANKS = [f"g{i}" for i in range(N)]


def make(name: str, degree: int, kind: str, phase: str = "allreduce",
         barrier: str = "all") -> RunPlan:
    coll = build(name, N, phase)
    syn = Synthesizer(coll, SIZE, Params(degree, 1e8, 1e-4, 1e-5, 1e-3))
    plan = runplan.build_plan(coll, schedules.builtin(kind, syn), SIZE, degree, RANKS,
                              bandwidth_bps=1e8, alpha_s=1e-4, delta_s=1e-5, dark_s=0.03)
    return runplan.with_barrier(plan, barrier)


def reread(plan: RunPlan) -> RunPlan:
    return RunPlan.from_json(json.loads(json.dumps(plan.to_json())))


PLANS = {
    "rd-static": lambda: make("rd", 1, "static"),
    "rd-every-step-early": lambda: make("rd", 1, "every-step", barrier="early"),
    "swing-harvest-d2": lambda: make("swing", 2, "harvest"),
    "ring-reduce-scatter": lambda: make("ring", 1, "static", "reduce-scatter"),
    "bruck-all-to-all": lambda: make("bruck", 1, "every-step", "all-to-all"),
    "custom-overlap-early": lambda: op.overlap_plan(SIZE, RANKS, 0.05, "early"),
}


def test_the_prediction_adds_the_acknowledgements_return_over_one_way_circuits() -> None:
    """With ``ack_hop_s`` each step's prediction gains that much per hop of its longest
    acknowledgement route: recursive doubling's step at offset o on the circulant C(o)
    (every-step, one port) sends its ACKs n/o - 1 hops back round the cycle; on the static
    ring C(1) they go n - o hops."""
    coll = build("rd", N, "allreduce")
    syn = Synthesizer(coll, SIZE, Params(1, 1e8, 1e-4, 1e-5, 1e-3))
    hop = 2e-5
    offsets = [1, 2, 4, 4, 2, 1]  # reduce-scatter then all-gather
    for kind, back in (("every-step", [N // o - 1 for o in offsets]),
                       ("static", [N - o for o in offsets])):
        sched = schedules.builtin(kind, syn)
        plain = runplan.build_plan(coll, sched, SIZE, 1, RANKS, bandwidth_bps=1e8)
        plan = runplan.build_plan(coll, sched, SIZE, 1, RANKS, bandwidth_bps=1e8,
                                  ack_hop_s=hop)
        assert [st.ack_s for st in plan.steps] == pytest.approx([hop * b for b in back])
        assert [st.model_s - st.ack_s for st in plan.steps] == pytest.approx(
            [st.model_s for st in plain.steps])
        assert plan.model.model_s == pytest.approx(sched.model_s + hop * sum(back))
        assert plain.model.model_s == pytest.approx(sched.model_s)
        assert all(st.ack_s == 0 for st in plain.steps)
        assert reread(plan) == plan and plan.model.ack_hop_s == hop


@pytest.mark.parametrize("name", sorted(PLANS))
def test_what_the_writer_builds_reads_back_equal(name: str, tmp_path: Path) -> None:
    plan = PLANS[name]()
    again = reread(plan)
    assert again == plan
    assert again.to_json() == plan.to_json()
    assert again.algorithm == plan.algorithm
    assert RunPlan.load(plan.save(tmp_path / "plan.json")) == plan
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left nothing behind


def test_the_json_keeps_the_fields_and_their_shapes() -> None:
    """The file GPUs and tools read: the documented keys, routes keyed 'source>destination',
    paths of [gpu, port] hops, circuits [u, u_port, v, v_port]."""
    plan = make("rd", 1, "every-step", barrier="early")
    data = plan.to_json()
    assert list(data) == ["version", "collective", "phase", "gpus", "degree", "size_bytes",
                          "dtype", "buckets", "schedule", "ranks", "intervals", "steps",
                          "model", "barrier", "dark_s"]
    assert data["version"] == 1 and data["ranks"] == RANKS and data["dark_s"] == 0.03
    step = data["steps"][0]
    assert set(step) == {"step", "interval", "kind", "sends", "blocks", "theta", "hops",
                         "model_s", "volume_bytes", "routes"}
    src, dst = 0, build("rd", N).steps[0].sends[0]
    route = step["routes"][f"{src}>{dst}"]
    assert route["paths"] == [[[src, 0]]] and route["buckets"] == [0] * 64
    assert all(len(c) == 4 for iv in data["intervals"] for c in iv["circuits"])
    later = data["steps"][1]
    assert later["reconfigure_after"] == list(range(N)) and \
        later["hidden_reconfiguration_s"] == 0.0
    assert "hidden_reconfiguration_s" in data["model"]


def test_a_plan_without_the_optional_fields_reads_with_their_defaults() -> None:
    """Plans written before ``barrier`` and ``dark_s`` were always written still read."""
    data = make("rd", 1, "static").to_json()
    del data["barrier"], data["dark_s"]
    plan = RunPlan.from_json(data)
    assert plan.barrier == "all" and plan.dark_s == 0.0 and plan.predicted_unix is None


def test_derived_views() -> None:
    plan = make("rd", 1, "every-step")
    assert plan.n == N and plan.block_bytes == SIZE // N
    assert plan.algorithm == build("rd", N)
    changes = plan.interval_changes()
    assert len(changes) == plan.model.reconfigurations == len(plan.intervals) - 1 > 0
    assert changes == [plan.intervals[k].first for k in range(1, len(plan.intervals))]
    assert make("rd", 1, "static").interval_changes() == []


def _first_multi_hop(data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    for step in data["steps"]:
        for key, route in step["routes"].items():
            if any(len(p) > 1 for p in route["paths"]):
                return step, key
    raise AssertionError("no multi-hop route")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set the field at a '/'-separated path (list indices as numbers)."""
    def apply(data: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node: Any = data
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return apply


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node: Any = data
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        del node[last]
    return apply


def _truncate_multi_hop(data: dict[str, Any]) -> None:
    step, key = _first_multi_hop(data)
    path = next(p for p in step["routes"][key]["paths"] if len(p) > 1)
    del path[-1]


def _hop_from_elsewhere(data: dict[str, Any]) -> None:
    step, key = _first_multi_hop(data)
    path = step["routes"][key]["paths"][0]
    path[0] = [(path[0][0] + 3) % N, path[0][1]]


def _swap_first_steps(data: dict[str, Any]) -> None:
    data["steps"][0], data["steps"][1] = data["steps"][1], data["steps"][0]


def _duplicate_circuit(data: dict[str, Any]) -> None:
    circuits = data["intervals"][0]["circuits"]
    circuits.append(list(circuits[0]))
    data["intervals"][0]["edges"][0][2] += 1


def _drop_a_circuit(data: dict[str, Any]) -> None:
    del data["intervals"][0]["circuits"][-1]


def _stretch_last_interval(data: dict[str, Any]) -> None:
    data["intervals"][-1]["steps"][1] += 1


def _route_key(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        routes = data["steps"][0]["routes"]
        routes[new] = routes.pop(old)
    return apply


BAD: list[tuple[str, str, Callable[[dict[str, Any]], None], str]] = [
    # (case, base plan, mutation, what the error says)
    ("version", "rd-static", _set("version", 9), "version 9"),
    ("missing field", "rd-static", _delete("gpus"), "lacks 'gpus'"),
    ("unknown field", "rd-static", _set("colour", "red"), "unknown field"),
    ("gpus text", "rd-static", _set("gpus", "8"), "'gpus' must be an integer"),
    ("gpus bool", "rd-static", _set("gpus", True), "'gpus' must be an integer"),
    ("one gpu", "rd-static", _set("gpus", 1), "at least 2"),
    ("degree", "rd-static", _set("degree", 0), "'degree' must be at least 1"),
    ("buckets", "rd-static", _set("buckets", 48), "power of two"),
    ("dtype", "rd-static", _set("dtype", "int8"), "'dtype' must be one of"),
    ("size", "rd-static", _set("size_bytes", 100), "multiple"),
    ("ranks short", "rd-static", _set("ranks", RANKS[:-1]), "'ranks' must name the 8"),
    ("ranks twice", "rd-static", _set("ranks", ["g0"] * N), "'ranks' must name the 8"),
    ("rank number", "rd-static", _set("ranks/3", 3), "'ranks'[3] must be a string"),
    ("barrier", "rd-static", _set("barrier", "sometimes"), "'barrier' must be one of"),
    ("dark negative", "rd-static", _set("dark_s", -1), "'dark_s' must not be negative"),
    ("dark nan", "rd-static", _set("dark_s", float("nan")), "finite number"),
    ("collective", "rd-static", _set("collective", "nope"), "plan collective"),
    ("phase", "rd-static", _set("phase", "sideways"), "plan collective"),
    ("custom phase", "custom-overlap-early", _set("phase", "allreduce"), "phase 'custom'"),
    ("not an object", "rd-static", lambda d: d["steps"].__setitem__(0, [1]), "JSON object"),
    ("steps missing", "rd-static", lambda d: d["steps"].pop(), "steps"),
    ("steps order", "rd-every-step-early", _swap_first_steps, "numbered 2"),
    ("step shape", "rd-static", _set("steps/0/sends/0", 3), "is not step 1 of rd"),
    ("step kind", "rd-static", _set("steps/0/kind", "all-gather"), "is not step 1 of rd"),
    ("custom kind", "custom-overlap-early", _set("steps/0/kind", "broadcast"), "kind 'broadcast'"),
    ("custom self", "custom-overlap-early", _set("steps/0/sends/0", 0), "GPU 0 sends to 0"),
    ("custom block", "custom-overlap-early", _set("steps/0/blocks/0", [9]), "blocks of GPU 0"),
    ("custom width", "custom-overlap-early", _set("steps/0/sends", [None]), "each of the 8"),
    ("interval index", "rd-static", _set("steps/0/interval", 5), "interval 5 does not exist"),
    ("interval span", "rd-every-step-early", _set("steps/0/interval", 1), "covers steps 2..2"),
    ("hops", "rd-static", _set("steps/0/hops", 0), "'hops' must be at least 1"),
    ("theta", "rd-static", _set("steps/0/theta", -1.0), "'theta' must not be negative"),
    ("model_s text", "rd-static", _set("steps/0/model_s", "fast"), "finite number"),
    ("no routes", "rd-static", _delete("steps/0/routes"), "lacks 'routes'"),
    ("routes list", "rd-static", _set("steps/0/routes", []), "'routes' must be a JSON object"),
    ("route key", "rd-static", _route_key("0>1", "0-1"), "is not 'source>destination'"),
    ("route self", "rd-static", _route_key("0>1", "1>1"), "joins a GPU to itself"),
    ("route rank", "rd-static", _route_key("0>1", "0>9"), "9 is not one of 0..7"),
    ("no path", "rd-static", _set("steps/0/routes/0>1/paths", []), "has no path"),
    ("bucket count", "rd-static", _set("steps/0/routes/0>1/buckets", [0] * 32), "32 EV buckets"),
    ("bucket path", "rd-static", _set("steps/0/routes/0>1/buckets/5", 7), "bucket path: 7"),
    ("hop shape", "rd-static", _set("steps/0/routes/0>1/paths/0/0", [0]), "[gpu, port]"),
    ("hop not a circuit", "rd-static", _hop_from_elsewhere, "is not a circuit out of GPU"),
    ("path ends short", "rd-static", _truncate_multi_hop, "ends at GPU"),
    ("intervals empty", "rd-static", _set("intervals", []), "'intervals' is empty"),
    ("interval start", "rd-static", _set("intervals/0/steps", [2, 4]), "cover the steps in order"),
    ("interval end", "rd-every-step-early", _stretch_last_interval, "cover steps 1..7"),
    ("circuit shape", "rd-static", _set("intervals/0/circuits/0", [0, 0, 1]), "[u, u_port"),
    ("circuit port", "rd-static", _set("intervals/0/circuits/0/1", 1), "port: 1 is not one of 0..0"),
    ("circuit twice", "rd-static", _duplicate_circuit, "one circuit each way"),
    ("circuit missing", "rd-static", _drop_a_circuit, "do not realise the edges"),
    ("edge count", "rd-static", _set("intervals/0/edges/0/2", 0), "0 circuits"),
    ("model field", "rd-static", _delete("model/alpha_s"), "lacks 'alpha_s'"),
    ("reconfigurations", "rd-static", _set("model/reconfigurations", 2), "'reconfigurations'"),
    ("early marks", "rd-static", _set("steps/1/reconfigure_after", []), "belong to the steps"),
    ("early model", "rd-static", _set("model/hidden_reconfiguration_s", 0.0), "belongs to barrier"),
    ("early unmarked", "rd-every-step-early", _delete("steps/1/reconfigure_after"),
     "belong to the steps"),
    ("early rank", "rd-every-step-early", _set("steps/1/reconfigure_after", [0, 8]),
     "8 is not one of 0..7"),
]


@pytest.mark.parametrize(("base", "mutate", "message"), [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])
def test_a_bad_plan_is_refused_with_a_clear_error(
        base: str, mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    data = copy.deepcopy(PLANS[base]().to_json())
    RunPlan.from_json(copy.deepcopy(data))  # the base itself is fine
    mutate(data)
    with pytest.raises(PlanError) as err:
        RunPlan.from_json(data)
    assert message in str(err.value)


@pytest.mark.parametrize("data", [None, [], "plan", 3])
def test_what_is_not_a_plan_object_is_refused(data: Any) -> None:
    with pytest.raises(PlanError, match="JSON object"):
        RunPlan.from_json(data)


def test_a_plan_file_that_cannot_be_read_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    with pytest.raises(PlanError, match=r"none\.json"):
        RunPlan.load(missing)
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{not json")
    with pytest.raises(PlanError, match=r"garbled\.json"):
        RunPlan.load(garbled)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**make("rd", 1, "static").to_json(), "gpus": "8"}))
    with pytest.raises(PlanError, match=r"wrong\.json: plan 'gpus' must be an integer"):
        RunPlan.load(wrong)


def test_the_writer_refuses_a_collective_no_reader_knows() -> None:
    """A collective that is neither built in nor ``custom`` makes no plan: the GPUs could not
    run it."""
    known = build("rd", N)
    coll = Collective("mine", "allreduce", N, known.steps)
    syn = Synthesizer(known, SIZE, Params(1, 1e8, 1e-4, 1e-5, 1e-3))
    with pytest.raises(HarvestError, match=r"makes no valid plan.*plan collective"):
        runplan.build_plan(coll, schedules.builtin("static", syn), SIZE, 1, RANKS)
