"""Malformed P4Runtime updates and reads are refused with an error code, never a crash."""

from __future__ import annotations

import random

from google.rpc import code_pb2

from common.p4schema import PROGRAMS
from common.proto.p4.v1 import p4runtime_pb2
from switch.p4runtime.readwrite import apply_write_batch, read_entities
from switch.pipeline import Pipeline
from switch.pipeline.state import WriteError

MRC = PROGRAMS["mrc_switch"]


def _random_entity(rng: random.Random) -> p4runtime_pb2.Entity:
    ids = [*MRC.ids.values(), 0, 1, 0x02FFFFFF, rng.getrandbits(32)]
    e = p4runtime_pb2.Entity()
    kind = rng.randrange(6)
    if kind == 0:
        te = e.table_entry
        te.table_id = rng.choice(ids)
        te.is_default_action = rng.random() < 0.2
        te.priority = rng.choice([0, 0, 0, 5])
        for _ in range(rng.randint(0, 3)):
            fm = te.match.add(field_id=rng.randint(0, 3))
            if rng.random() < 0.5:
                fm.exact.value = rng.randbytes(rng.randint(0, 17))
            else:
                fm.lpm.value = rng.randbytes(rng.randint(0, 17))
                fm.lpm.prefix_len = rng.randint(-2, 130)
        r = rng.random()
        if r < 0.6:
            te.action.action.action_id = rng.choice(ids)
            for _ in range(rng.randint(0, 5)):
                te.action.action.params.add(param_id=rng.randint(0, 6),
                                            value=rng.randbytes(rng.randint(0, 8)))
        elif r < 0.7:
            te.action.action_profile_group_id = rng.randint(0, 3)
        elif r < 0.8:
            te.action.action_profile_member_id = rng.randint(0, 3)
    elif kind == 1:
        m = e.action_profile_member
        m.action_profile_id = rng.choice(ids)
        m.member_id = rng.randint(0, 3)
        m.action.action_id = rng.choice(ids)
        for i in range(rng.randint(0, 4)):
            m.action.params.add(param_id=i + 1, value=rng.randbytes(rng.randint(0, 7)))
    elif kind == 2:
        g = e.action_profile_group
        g.action_profile_id = rng.choice(ids)
        g.group_id = rng.randint(0, 3)
        g.max_size = rng.choice([0, 1, 5])
        for _ in range(rng.randint(0, 3)):
            g.members.add(member_id=rng.randint(0, 3), weight=rng.randint(-1, 3),
                          watch_port=rng.randbytes(rng.randint(0, 3)))
    elif kind == 3:
        c = e.counter_entry
        c.counter_id = rng.choice(ids)
        if rng.random() < 0.8:
            c.index.index = rng.choice([-1, 0, 5, 4095, 4096, 1 << 40])
        c.data.packet_count = rng.randint(0, 10)
    elif kind == 4:
        r = e.register_entry
        r.register_id = rng.choice(ids)
        if rng.random() < 0.8:
            r.index.index = rng.choice([-1, 0, 5, 511, 512, 1 << 40])
        r.data.bitstring = rng.randbytes(rng.randint(0, 4))
    else:
        e.meter_entry.meter_id = rng.choice(ids)
    return e


def test_random_updates_and_reads_never_raise_unexpected_errors() -> None:
    rng = random.Random(5)
    pipe = Pipeline()
    pipe.commit(MRC)
    codes: set[int] = set()
    for i in range(1500):
        updates = []
        for _ in range(rng.randint(1, 4)):
            upd = p4runtime_pb2.Update(type=rng.choice([0, 1, 1, 2, 3, 7]))  # type: ignore[arg-type]
            upd.entity.CopyFrom(_random_entity(rng))
            updates.append(upd)
        atomicity = rng.choice([0, 1, 2])
        with pipe.lock:
            results = apply_write_batch(pipe, updates, atomicity)
        assert len(results) == len(updates)
        codes.update(r.code for r in results)
        assert code_pb2.INTERNAL not in codes, [r.message for r in results]
        probe = _random_entity(rng)
        if i % 10 and probe.WhichOneof("entity") in ("counter_entry", "register_entry"):
            continue  # whole-array wildcard reads are slow; every 10th round keeps them
        try:
            read_entities(pipe, [probe])
        except WriteError as err:
            codes.add(err.code)
    # both acceptance and the main refusal classes were exercised
    assert {code_pb2.OK, code_pb2.INVALID_ARGUMENT} <= codes


def test_read_snapshot_is_isolated_from_later_writes() -> None:
    from switch.p4runtime.readwrite import snapshot
    from switch.pipeline.control import INSERT, table_write
    from switch.pipeline.state import ActionCall, Entry

    pipe = Pipeline()
    state = pipe.commit(MRC)
    snap = snapshot(state)
    state.counter("MrcIngress.drop_reason").count(1, 60)
    state.register("MrcIngress.port_down").write(3, 1)
    table_write(state, INSERT, state.table("MrcIngress.dscp_class"),
                Entry(key=(1,), action=ActionCall(MRC.id("MrcIngress.set_class"), (1, 1, 1))))
    assert snap.counter("MrcIngress.drop_reason").packets[1] == 0
    assert snap.register("MrcIngress.port_down").read(3) == 0
    assert snap.table("MrcIngress.dscp_class").entries == {}
    assert snapshot(state).table("MrcIngress.dscp_class").entries != {}
