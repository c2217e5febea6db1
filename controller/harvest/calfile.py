"""The calibration file: the cost model's parameters measured on a fabric, read by the
scheduler (``mrcnet harvest --calibration FILE``) and by collective runs (``mrcnet up
--calibration FILE``). mrcnet/fabric/microcal.py measures and writes it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .model import HarvestError

FORMAT = "mrcnet-harvest-calibration"
VERSION = 1
REQUIRED = ("bandwidth_bps", "alpha_s", "delta_s", "alpha_r_overhead_s")
OPTIONAL = ("ack_delta_s", "ack_hop_s")  # the acknowledgements' return (0 when absent)


def load(path: str | Path) -> dict[str, Any]:
    """A calibration file, checked: its format and the parameters the model needs, finite
    and in range (HarvestError says what is wrong)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise HarvestError(f"calibration file {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise HarvestError(f"{path} is not a calibration file (format {FORMAT})")
    if data.get("version") != VERSION:
        raise HarvestError(f"{path}: calibration version {data.get('version')!r}; this reads "
                           f"version {VERSION}")
    for key in (*REQUIRED, *(k for k in OPTIONAL if k in data)):
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value < 0 \
                or (key == "bandwidth_bps" and value <= 0):
            raise HarvestError(f"{path}: {key} must be a finite number >= 0 (bandwidth > 0), "
                               f"got {value!r}")
    return data
