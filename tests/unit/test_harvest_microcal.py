"""Calibration from micro-benchmarks: the design, the fit and its errors, the file.

The fit is checked against parameters chosen here (synthetic step times with noise), the
file against controller/harvest/calfile.py's reader, and `mrcnet harvest --calibration`
against the same command with the parameters spelled out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path

import pytest

from controller.harvest import calfile
from controller.harvest import cli as harvest_cli
from controller.harvest.model import HarvestError
from mrcnet.fabric import microcal
from mrcnet.fabric.collectives import Calibration

BLOCK = 32 << 10
ALPHA, DELTA, RATE, ACK = 2e-3, 4e-4, 18e6, 1.5e-4


def _time(blocks: int, hops: int, noise: float, rng: random.Random, ack_hops: int = 0
          ) -> float:
    return (ALPHA + DELTA * hops + ACK * ack_hops + 8 * blocks * BLOCK / RATE) * \
        (1 + rng.gauss(0, noise))


def test_the_design_measures_one_transfer_at_a_time_then_every_port_then_reconfigurations(
) -> None:
    d = microcal.design(8)
    p2p = [(k, h, a) for kind, k, h, a in d.kinds if kind == "p2p"]
    # every size at every hop count, on the ring (ACKs n - h hops back) and on the half rings
    # (n/2 - h hops back)
    assert sorted(set(p2p)) == sorted((k, h, a) for k in microcal.BLOCK_COUNTS
                                      for h in microcal.HOPS for a in (8 - h, 4 - h))
    assert len(p2p) == 2 * len(microcal.BLOCK_COUNTS) * len(microcal.HOPS) * microcal.REPEATS
    for (kind, k, h, _a), st in zip(d.kinds, d.collective.steps):
        if kind in ("p2p", "settle"):
            assert st.pairs == ((0, h),) and st.blocks[0] == tuple(range(k))
        else:
            assert len(st.pairs) == 8  # every GPU writes to a neighbour
    # the ring, the half rings (their first step only settles), then each flip changes the
    # topology
    names = [name for _a, _b, name in d.intervals]
    assert names[:2] == ["ring", "halves"] and all(a != b for a, b in itertools.pairwise(names))
    assert d.kinds[d.intervals[1][0] - 1][0] == "settle"
    assert d.intervals[-1][1] == d.steps
    halves = microcal.half_rings(8)
    assert sorted(halves) == [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4)]
    assert "halves" not in [name for _a, _b, name in microcal.design(6, block_counts=(1, 2)).intervals]
    with pytest.raises(microcal.MicroCalibrationError):
        microcal.design(3)  # three hops need at least four GPUs


def test_the_fit_recovers_known_parameters_with_honest_errors() -> None:
    rng = random.Random(5)
    samples = [microcal.Sample(k, h, _time(k, h, 0.01, rng))
               for _ in range(4) for h in (1, 2, 3) for k in (1, 2, 4, 8)]
    f = microcal.fit(samples, BLOCK)
    assert f.bandwidth_bps == pytest.approx(RATE, rel=0.03)
    assert abs(f.bandwidth_bps - RATE) <= 4 * f.bandwidth_se
    assert abs(f.alpha_s - ALPHA) <= max(4 * f.alpha_se, 1e-4)
    assert abs(f.delta_s - DELTA) <= max(4 * f.delta_se, 1e-4)
    exact = microcal.fit([microcal.Sample(k, h, _time(k, h, 0.0, rng))
                          for h in (1, 2, 3) for k in (1, 4)], BLOCK)
    assert exact.bandwidth_bps == pytest.approx(RATE, rel=1e-9)
    assert exact.alpha_s == pytest.approx(ALPHA, rel=1e-6)
    assert exact.delta_s == pytest.approx(DELTA, rel=1e-6)
    assert exact.bandwidth_se < 1e-3 * RATE


def test_the_fit_tells_the_acknowledgements_return_from_alpha_with_two_rings() -> None:
    rng = random.Random(3)
    n = 64
    samples = [microcal.Sample(k, h, _time(k, h, 0.0, rng, a), a)
               for h in (1, 2, 3) for k in (1, 4) for a in (n - h, n // 2 - h)]
    f = microcal.fit(samples, BLOCK)
    assert (f.alpha_s, f.delta_s, f.ack_delta_s, f.bandwidth_bps) == pytest.approx(
        (ALPHA, DELTA, ACK, RATE), rel=1e-6)
    # one ring: the return is n - h, an affine function of h, folded into alpha and delta
    ring = [s for s in samples if s.ack_hops == n - s.hops]
    f1 = microcal.fit(ring, BLOCK)
    assert f1.ack_delta_s == 0 and any("one ring" in x for x in f1.notes)
    assert (f1.alpha_s, f1.delta_s) == pytest.approx((ALPHA + n * ACK, DELTA - ACK), rel=1e-6)


def test_a_delay_fitted_below_zero_is_fixed_at_zero_and_the_rest_refitted() -> None:
    """A one-hop transfer forwards through no GPU: T = delta (h - 1) + 8 k B / c, so the
    unconstrained alpha is -delta. Fixed at 0, delta and c are fitted again: every sample
    is then predicted closer than with alpha clamped after the fit (off by delta each)."""
    true_delta = 2e-3
    samples = [microcal.Sample(k, h, true_delta * (h - 1) + 8 * k * BLOCK / RATE)
               for h in (1, 2, 3) for k in (1, 2, 4, 8)]
    f = microcal.fit(samples, BLOCK)
    assert f.alpha_s == 0 and any(n.startswith("alpha fitted") for n in f.notes)
    assert 0 < f.delta_s < true_delta
    assert f.residual_s < 0.5 * true_delta
    worst = max(abs(f.delta_s * s.hops + 8 * s.blocks * BLOCK / f.bandwidth_bps - s.seconds)
                for s in samples)
    assert worst < true_delta


def test_the_fit_refuses_what_cannot_give_the_parameters() -> None:
    with pytest.raises(microcal.MicroCalibrationError, match="two hop counts"):
        microcal.fit([microcal.Sample(k, 1, 0.1 * k) for k in (1, 2, 4)], BLOCK)
    flat = [microcal.Sample(k, h, 0.5 - 0.01 * k) for h in (1, 2) for k in (1, 2, 4)]
    with pytest.raises(microcal.MicroCalibrationError, match="did not take longer"):
        microcal.fit(flat, BLOCK)


def _calibration(tmp_path: Path) -> tuple[microcal.MicroCalibration, Path]:
    rng = random.Random(9)
    d = microcal.design(8)
    seconds = [_time(k, h, 0.0, rng, a) if kind == "p2p" else 0.02 for kind, k, h, a in d.kinds]
    gaps = [0.125 if kind in ("flip", "settle") else 0.004 for kind, *_ in d.kinds]
    cal = microcal.measure(d.kinds, seconds, gaps, BLOCK, dark_s=0.1, frame_bytes=4096)
    cal.fabric = {"topology": "scaleup-ocs", "gpus": 8}
    return cal, microcal.save(cal, tmp_path / "calibration.json")


def test_the_file_round_trips_and_bad_files_are_refused(tmp_path: Path) -> None:
    cal, path = _calibration(tmp_path)
    assert cal.alpha_r_overhead_s == pytest.approx(0.125 - 0.004 - 0.1)
    assert cal.busy_over_single == pytest.approx(0.02 / _time(1, 1, 0.0, random.Random(), 7))
    data = calfile.load(path)
    assert data["bandwidth_bps"] == pytest.approx(RATE) and data["fabric"]["gpus"] == 8
    assert data["created_unix"] > 0 and len(data["samples"]) == 48
    # the return per hop, and under load half a 4096-byte frame's wire time more
    assert data["ack_delta_s"] == pytest.approx(ACK)
    assert data["ack_hop_s"] == pytest.approx(ACK + 4096 * 8 / 2 / RATE)
    assert Calibration.from_file(data, dark_s=0.1).ack_hop_s == pytest.approx(data["ack_hop_s"])
    params = Calibration.from_file(data, dark_s=0.1).params(2)
    assert params.alpha_r == pytest.approx(0.125 - 0.004)  # the dark time and the overhead
    assert (params.bandwidth_bps, params.alpha, params.delta) == pytest.approx(
        (RATE, ALPHA, DELTA))
    for bad, needle in [({"format": "other"}, "not a calibration"),
                        ({**data, "version": 7}, "version"),
                        ({**data, "bandwidth_bps": 0}, "bandwidth_bps"),
                        ({**data, "delta_s": float("nan")}, "delta_s"),
                        ({**data, "alpha_s": "1ms"}, "alpha_s"),
                        ({**data, "ack_hop_s": -1e-3}, "ack_hop_s")]:
        target = tmp_path / "bad.json"
        target.write_text(json.dumps(bad))
        with pytest.raises(HarvestError, match=needle):
            calfile.load(target)
    with pytest.raises(HarvestError, match="calibration file"):
        calfile.load(tmp_path / "missing.json")


def test_harvest_reads_the_parameters_from_the_file(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    _cal, path = _calibration(tmp_path)
    data = calfile.load(path)

    def run(*argv: str) -> dict[str, object]:
        parser = argparse.ArgumentParser()
        harvest_cli.add_arguments(parser)
        assert harvest_cli.run(parser.parse_args([*argv, "--json", "--size", "2MiB",
                                                  "--alpha-r", "100ms"])) == 0
        out: dict[str, object] = json.loads(capsys.readouterr().out)
        out.pop("synthesis_s")  # how long the solver took: not a result
        return out

    from_file = run("--calibration", str(path))
    spelled = run("--bandwidth", repr(data["bandwidth_bps"]), "--alpha",
                  f"{data['alpha_s']}s", "--delta", f"{data['delta_s']}s")
    assert from_file == spelled
