"""The web view without a fabric: layout by tier and plane, snapshots computed from samples
(checked against sums done here), the server's token and Host checks, its event stream."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from mrcnet.fabric.liveview import Sample
from mrcnet.web.layout import layout
from mrcnet.web.server import D3, WebServer
from mrcnet.web.snapshot import LinkIndex, packet_snapshot, qp_states
from mrcnet.web.sources import ReplaySource, SyntheticSource
from topologies.loader import load

needs_assets = pytest.mark.skipif(not D3.exists(), reason="make install puts d3 in place")


def test_layout_puts_tiers_in_rows_planes_side_by_side_hosts_at_the_bottom() -> None:
    topo = load("clos-2p")
    view = layout(topo)
    pos = {n["id"]: n for n in view["nodes"]}
    assert len(view["links"]) == len(topo.links)
    assert [ln["i"] for ln in view["links"]] == list(range(len(topo.links)))
    spines = [n for n in view["nodes"] if n["kind"] == "switch" and n["tier"] == 1]
    leaves = [n for n in view["nodes"] if n["kind"] == "switch" and n["tier"] == 0]
    hosts = [n for n in view["nodes"] if n["kind"] == "host"]
    assert {n["y"] for n in spines} < {n["y"] for n in leaves} or \
        max(n["y"] for n in spines) < min(n["y"] for n in leaves)
    assert max(n["y"] for n in leaves) < min(n["y"] for n in hosts)
    # every switch of plane 0 is left of every switch of plane 1
    assert max(n["x"] for n in view["nodes"] if n.get("plane") == 0 and n["kind"] == "switch") \
        < min(n["x"] for n in view["nodes"] if n.get("plane") == 1 and n["kind"] == "switch")
    assert all(0 <= n["x"] <= view["width"] and 0 <= n["y"] <= view["height"]
               for n in pos.values())


def test_circuit_layout_has_every_gpu_around_the_ocs() -> None:
    topo = load("scaleup-ocs")
    view = layout(topo)
    gpus = [n for n in view["nodes"] if n["kind"] == "gpu"]
    ocs = [n for n in view["nodes"] if n["kind"] == "ocs"]
    assert len(gpus) == len(topo.gpus) and len(ocs) == 1
    r = {round(((n["x"] - ocs[0]["x"]) ** 2 + (n["y"] - ocs[0]["y"]) ** 2) ** 0.5) for n in gpus}
    assert len(r) == 1  # one circle


def test_snapshot_link_load_is_the_busier_direction_over_the_rate() -> None:
    topo = load("clos-2p")
    index = LinkIndex(topo)
    leaf_spine = next(ln for ln in topo.links if ln.a.node.startswith("p0-leaf")
                      and ln.b.node.startswith("p0-spine"))
    host_link = next(ln for ln in topo.links if ln.a.node == "h0" or ln.b.node == "h0")
    sw_end = host_link.a if host_link.a.node != "h0" else host_link.b
    rate = leaf_spine.params.rate_bps
    s = Sample(1.0, [0, 0], 0, 0, 0, 0, [0, 0],
               port_bps={str(leaf_spine.a): 0.25 * rate, str(leaf_spine.b): 0.5 * rate,
                         str(sw_end): 0.1 * host_link.params.rate_bps},
               port_in_bps={str(sw_end): 0.7 * host_link.params.rate_bps},
               port_depth={str(leaf_spine.b): 4096},
               ports_down=[str(sw_end)])
    snap = packet_snapshot(index, s, [], [], {"tdf": 1.0})
    assert snap["load"][leaf_spine.index] == 0.5
    assert snap["load"][host_link.index] == 0.7  # what h0 sent, seen on the leaf's ingress
    assert snap["bps"][leaf_spine.index] == round(0.5 * rate)
    assert snap["down"] == [host_link.index]
    assert snap["depth"] == {leaf_spine.b.node: {str(leaf_spine.b.port): 4096}}
    others = [v for i, v in enumerate(snap["load"])
              if i not in (leaf_spine.index, host_link.index)]
    assert others and not any(others)


def test_link_log_marks_links_down_when_switches_report_nothing() -> None:
    topo = load("clos-2p")
    index = LinkIndex(topo)
    log = [{"t": 1, "link": "p0-leaf0-p0-spine0", "up": False},
           {"t": 2, "link": "plane 1", "up": False}, {"t": 3, "link": "plane 1", "up": True},
           {"t": 4, "link": "h1:0", "up": False}]
    down = index.down(None, log)
    want = {ln.index for ln in topo.links
            if {ln.a.node, ln.b.node} == {"p0-leaf0", "p0-spine0"} or
            (ln.a.node == "h1" and ln.a.port == 0) or (ln.b.node == "h1" and ln.b.port == 0)}
    assert set(down) == want


def test_qp_states_count_every_qp_and_list_the_evs_not_good() -> None:
    latest = {("h0", 7, 0x100, 1): "ASSUMED_BAD", ("h0", 7, 0x101, 1): "GOOD",
              ("h1", 9, 0x110, 2): "DENIED"}
    rows = qp_states(latest, [("h2", 3), ("h0", 1)], ev_count=32)
    assert rows[-1] == {"qp": "h2/3", "good": 32, "bad": 0, "denied": 0, "not_good": []}
    assert rows[:-1] == [
        {"qp": "h0/7", "good": 31, "bad": 1, "denied": 0, "not_good": ["0x100@1 ASSUMED_BAD"]},
        {"qp": "h1/9", "good": 31, "bad": 0, "denied": 1, "not_good": ["0x110@2 DENIED"]},
        {"qp": "h0/1", "good": 32, "bad": 0, "denied": 0, "not_good": []},
    ]  # the QPs with EVs not GOOD first


def test_replay_source_plays_a_results_folder(tmp_path: Path) -> None:
    from topologies.loader import resolve

    topo_text = Path(resolve("clos-2p")).read_text()
    (tmp_path / "topology.yaml").write_text(topo_text)
    samples = [Sample(float(t), [1e6, 2e6], 0, 0, 0, 0, [0, 0],
                      ports_down=["p0-leaf0:3"] if t >= 2 else []).__dict__ for t in range(5)]
    (tmp_path / "results.json").write_text(json.dumps({
        "tdf": 4.0, "samples": samples, "link_events": [], "ev_events": [
            {"t": 0.5, "host": "h0", "qpn": 5, "ev": 0x100, "port": 1, "state": "ASSUMED_BAD"}]}))
    src = ReplaySource(tmp_path, speed=1000.0)  # far along its loop at once
    snap = src.snapshot()
    assert snap["tdf"] == 4.0 and snap["time"] == "virtual"
    assert 0.0 <= snap["t"] <= 4.0 and snap["span"] == [0.0, 4.0]
    assert src.topology()["name"] == "clos-2p"
    with pytest.raises(FileNotFoundError):
        ReplaySource(tmp_path / "missing")


def _serve(source: object) -> WebServer:
    server = WebServer(source, interval=0.05)  # type: ignore[arg-type]
    server.start()
    return server


async def _get(url: str, **kw: object) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url, **kw) as r:  # type: ignore[arg-type]
        return r.status, await r.text()


@needs_assets
def test_server_refuses_requests_without_the_token_or_from_another_host() -> None:
    server = _serve(SyntheticSource(load("clos-2p")))
    try:
        base = f"http://127.0.0.1:{server.port}"
        tok = f"token={server.token}"
        for path in ("/", "/api/topology", "/api/snapshot", "/vendor/d3.min.js",
                     "/static/app.js", f"/?token={server.token[:-1]}x"):
            status, _ = asyncio.run(_get(base + path))
            assert status == 403, path
        status, _ = asyncio.run(_get(f"{base}/api/topology?{tok}",
                                     headers={"Host": f"evil.example:{server.port}"}))
        assert status == 403
        status, body = asyncio.run(_get(f"{base}/?{tok}"))
        assert status == 200 and "/vendor/d3.min.js" in body and "http" not in body.lower(
        ).replace("http-equiv", "")
        status, body = asyncio.run(_get(f"{base}/api/topology?{tok}"))
        assert status == 200 and json.loads(body)["name"] == "clos-2p"
        status, body = asyncio.run(_get(f"{base}/static/..%2Fserver.py?{tok}"))
        assert status == 404
        assert server.url.startswith(f"http://127.0.0.1:{server.port}/?token=")
    finally:
        server.stop()
        server.stop()  # idempotent


@needs_assets
def test_event_stream_sends_a_snapshot_each_interval() -> None:
    server = _serve(SyntheticSource(load("clos-2p")))

    async def read(n: int) -> list[dict[str, object]]:
        out = []
        url = f"http://127.0.0.1:{server.port}/api/events?token={server.token}"
        async with aiohttp.ClientSession() as s, s.get(url) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            async for line in r.content:
                if line.startswith(b"data: "):
                    out.append(json.loads(line[6:]))
                    if len(out) == n:
                        return out
        return out

    try:
        snaps = asyncio.run(asyncio.wait_for(read(3), 30))
        assert len(snaps) == 3
        assert snaps[0]["t"] < snaps[1]["t"] < snaps[2]["t"]  # a new one every time
        assert all(len(s["load"]) == len(load("clos-2p").links) for s in snaps)  # type: ignore
    finally:
        server.stop()
