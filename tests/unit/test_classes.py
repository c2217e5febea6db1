"""common.classes rows and the dscp_class write: one definition, consistent with the P4 schema."""

from __future__ import annotations

import dataclasses

from common.classes import CLASS_IDS, DEFAULT_CLASSES, TrafficClass, dscp_classes
from common.p4schema.bytestrings import encode, fits
from common.p4schema.mrc_switch import PROGRAM, dscp_class_write


def test_rows_follow_the_class_map_and_ids_index_eight_cells_per_port() -> None:
    custom = dataclasses.replace(
        DEFAULT_CLASSES, dscp={**DEFAULT_CLASSES.dscp, TrafficClass.CONTROL: 56}
    )
    rows = dscp_classes(custom)
    assert [r.traffic_class for r in rows] == list(TrafficClass)
    assert sorted(CLASS_IDS.values()) == list(range(len(TrafficClass))) and max(CLASS_IDS.values()) < 8
    for row in rows:
        assert row.dscp == custom.dscp[row.traffic_class]
        assert row.priority == custom.priority[row.traffic_class]
        assert row.class_id == CLASS_IDS[row.traffic_class]
    trimmable = {r.traffic_class for r in rows if r.trimmable}
    assert trimmable == {TrafficClass.TRIMMABLE, TrafficClass.TRIMMABLE_RETX}


def test_dscp_class_write_names_the_schema_table_and_fits_its_widths() -> None:
    for row in dscp_classes(DEFAULT_CLASSES):
        table, match, action, params = dscp_class_write(row)
        schema = PROGRAM.table(table)
        assert [m.name for m in schema.match_fields] == list(match)
        assert all(fits(encode(v), m.bitwidth) for m, v in zip(schema.match_fields, match.values()))
        assert action in {a.name for a in schema.actions}
        declared = PROGRAM.action(action).params
        assert [p.name for p in declared] == list(params)
        assert all(fits(encode(params[p.name]), p.bitwidth) for p in declared)
