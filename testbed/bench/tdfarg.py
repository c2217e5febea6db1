"""``--tdf N|auto`` for the fabric benchmarks: a factor, or one calibrated on this machine.

``auto`` runs mrcnet/fabric/calibrate.py with the benchmark's own fabric options and
workload (smaller flows) before the measured rounds, and the figures carry the search
(``tdf_calibration``: each probe's factor, verdict and run folder), so a benchmark figure
comes from a factor this machine keeps up with, not from a constant measured elsewhere.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_tdf(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--tdf", default=default, metavar="N|auto",
                        help="time-dilation factor of the run's clock (times are virtual), "
                             "or 'auto': the smallest faithful factor, calibrated first "
                             f"(default {default})")


def parse(text: str) -> float | None:
    """A factor >= 1, or None for ``auto`` (ValueError otherwise)."""
    if str(text).strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--tdf {text!r}: a number >= 1 or 'auto'") from None
    if not value >= 1:
        raise ValueError(f"--tdf {text!r}: a number >= 1 or 'auto'")
    return value


def resolve(args: argparse.Namespace, opts: Any, workload: str, size: int, bench: str,
            out: dict[str, Any], qp_type: str = "MRC") -> float:
    """The factor for the benchmark's fabric ``opts``: ``--tdf`` as given, or calibrated
    with ``workload`` (recorded in ``out["tdf_calibration"]``)."""
    value = parse(args.tdf)
    if value is not None:
        return value
    from mrcnet.fabric.calibrate import calibrate

    def say(text: str) -> None:
        print(f"[bench {bench}] {text}", file=sys.stderr, flush=True)

    found = calibrate(opts, workload, size, qp_type=qp_type, say=say)
    out["tdf_calibration"] = found
    how = "faithful" if found["verified"] else "no faithful factor found: its last suggestion"
    say(f"calibrated TDF {found['tdf']:g} ({how}; {len(found['probes'])} probes, "
        f"{found['seconds']:.0f} s)")
    return float(found["tdf"])


__all__ = ["add_tdf", "parse", "resolve"]
