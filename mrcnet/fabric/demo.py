"""The demonstration's choices and its last line (``mrcnet up --demo``, ``make topology``).

The factor: the calibration (mrcnet/fabric/calibrate.py) finds the smallest factor at which
one round of the workload is faithful; the demonstration runs rounds for 8 s with a link
flap, and over that many rounds a factor at the edge meets the machine's hiccups (in one run
on the 2-core machine, TDF 8 was faithful in its probe and 2 of 24 rounds were not), so it
takes the next factor of the grid. The verdict line says, from the results alone, whether
every byte was verified, whether the flap was survived and whether the run was faithful.
"""

from __future__ import annotations

from typing import Any

from mrcnet.fabric.fidelity import nice_tdf


def with_margin(calibration: dict[str, Any]) -> float:
    """The demonstration's factor: one grid step above the calibrated one."""
    tdf = float(calibration["tdf"])
    return nice_tdf(tdf * 1.0001) if calibration.get("verified") else tdf


def margin_note(calibration: dict[str, Any]) -> str:
    if not calibration.get("verified"):
        return "the calibration found no faithful factor: its last suggestion"
    return (f"calibrated {calibration['tdf']:g} on this machine in "
            f"{calibration['seconds']:.0f} s, plus one step of margin for 8 s of rounds")


def verdict_line(res: dict[str, Any], calibration: dict[str, Any] | None,
                 calibrated: bool) -> str:
    """One line: bytes verified, the flap, the clock and 'faithful: yes' (or NO)."""
    rounds = res.get("workloads", [])
    flows = sum(int(w["flows"]) for w in rounds)
    verified = sum(int(w["verified_flows"]) for w in rounds)
    mib = res.get("verified_bytes", 0) / 2**20
    parts = []
    if rounds and verified == flows and res.get("completed"):
        parts.append(f"every byte verified ({len(rounds)} rounds, {mib:.0f} MiB)")
    else:
        parts.append(f"NOT every byte verified ({verified}/{flows} flows)")
    events = res.get("link_events", [])
    unit = "virtual s" if res.get("time") == "virtual" else "s"
    downs = [e for e in events if not e["up"]]
    ups = [e for e in events if e["up"]]
    if downs and ups:
        ok = res.get("completed") and res.get("qp_errors", 0) == 0
        parts.append(f"link {downs[0]['link']} down at {downs[0]['t']:.1f} {unit}, up at "
                     f"{ups[-1]['t']:.1f} {unit}: {'survived' if ok else 'NOT survived'} "
                     f"({res.get('qp_errors', 0)} QP errors)")
    how = "calibrated" if calibrated and calibration else "as given"
    parts.append(f"TDF {res.get('tdf', 1.0):g} ({how})")
    faithful = res.get("faithful")
    parts.append(f"faithful: {'yes' if faithful else 'NO' if faithful is False else '-'}")
    return "demo: " + "; ".join(parts)
