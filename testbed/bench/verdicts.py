"""A figure from a run that could not keep up is not a result: every fabric benchmark ends here.

Each benchmark names its runs' fidelity verdicts (``True``, ``False``, or ``None`` when not
every process was measured, mrcnet/fabric/fidelity.py). ``conclude`` adds their combined
verdict to the figures (``fidelity_verdict``), prints one line per run that was not faithful
(on stderr, so ``--json`` output stays one object) and a closing verdict line, and with
``--strict`` turns a run that was not faithful into exit status 3: the benchmark then refuses
to report its figures as a result.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from mrcnet.fabric.fidelity import combined

NOT_FAITHFUL_EXIT = 3


def add_strict(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--strict", action="store_true",
                        help=f"exit {NOT_FAITHFUL_EXIT} when a run was not faithful, or its "
                             "fidelity was not measured (its figures are then no result)")


def conclude(bench: str, figures: dict[str, Any], runs: Mapping[str, bool | None],
             strict: bool, status: int = 0) -> int:
    """Record and print the verdicts of ``runs`` (label -> verdict); the exit status: the
    benchmark's own ``status`` when it is not 0, else 3 under ``strict`` when a run was not
    faithful, else 0."""
    overall = combined(list(runs.values()))
    figures["fidelity_verdict"] = {"faithful": overall, "runs": dict(runs)}
    for label, value in runs.items():
        if value is not True:
            what = "fidelity not measured" if value is None else "not faithful"
            print(f"[bench {bench}] WARNING: run {label}: {what}; its figures are not a "
                  "result (see the run's fidelity report; try a larger --tdf)",
                  file=sys.stderr)
    word = {True: "yes", False: "NO", None: "unknown"}[overall]
    print(f"[bench {bench}] faithful: {word} ({sum(v is True for v in runs.values())} of "
          f"{len(runs)} runs)", file=sys.stderr)
    if status:
        return status
    return NOT_FAITHFUL_EXIT if strict and overall is not True else 0
