"""Match tables of the p4json engine: exact, LPM, ternary (priorities), range, optional,
const entries and default entries, direct counters, action profiles and selectors, each
compared with a brute-force reference on random entries and keys."""

from __future__ import annotations

import random

import pytest

from switch.p4json import hashes
from switch.p4json.engine import Engine
from switch.p4json.runtime import EntryError
from tests.unit.p4json_programs import BACKENDS, Builder, assign, field, hexstr, param, to_port

FIELDS = [("k1", 16), ("k2", 8), ("out", 16)]


def keyed_program(kinds: list[str], *, counters: bool = False,
                  backend: str = "python") -> tuple[Engine, int, int]:
    """h = {k1:16, k2:8, out:16}; table t keyed on (k1, k2) with ``kinds``; ``set(v)`` writes
    h.out = v; default ``miss`` writes 0xFFFF. Returns (engine, set id, miss id)."""
    b = Builder()
    b.header_type("h_t", FIELDS)  # type: ignore[arg-type]
    b.header("h", "h_t")
    b.state("start", [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}])
    b.order = ["h"]
    set_id = b.action("set", [assign(field("h", "out"), param(0))], [("v", 16)])
    miss_id = b.action("miss", [assign(field("h", "out"), hexstr(0xFFFF, 16))])
    keys = [(kind, ["h", name]) for kind, name in zip(kinds, ("k1", "k2"))]
    b.table("ingress", "t", keys, [set_id, miss_id], miss_id, counters=counters)
    fwd = b.call("ingress", "fwd", [to_port(1)])
    b.chain("ingress", ["t", fwd])
    return Engine(b.json(), clock=lambda: 0.0, backend=backend), set_id, miss_id


def lookup(engine: Engine, k1: int, k2: int) -> int:
    frame = k1.to_bytes(2, "big") + bytes([k2]) + b"\0\0"
    out = engine.process(frame, 0, 0.0)
    assert len(out) == 1
    return int.from_bytes(out[0].data[3:5], "big")


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_two_fields(backend: str) -> None:
    engine, set_id, _ = keyed_program(["exact", "exact"], backend=backend)
    t = engine.tables["t"]
    t.add((0x1234, 7), 0, set_id, (42,))
    assert lookup(engine, 0x1234, 7) == 42
    assert lookup(engine, 0x1234, 8) == 0xFFFF
    with pytest.raises(EntryError) as exc:
        t.add((0x1234, 7), 0, set_id, (1,))
    assert exc.value.kind == "exists"
    with pytest.raises(EntryError):
        t.add((0x10000, 7), 0, set_id, (1,))  # does not fit 16 bits
    t.modify((0x1234, 7), 0, set_id, (43,))
    assert lookup(engine, 0x1234, 7) == 43
    t.remove((0x1234, 7))
    assert lookup(engine, 0x1234, 7) == 0xFFFF


@pytest.mark.parametrize("backend", BACKENDS)
def test_lpm_with_an_exact_field_matches_brute_force(backend: str) -> None:
    engine, set_id, _ = keyed_program(["lpm", "exact"], backend=backend)
    t = engine.tables["t"]
    rng = random.Random(5)
    entries: dict[tuple[int, int, int], int] = {}
    for i in range(300):
        plen = rng.randint(0, 16)
        value = rng.getrandbits(16) & (((1 << plen) - 1) << (16 - plen))
        k2 = rng.randint(0, 3)
        if (value, plen, k2) in entries:
            continue
        entries[(value, plen, k2)] = i
        t.add(((value, plen), k2), 0, set_id, (i,))
    for _ in range(1500):
        k1, k2 = rng.getrandbits(16), rng.randint(0, 3)
        best = None
        for (value, plen, ek2), v in entries.items():
            hit = ek2 == k2 and k1 >> (16 - plen) == value >> (16 - plen)
            if hit and (best is None or plen > best[0]):
                best = (plen, v)
        assert lookup(engine, k1, k2) == (best[1] if best else 0xFFFF)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ternary_lowest_priority_number_wins_then_the_older_entry(backend: str) -> None:
    engine, set_id, _ = keyed_program(["ternary", "ternary"], backend=backend)
    t = engine.tables["t"]
    rng = random.Random(7)
    rules = []
    for i in range(200):
        m1, m2 = rng.getrandbits(16) & rng.getrandbits(16), rng.choice([0, 0xF0, 0xFF])
        v1, v2 = rng.getrandbits(16) & m1, rng.getrandbits(8) & m2
        prio = rng.randint(1, 20)
        try:
            t.add(((v1, m1), (v2, m2)), prio, set_id, (i,))
        except EntryError:
            continue
        rules.append((prio, i, v1, m1, v2, m2))
    for _ in range(1500):
        k1, k2 = rng.getrandbits(16), rng.getrandbits(8)
        hits = [(p, i) for p, i, v1, m1, v2, m2 in rules if k1 & m1 == v1 and k2 & m2 == v2]
        assert lookup(engine, k1, k2) == (min(hits)[1] if hits else 0xFFFF)


@pytest.mark.parametrize("backend", BACKENDS)
def test_range_and_ternary_together(backend: str) -> None:
    engine, set_id, _ = keyed_program(["range", "ternary"], backend=backend)
    t = engine.tables["t"]
    t.add(((100, 200), (0, 0)), 5, set_id, (1,))
    t.add(((150, 160), (0x0F, 0x0F)), 2, set_id, (2,))
    assert lookup(engine, 99, 0) == 0xFFFF
    assert lookup(engine, 100, 0) == 1
    assert lookup(engine, 155, 0x1F) == 2  # both match; priority 2 beats 5
    assert lookup(engine, 155, 0x10) == 1
    assert lookup(engine, 200, 0) == 1 and lookup(engine, 201, 0) == 0xFFFF
    with pytest.raises(EntryError):
        t.add(((10, 5), (0, 0)), 1, set_id, (3,))  # low > high


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_entry_can_be_changed_unless_const(backend: str) -> None:
    engine, set_id, _ = keyed_program(["exact", "exact"], backend=backend)
    t = engine.tables["t"]
    t.set_default(set_id, (7,))
    assert lookup(engine, 1, 1) == 7
    t.reset_default()
    assert lookup(engine, 1, 1) == 0xFFFF
    t.spec.default_const = True
    with pytest.raises(EntryError):
        t.set_default(set_id, (7,))


def test_direct_counters_count_hits_with_the_received_length() -> None:
    engine, set_id, _ = keyed_program(["exact", "exact"], counters=True)
    t = engine.tables["t"]
    entry = t.add((5, 5), 0, set_id, (1,))
    for _ in range(3):
        lookup(engine, 5, 5)
    lookup(engine, 5, 6)
    assert entry.counter == [3, 15]  # packets, bytes (5-byte frames)


@pytest.mark.parametrize("backend", BACKENDS)
def test_const_entries_are_immutable_and_match(backend: str) -> None:
    b = Builder()
    b.header_type("h_t", FIELDS)  # type: ignore[arg-type]
    b.header("h", "h_t")
    b.state("start", [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}])
    b.order = ["h"]
    set_id = b.action("set", [assign(field("h", "out"), param(0))], [("v", 16)])
    entries = [
        {"match_key": [{"match_type": "ternary", "key": "0x0010", "mask": "0x00f0"}],
         "action_entry": {"action_id": set_id, "action_data": ["0x0001"]}, "priority": 2},
        {"match_key": [{"match_type": "ternary", "key": "0x0000", "mask": "0x0000"}],
         "action_entry": {"action_id": set_id, "action_data": ["0x0002"]}, "priority": 3},
        {"match_key": [{"match_type": "ternary", "key": "0x0011", "mask": "0xffff"}],
         "action_entry": {"action_id": set_id, "action_data": ["0x0003"]}, "priority": 1},
    ]
    b.table("ingress", "t", [("ternary", ["h", "k1"])], [set_id], set_id, entries=entries,
            default_args=[9])
    fwd = b.call("ingress", "fwd", [to_port(1)])
    b.chain("ingress", ["t", fwd])
    engine = Engine(b.json(), clock=lambda: 0.0, backend=backend)
    assert lookup(engine, 0x11, 0) == 3
    assert lookup(engine, 0x12, 0) == 1
    assert lookup(engine, 0x02, 0) == 2
    with pytest.raises(EntryError) as exc:
        engine.tables["t"].add(((1, 1),), 1, set_id, (1,))
    assert exc.value.kind == "const"


def selector_program(backend: str = "python") -> tuple[Engine, int]:
    b = Builder()
    b.header_type("h_t", FIELDS)  # type: ignore[arg-type]
    b.header("h", "h_t")
    b.state("start", [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}])
    b.order = ["h"]
    set_id = b.action("set", [assign(field("h", "out"), param(0))], [("v", 16)])
    b.profiles["ingress"].append({
        "name": "sel", "id": 0, "max_size": 64,
        "selector": {"algo": "crc16", "input": [{"type": "field", "value": ["h", "k1"]},
                                                 {"type": "field", "value": ["h", "k2"]}]},
    })
    b.table("ingress", "t", [("exact", ["h", "out"])], [set_id], None, kind="indirect_ws",
            profile="sel")
    fwd = b.call("ingress", "fwd", [to_port(1)])
    b.chain("ingress", ["t", fwd])
    return Engine(b.json(), clock=lambda: 0.0), set_id


@pytest.mark.parametrize("backend", BACKENDS)
def test_selector_picks_member_by_crc16_of_the_packed_inputs(backend: str) -> None:
    from switch.p4json.runtime import GroupMember

    engine, set_id = selector_program(backend)
    prof = engine.profiles["sel"]
    for mid in (30, 10, 20):
        prof.members[mid] = (set_id, (mid,))
    prof.groups[1] = [GroupMember(30), GroupMember(10), GroupMember(20, weight=2)]
    prof.rebuild()
    engine.tables["t"].add((0,), 0, None, group=1)  # h.out = 0 on input selects the group
    ordered = [10, 20, 20, 30]  # by member id, weight copies
    rng = random.Random(3)
    for _ in range(300):
        k1, k2 = rng.getrandbits(16), rng.getrandbits(8)
        h = hashes.crc16(k1.to_bytes(2, "big") + bytes([k2]))
        assert lookup(engine, k1, k2) == ordered[h % 4]
    # a watched port going down removes its member
    prof.groups[1] = [GroupMember(10, watch_port=3), GroupMember(20)]
    prof.rebuild()
    engine.set_port_status(3, False)
    assert {lookup(engine, rng.getrandbits(16), 0) for _ in range(50)} == {20}
    # a member entry (no group)
    engine.tables["t"].modify((0,), 0, None, member=30)
    assert lookup(engine, 1, 1) == 30
