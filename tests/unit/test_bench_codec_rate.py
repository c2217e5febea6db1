"""`mrcnet bench codec --json` runs and prints the documented figures (no timing thresholds)."""

from __future__ import annotations

import argparse
import json

import pytest

from testbed.bench import codec_rate as bench


def test_codec_bench_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    assert bench.run(parser.parse_args(["--json", "--seconds", "0.05", "--rounds", "1"])) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("packets_per_s", "packets_per_s_verified", "encode_per_s", "decode_per_s"):
        assert isinstance(figures[key], int) and figures[key] > 0
    assert figures["frame_bytes"] == 14 + 40 + 8 + 12 + 4 + 16 + 4096 + 4
    assert figures["meets_target"] == (figures["packets_per_s"] >= figures["target_packets_per_s"])
    from hosts.wire import codec

    assert figures["backend"] == codec.BACKEND
    for key in ("encode_us", "decode_us", "decode_verified_us"):
        assert isinstance(figures[key], float) and figures[key] > 0
    if codec.BACKEND == "c":
        assert figures["python_encode_us"] > 0 and figures["speedup_best_batch"] > 0
    else:
        assert figures["backend_reason"]
