"""Workload jobs release what they created (mrcnet/fabric/hostjobs.py), on real transport cores.

Two agents with the real HostCore joined by a socketpair run a sink and a writer job the way
the fabric's job app does; afterwards neither agent holds a QP, the writer left its done
marker, the sink's digest is the pattern's, and the QPs' qlog files are closed but complete.
With ``wimm`` every Write is a WriteImm and the sink counts one completion per WR.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest

from common.netns import wait_until
from hosts.agent.qlog import read_qlog
from hosts.api import open_device
from hosts.bulk import pattern
from mrcnet.fabric import hostjobs
from tests.unit.test_agent_loop import Pair

SIZE = 1 << 20


@pytest.mark.parametrize("wimm", [False, True])
def test_a_finished_flow_leaves_no_qp_behind(tmp_path: Path, wimm: bool) -> None:
    p = Pair(tmp_path / "qlog", real_core=True)
    try:
        oob = tmp_path / "oob"
        common = {"size": SIZE, "seed": 5, "qp_type": "MRC", "oob_dir": str(oob),
                  "timeout": 60, "chunk": 256 << 10, "wimm": wimm, "max_wimm": 2}
        jobs = [(p.b, {**common, "id": "f", "role": "sink", "name": "f-s", "peer": "f-w"},
                 tmp_path / "sink.result.json"),
                (p.a, {**common, "id": "f", "role": "writer", "name": "f-w", "peer": "f-s"},
                 tmp_path / "writer.result.json")]
        threads = [threading.Thread(target=hostjobs._run_and_report,
                                    args=(open_device(agent), job, result))
                   for agent, job, result in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        sink = json.loads((tmp_path / "sink.result.json").read_text())
        writer = json.loads((tmp_path / "writer.result.json").read_text())
        assert writer["errors"] == [] and sink["errors"] == [], (writer, sink)
        assert sink["sha256"] == hashlib.sha256(pattern(SIZE, 5)).hexdigest()
        assert sink["imm_completions"] == (SIZE // (256 << 10) if wimm else 1)
        assert writer["completed_wrs"] == SIZE // (256 << 10)
        assert [b for _t, b in writer["progress"]][-1] == SIZE
        assert writer["qp_state"] == "RTS" and sink["qp_state"] == "RTS"  # read before release
        assert (oob / "f-w-done.json").exists()
        core_a, core_b = p.a.core, p.b.core
        wait_until(lambda: not p.a.call(core_a.qp_numbers)  # type: ignore[attr-defined]
                   and not p.b.call(core_b.qp_numbers), 10,  # type: ignore[attr-defined]
                   "both jobs to release their QPs")
        assert not p.a.tracked_qps and not p.b.tracked_qps
        assert p.a.qlog is not None and not [q for q in p.a.qlog._files if q is not None]
        # the destroyed QP's counters still count in the host's (retired), its qlog is whole
        stats = p.a.call(core_a.host_stats)  # type: ignore[attr-defined]
        assert stats.get("tx_data", 0) >= SIZE // 4096
        header, _events = read_qlog(tmp_path / "qlog" / f"ha-qp{writer['qpn']}.sqlog")
        assert header["trace"]["common_fields"]["qpn"] == writer["qpn"]
    finally:
        p.close()
